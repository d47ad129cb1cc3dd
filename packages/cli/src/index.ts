// The OIDC provider's tests read project.edn and resolve secret references as svc does; its
// package.json (inside its signed archive) names this package, so these stay importable here.
export { parseEdn, resolveSecret } from '@svc/runtime';
export { CliError, EXIT, UsageError } from './cli-error.js';
export { COMMANDS } from './commands/index.js';
export {
  CLI_FAILURE_CODES,
  type CliFailureCode,
  type FailureCode,
  type SvcErrorCode,
} from './failure-codes.js';
export { main, VERSION } from './main.js';

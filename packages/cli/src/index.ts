export { CliError, EXIT, UsageError } from './cli-error.js';
export { COMMANDS } from './commands/index.js';
export { resolveSecret } from './control.js';
export { parseEdn } from './edn.js';
export {
  AUDIT_SHIPPING_FAILURE_CODES,
  type AuditShippingFailureCode,
  CLI_FAILURE_CODES,
  type CliFailureCode,
  type FailureCode,
  type SvcErrorCode,
} from './failure-codes.js';
export { main, VERSION } from './main.js';
export { defaultProjectEdn, loadProject, type Project, projectNameFor } from './project.js';

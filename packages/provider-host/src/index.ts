// @svc/provider-host: runs a provider package confined in its own child process and gives the
// service a ProviderHandle on it whose every answer has been checked for shape (docs/providers.md, section 2).
export { ANSWER_LIMITS, checkBeginAnswer, checkCredentialIdAnswer, checkFinishAnswer, checkHealthAnswer } from './answer-shape.js';
export { PROVIDER_HOST_FAILURE_CODES, type ProviderHostFailureCode } from './failure-codes.js';
export { ProviderError, type ProviderFailure } from './provider-error.js';
export {
  confinedNodeArgs,
  PROVIDER_HOST_DEFAULTS,
  type ProviderHostLog,
  type ProviderHostOptions,
  startProviderHost,
} from './start-provider-host.js';

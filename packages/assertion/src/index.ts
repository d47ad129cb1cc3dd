// @svc/assertion: one function, verifySvcAssertion, for applications behind the svc auth gateway.
export {
  MAX_ASSERTION_LIFETIME_SECONDS,
  type SvcAssertionError,
  type SvcAssertionErrorCode,
  type SvcIdentity,
  type VerifySvcAssertionOptions,
  verifySvcAssertion,
} from './verify-svc-assertion.js';

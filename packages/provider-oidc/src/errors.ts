/**
 * Why an OIDC ceremony was refused, stable for the service's audit (`provider.signin_failed`)
 * and for tests: callers branch on `code`, never on the message.
 */
export type OidcRefusalCode =
  /** The module's `:config` is invalid (every problem in the message). */
  | 'invalid_config'
  /** The issuer's discovery document could not be fetched, or it names another issuer. */
  | 'discovery_failed'
  /** The OpenID Provider sent the browser back with an error (`error=access_denied`...). */
  | 'provider_error'
  /** The flow state the service kept is not one this provider made, or it is for another issuer or callback. */
  | 'invalid_flow_state'
  /** The callback or the token response failed a check: state, `iss`, PKCE, nonce, the ID token. */
  | 'response_refused'
  /** The token endpoint refused the code (used, expired, for another client) or the client. */
  | 'code_refused';

/**
 * An OIDC sign-in the provider refuses. The message is one line for an operator's log and
 * never holds a secret, a code or a token.
 *
 * @example
 * throw new OidcRefusal('provider_error', 'the OpenID Provider refused the sign-in: access_denied');
 */
export class OidcRefusal extends Error {
  readonly code: OidcRefusalCode;

  constructor(code: OidcRefusalCode, message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = 'OidcRefusal';
    this.code = code;
  }
}

import { ApiError, ApiUnreachableError, InsecureBearerUrlError } from '@svc/client';
import { AuthError, type ErrorCode, isErrorCode } from '@svc/core';
import { CliError, EXIT } from './cli-error.js';

/**
 * What to do after each HTTP refusal, or null when its detail says enough. Typed by code: a
 * code added to core's registry does not compile until it is given a hint here (or null).
 */
const HINTS: { readonly [C in ErrorCode]: string | null } = {
  invalid_request: null,
  invalid_bootstrap_token: 'run `svc auth init <PROJECT>` for a new bootstrap token',
  bootstrap_token_expired: null,
  bootstrap_token_used: null,
  invalid_challenge: 'try again: challenges are single-use and expire',
  invalid_signature: 'is this device key enrolled? check `svc auth devices`',
  invalid_refresh_token: 'the session has ended; run `svc auth login --key FILE`',
  refresh_token_reused: 'the session was revoked because a refresh token was reused; run `svc auth login --key FILE`',
  invalid_token: 'run `svc auth login --key FILE`',
  invalid_dpop_proof:
    'the session is bound to the device key that signed in (DPoP): keep that key file where `svc auth login --key FILE` read it, or set $SVC_DEVICE_KEY to it; else sign in again',
  use_dpop_nonce: 'try again: the server nonce expired',
  invalid_pairing_code: null,
  invalid_pairing_intent: null,
  invalid_credential: null,
  invalid_flow: 'start the sign-in again: a provider flow is single-use and expires',
  invalid_handoff:
    'open the page again: a sign-in handoff code is single-use, lasts 30 s and works only on its own host, in the browser that asked for it',
  already_linked: 'check the links with `svc auth links`',
  user_disabled: 'an operator enables the user with `svc auth users enable <SUBJECT>`',
  user_exists: 'list the users with `svc auth users --filter <TEXT>`',
  group_exists: 'list the groups with `svc auth groups`',
  last_management_user: 'enroll or enable another administrator first (`svc auth pair`, `svc auth users enable`)',
  last_credential: 'add another passkey first, or ask an operator for a recovery code (`svc auth pair --provider ...`)',
  invalid_scim_token: 'create a SCIM token with `svc auth scim token create --name NAME` (docs/scim.md)',
  forbidden_host: null,
  insufficient_claims: null,
  csrf_refused: null,
  not_found: 'check the id with `svc auth users`, `svc auth devices` or `svc auth sessions`',
  method_not_allowed: null,
  already_enrolled: 'sign in with it: `svc auth login --key FILE`',
  payload_too_large: null,
  unsupported_media_type: null,
  rate_limited: 'wait and try again',
  internal_error: null,
  store_unavailable: null,
  management_bearer_not_loopback: null,
  upstream_unavailable: 'is the application behind the gateway (`:svc/app-upstream`) running?',
  upstream_timeout: 'is the application behind the gateway (`:svc/app-upstream`) answering?',
  provider_unavailable: 'check the provider module named in the detail: `svc` logs `provider.unavailable` and restarts its process',
  identity_provider_unavailable:
    "check that the provider module's identity provider (`:oidc/issuer`) is reachable and its discovery document names that issuer",
};

/** How {@link explainFailure} reads an `invalid_request`. */
export interface ExplainOptions {
  /**
   * `usage` (the default): the arguments were malformed (a bad public key, a ttl out of range,
   * a malformed id), exit 2. `refusal`: the command's own arguments were checked before and
   * `invalid_request` is a refusal of the request as such (removing the last management
   * device), exit 1.
   */
  readonly invalidRequest?: 'usage' | 'refusal';
  /** Hints of this command that say more than the shared ones (e.g. which listing has the id for `not_found`). */
  readonly hints?: { readonly [C in ErrorCode]?: string };
}

function isHttpUrl(url: string): boolean {
  try {
    const { protocol } = new URL(url);
    return protocol === 'http:' || protocol === 'https:';
  } catch {
    return false;
  }
}

/**
 * Turns a refusal from core or from the management API into one clear line: what failed, the
 * stable error code, and what to do. Malformed input (`invalid_request`, a URL that is not
 * http(s)) is a usage error (exit 2); every other refusal exits 1.
 *
 * @example
 * catch (error) { throw explainFailure('enrollment refused', error); }
 */
export function explainFailure(what: string, error: unknown, options: ExplainOptions = {}): unknown {
  if (error instanceof AuthError || error instanceof ApiError) {
    // An ApiError may carry a code this build does not know (a newer server): no hint then.
    const hint = isErrorCode(error.code) ? (options.hints?.[error.code] ?? HINTS[error.code]) : null;
    const usage = error.code === 'invalid_request' && options.invalidRequest !== 'refusal';
    return new CliError(`${what} (${error.code}): ${error.detail}${hint === null ? '' : `; ${hint}`}`, {
      cause: error,
      exitCode: usage ? EXIT.usage : EXIT.failure,
    });
  }
  const url = error instanceof InsecureBearerUrlError || error instanceof ApiUnreachableError ? error.url : undefined;
  if (url !== undefined && !isHttpUrl(url)) {
    return new CliError(`${what}: the URL ${url} is not an http:// or https:// URL (--url, --node-url)`, {
      cause: error,
      code: 'usage_error',
    });
  }
  if (error instanceof InsecureBearerUrlError) return new CliError(`${what} (${error.code}): ${error.message}`, { cause: error });
  if (error instanceof ApiUnreachableError) {
    return new CliError(`${what}: cannot reach the management API at ${error.url}; is \`svc auth serve\` running there? (--url)`, {
      cause: error,
    });
  }
  return error;
}

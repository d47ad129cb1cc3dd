import { ApiError, ApiUnreachableError, InsecureBearerUrlError } from '@svc/client';
import { AuthError } from '@svc/core';
import { CliError } from './cli-error.js';

const HINTS: Readonly<Record<string, string>> = {
  invalid_bootstrap_token: 'run `svc auth init <PROJECT>` for a new bootstrap token',
  already_enrolled: 'that key is already enrolled; sign in with `svc auth login --key FILE`',
  invalid_signature: 'is this device key enrolled? check `svc auth devices <PROJECT>`',
  invalid_challenge: 'try again: challenges are single-use and expire',
  invalid_refresh_token: 'the session has ended; run `svc auth login --key FILE`',
  refresh_token_reused: 'the session was revoked because a refresh token was reused; run `svc auth login --key FILE`',
  invalid_token: 'run `svc auth login --key FILE`',
  not_found: 'check the id with `svc auth devices` or `svc auth sessions`',
  rate_limited: 'wait and try again',
};

/**
 * Turns a refusal from core or from the management API into one clear line: what failed, the
 * stable error code, and what to do.
 *
 * @example
 * catch (error) { throw explainFailure('enrollment refused', error); }
 */
export function explainFailure(what: string, error: unknown): unknown {
  if (error instanceof AuthError || error instanceof ApiError) {
    const hint = HINTS[error.code];
    return new CliError(`${what} (${error.code}): ${error.detail}${hint === undefined ? '' : `; ${hint}`}`, { cause: error });
  }
  if (error instanceof InsecureBearerUrlError) return new CliError(`${what} (${error.code}): ${error.message}`, { cause: error });
  if (error instanceof ApiUnreachableError) {
    return new CliError(`${what}: cannot reach the management API at ${error.url}; is \`svc auth serve\` running there? (--url)`, {
      cause: error,
    });
  }
  return error;
}

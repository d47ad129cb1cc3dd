import { ApiError, ApiUnreachableError, InsecureBearerUrlError } from '@svc/client';
import { AuthError } from '@svc/core';
import { CliError, EXIT } from './cli-error.js';

const HINTS: Readonly<Record<string, string>> = {
  invalid_bootstrap_token: 'run `svc auth init <PROJECT>` for a new bootstrap token',
  already_enrolled: 'that key is already enrolled; sign in with `svc auth login --key FILE`',
  invalid_signature: 'is this device key enrolled? check `svc auth devices`',
  invalid_challenge: 'try again: challenges are single-use and expire',
  invalid_refresh_token: 'the session has ended; run `svc auth login --key FILE`',
  refresh_token_reused: 'the session was revoked because a refresh token was reused; run `svc auth login --key FILE`',
  invalid_token: 'run `svc auth login --key FILE`',
  not_found: 'check the id with `svc auth devices` or `svc auth sessions`',
  rate_limited: 'wait and try again',
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
    const hint = HINTS[error.code];
    const usage = error.code === 'invalid_request' && options.invalidRequest !== 'refusal';
    return new CliError(`${what} (${error.code}): ${error.detail}${hint === undefined ? '' : `; ${hint}`}`, {
      cause: error,
      exitCode: usage ? EXIT.usage : EXIT.failure,
    });
  }
  const url = error instanceof InsecureBearerUrlError || error instanceof ApiUnreachableError ? error.url : undefined;
  if (url !== undefined && !isHttpUrl(url)) {
    return new CliError(`${what}: the URL ${url} is not an http:// or https:// URL (--url, --node-url)`, {
      cause: error,
      exitCode: EXIT.usage,
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

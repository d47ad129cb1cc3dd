import type { ClientFailureCode } from './failure-codes.js';
/**
 * A refusal from the management API: the HTTP status and the contract's stable `code` and
 * `detail` from the `application/problem+json` body. Branch on `code`, never on `detail`.
 */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly detail: string;

  constructor(status: number, code: string, detail: string) {
    super(`${code}: ${detail}`);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

/** The management API could not be reached at all (connection refused, DNS, reset). */
export class ApiUnreachableError extends Error {
  readonly code: Extract<ClientFailureCode, 'api_unreachable' | 'node_unreachable'>;
  readonly url: string;

  constructor(url: string, cause: unknown, code: Extract<ClientFailureCode, 'api_unreachable' | 'node_unreachable'> = 'api_unreachable') {
    super(`cannot reach the management API at ${url}`, { cause });
    this.name = 'ApiUnreachableError';
    this.code = code;
    this.url = url;
  }
}

/**
 * The {@link ApiError} for a non-2xx answer whose body text is `text`: the problem's `code`
 * and `detail` when the body is problem+json, else a generic `http_<status>` code.
 *
 * @example
 * if (!res.ok) throw problemFromResponse(res, await res.text());
 */
export function problemFromResponse(res: Response, text: string): ApiError {
  try {
    const body = JSON.parse(text) as { code?: unknown; detail?: unknown };
    if (typeof body.code === 'string') {
      return new ApiError(res.status, body.code, typeof body.detail === 'string' ? body.detail : res.statusText);
    }
  } catch {
    // not problem+json: fall through to a generic error
  }
  return new ApiError(res.status, `http_${res.status}`, res.statusText || 'unexpected response');
}

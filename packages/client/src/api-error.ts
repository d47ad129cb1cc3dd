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
  readonly url: string;

  constructor(url: string, cause: unknown) {
    super(`cannot reach the management API at ${url}`, { cause });
    this.name = 'ApiUnreachableError';
    this.url = url;
  }
}

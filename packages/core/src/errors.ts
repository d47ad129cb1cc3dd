/**
 * The one error model of svc auth. Every refusal the service can give a caller is an
 * {@link AuthError} with a stable `code` from {@link ERROR_CODES}; the HTTP layer maps it to
 * `application/problem+json` (RFC 9457). Anything else that escapes is a bug and becomes a
 * generic 500 whose detail only reaches the log.
 */
import { BOOTSTRAP_TOKEN_TTL_SECONDS, formatLimit, MAX_REQUEST_BODY_BYTES, PAIRING_MAX_FAILURES } from './settings.js';

/** Every error code of the contract, with its HTTP status, title and meaning. */
export const ERROR_CODES = {
  invalid_request: {
    status: 400,
    title: 'Bad Request',
    meaning: 'malformed JSON, a missing, extra or ill-typed field, bad hex, or a wrong length',
  },
  invalid_bootstrap_token: { status: 401, title: 'Unauthorized', meaning: 'unknown bootstrap token' },
  bootstrap_token_expired: {
    status: 401,
    title: 'Unauthorized',
    meaning: `the bootstrap token is older than ${formatLimit(BOOTSTRAP_TOKEN_TTL_SECONDS, 'seconds')}`,
  },
  bootstrap_token_used: { status: 401, title: 'Unauthorized', meaning: 'the bootstrap token was already used once' },
  invalid_challenge: {
    status: 401,
    title: 'Unauthorized',
    meaning: 'unknown, expired or already used challenge',
  },
  invalid_signature: {
    status: 401,
    title: 'Unauthorized',
    meaning: 'the signature does not verify, or the key is not enrolled in that realm',
  },
  invalid_refresh_token: {
    status: 401,
    title: 'Unauthorized',
    meaning: 'unknown or expired refresh token, or its session is revoked or expired',
  },
  refresh_token_reused: {
    status: 401,
    title: 'Unauthorized',
    meaning: 'a retired refresh token was presented outside the grace interval: the session is now revoked',
  },
  invalid_token: {
    status: 401,
    title: 'Unauthorized',
    meaning: 'the bearer token is missing, unknown, expired, revoked, or bound to another realm',
  },
  invalid_pairing_code: {
    status: 401,
    title: 'Unauthorized',
    meaning: `the pairing code is wrong; the intent is burned after ${formatLimit(PAIRING_MAX_FAILURES, 'failures')}`,
  },
  invalid_pairing_intent: {
    status: 401,
    title: 'Unauthorized',
    meaning: 'unknown, expired, completed or burned enrolment intent',
  },
  forbidden_host: {
    status: 403,
    title: 'Forbidden',
    meaning: 'the Host or Origin is not loopback on the management API or on a node surface reached over loopback (DNS-rebinding defence)',
  },
  not_found: { status: 404, title: 'Not Found', meaning: 'unknown route or resource' },
  method_not_allowed: { status: 405, title: 'Method Not Allowed', meaning: 'the route exists but not for that method' },
  already_enrolled: { status: 409, title: 'Conflict', meaning: 'that public key is already enrolled' },
  payload_too_large: {
    status: 413,
    title: 'Content Too Large',
    meaning: `the body is over ${formatLimit(MAX_REQUEST_BODY_BYTES, 'bytes')}`,
  },
  unsupported_media_type: {
    status: 415,
    title: 'Unsupported Media Type',
    meaning: 'a body that is not application/json',
  },
  rate_limited: {
    status: 429,
    title: 'Too Many Requests',
    meaning:
      'too many failed attempts (or unanswered challenges) from one client or against one credential; Retry-After says when to try again',
  },
  internal_error: { status: 500, title: 'Internal Server Error', meaning: 'a bug; the detail is only in the log' },
  store_unavailable: {
    status: 503,
    title: 'Service Unavailable',
    meaning:
      'the control store cannot serve the request now (unreachable, not answering in time, locked by another process, full, or failing I/O); Retry-After says when to try again',
  },
  management_bearer_not_loopback: {
    status: 403,
    title: 'Forbidden',
    meaning: 'a management-realm bearer token is accepted on the node surface only from a loopback peer; use an SSH tunnel',
  },
} as const satisfies Record<string, { status: number; title: string; meaning: string }>;

/** A stable, machine-readable error code. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** Whether `value` is one of the contract's error codes. */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

/**
 * A refusal with a stable code. `detail` is safe to show the caller: it never contains a
 * token, a key or internal state.
 *
 * @example
 * throw new AuthError('invalid_token', 'the access token is expired or revoked');
 */
export class AuthError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly expose: boolean;
  readonly detail: string;
  /** Extra headers the HTTP layer should send (e.g. `Retry-After`). */
  readonly headers: Readonly<Record<string, string>>;
  /** The realm a bearer-token refusal is about, for `WWW-Authenticate`. */
  readonly realm: string | undefined;

  constructor(code: ErrorCode, detail: string, options: { headers?: Record<string, string>; realm?: string; cause?: unknown } = {}) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AuthError';
    this.code = code;
    this.status = ERROR_CODES[code].status;
    this.expose = this.status < 500;
    this.detail = detail;
    this.headers = Object.freeze({ ...(options.headers ?? {}) });
    this.realm = options.realm;
  }
}

/** One problem in a configuration file: where, which key, and what was expected. */
export interface ConfigProblem {
  readonly file: string;
  readonly key: string;
  readonly message: string;
}

/**
 * A configuration mistake found at load time. Never an HTTP error: the service refuses to
 * start and names every problem at once.
 */
export class ConfigError extends Error {
  readonly problems: readonly ConfigProblem[];
  constructor(problems: readonly ConfigProblem[]) {
    super(problems.map((p) => `${p.file}: ${p.key}: ${p.message}`).join('\n'));
    this.name = 'ConfigError';
    this.problems = Object.freeze([...problems]);
  }
}

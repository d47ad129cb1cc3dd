/**
 * The one error model of svc auth. Every refusal the service can give a caller is an
 * {@link AuthError} with a stable `code` from {@link ERROR_CODES}; the HTTP layer maps it to
 * `application/problem+json` (RFC 9457). Anything else that escapes is a bug and becomes a
 * generic 500 whose detail only reaches the log. Every other error class of every package
 * carries a stable `code` from its package's failure-code table ({@link CORE_FAILURE_CODES}
 * here, {@link defineFailureCodes} in each package), so callers (the CLI) branch on the code,
 * never on a class name or a message.
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
  invalid_dpop_proof: {
    status: 401,
    title: 'Unauthorized',
    meaning:
      'the DPoP proof (RFC 9449) is missing, malformed, not by the key the session is bound to, for another method or URL, too old, from the future, already used (jti), or not bound to the access token (ath)',
  },
  use_dpop_nonce: {
    status: 401,
    title: 'Unauthorized',
    meaning:
      'the DPoP proof carries a nonce the server no longer (or never) issued: retry with the nonce of the `DPoP-Nonce` header of this answer (RFC 9449 §8)',
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
  invalid_credential: {
    status: 401,
    title: 'Unauthorized',
    meaning:
      "a provider sign-in or link was refused: the provider's proof failed, its answer broke the provider's policy, the credential is not linked (and no provisioning applies), its link was removed, or its signature counter went back (a cloned authenticator)",
  },
  invalid_flow: {
    status: 400,
    title: 'Bad Request',
    meaning: 'unknown, expired or already finished provider flow, or a flow begun with another provider',
  },
  invalid_handoff: {
    status: 400,
    title: 'Bad Request',
    meaning:
      'a sign-in handoff code (`:svc/app-auth-origin`) was refused: unknown or already used, older than 30 s, made for another host, begun in another browser, or its sign-in ended',
  },
  already_linked: { status: 409, title: 'Conflict', meaning: 'that external identity is already linked in that realm' },
  user_disabled: {
    status: 403,
    title: 'Forbidden',
    meaning:
      'the user is disabled (by an operator, the company directory, or because new users wait for approval): every sign-in is refused until an operator enables them',
  },
  user_exists: {
    status: 409,
    title: 'Conflict',
    meaning: 'a user with that subject, or with that SCIM userName in the realm, already exists',
  },
  group_exists: { status: 409, title: 'Conflict', meaning: 'a group with that name already exists in the realm' },
  last_management_user: {
    status: 409,
    title: 'Conflict',
    meaning: 'refusing to disable or remove the last active management user who can sign in: enroll or enable another administrator first',
  },
  last_credential: {
    status: 409,
    title: 'Conflict',
    meaning: 'refusing to remove your last way to sign in (passkey, linked login or device key): add another first',
  },
  invalid_scim_token: { status: 401, title: 'Unauthorized', meaning: 'the SCIM bearer token is missing, unknown or revoked' },
  forbidden_host: {
    status: 403,
    title: 'Forbidden',
    meaning: 'the Host or Origin is not loopback on the management API or on a node surface reached over loopback (DNS-rebinding defence)',
  },
  insufficient_claims: {
    status: 403,
    title: 'Forbidden',
    meaning:
      'the application gateway knows the caller, but a requirement of the path (`:svc/app-require`: subject, group, verified email domain, sign-in method or sign-in age) is not met',
  },
  csrf_refused: {
    status: 403,
    title: 'Forbidden',
    meaning:
      "a request authenticated by the gateway's session cookies, with a method that changes state, does not come from the gateway's own origin (`Origin`, else `Sec-Fetch-Site`): cross-site request forgery",
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
  upstream_unavailable: {
    status: 502,
    title: 'Bad Gateway',
    meaning:
      'the application gateway could not reach its upstream (`:svc/app-upstream`): connection refused or reset, or an answer that is not HTTP; nothing of it reached the caller',
  },
  provider_unavailable: {
    status: 503,
    title: 'Service Unavailable',
    meaning:
      'a provider package (a passkey or OIDC login) cannot serve the ceremony now: its confined process ended, does not answer in time, or is restarting; the detail names the provider module; Retry-After says when to try again; never counted as a failed attempt',
  },
  identity_provider_unavailable: {
    status: 502,
    title: 'Bad Gateway',
    meaning:
      'a provider package cannot use its identity provider: it is unreachable or does not answer in time, or its discovery document does not hold together (it names another issuer); the detail names the provider module; Retry-After says when to try again; never counted as a failed attempt',
  },
  upstream_timeout: {
    status: 504,
    title: 'Gateway Timeout',
    meaning: 'the upstream of the application gateway did not connect or answer in time',
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
 * The 5xx codes whose detail the caller sees: a provider outage names the provider module (an
 * alias of `project.edn`, in a sentence core writes; never the provider's own text), so a user
 * knows which login is down. Every other 5xx shows only the registry's meaning.
 */
const DETAILED_SERVER_ERRORS: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['provider_unavailable', 'identity_provider_unavailable']);

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
    this.expose = this.status < 500 || DETAILED_SERVER_ERRORS.has(code);
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
  readonly code = 'config_invalid' as const satisfies CoreFailureCode;
  readonly problems: readonly ConfigProblem[];
  constructor(problems: readonly ConfigProblem[]) {
    super(problems.map((p) => `${p.file}: ${p.key}: ${p.message}`).join('\n'));
    this.name = 'ConfigError';
    this.problems = Object.freeze([...problems]);
  }
}

/** The CLI's exit codes a failure can map to: 1 a failure, 2 a usage error. */
export type FailureExit = 1 | 2;

/**
 * One failure code of a package's table: `raisedBy` names the one class that carries the code
 * (and its package); `exit` is what `svc` exits with when the failure ends a command.
 */
export interface FailureCodeEntry {
  readonly raisedBy: string;
  readonly exit: FailureExit;
  readonly meaning: string;
}

/** A package's failure codes: code → entry. */
export type FailureCodeTable = Readonly<Record<string, FailureCodeEntry>>;

// Every table defined in this process, shared through a registered symbol: a store addon
// loads its own copy of its package (and of core), and its errors must be recognised by the
// copy of core the service runs on.
const REGISTRY_KEY = Symbol.for('svc.failure-codes');
const shared = globalThis as { [REGISTRY_KEY]?: Map<string, FailureCodeEntry> };
if (shared[REGISTRY_KEY] === undefined) shared[REGISTRY_KEY] = new Map();
const registry: Map<string, FailureCodeEntry> = shared[REGISTRY_KEY];

/**
 * Defines a package's failure-code table and registers its codes, so {@link errorCodeOf} and
 * {@link isFailureCode} recognise them (core cannot import the packages that raise them). Each
 * package calls it once, in the module its index exports the table from; the table comes back
 * frozen, with its exact keys for `satisfies keyof typeof TABLE`.
 *
 * @example
 * export const ADDONS_FAILURE_CODES = defineFailureCodes({
 *   addon_verification_failed: { raisedBy: 'AddonVerificationError (@svc/addons)', exit: 1, meaning: '...' },
 * });
 */
export function defineFailureCodes<const T extends Record<string, FailureCodeEntry>>(table: T): Readonly<T> {
  for (const [code, entry] of Object.entries(table)) registry.set(code, entry);
  return Object.freeze(table);
}

/**
 * Core's own failure codes: the errors of its classes that are not HTTP answers. Every other
 * package exports its own table from its index; the CLI merges them for exit codes and
 * `--json` problems, the docs generator for `docs/errors.md`.
 */
export const CORE_FAILURE_CODES = defineFailureCodes({
  config_invalid: {
    raisedBy: 'ConfigError (@svc/core)',
    exit: 1,
    meaning: "a configuration file (or a store module's `:config`) is invalid; every problem is named with its file and key",
  },
  store_open_failed: {
    raisedBy: 'StoreOpenError (@svc/core; thrown by svc-store-sqlite and svc-store-postgres)',
    exit: 1,
    meaning:
      'the control store was not opened: unsafe file permissions, not a control store, an unreachable or refusing server, a server that lets its role in without a credential (`refusal: "unauthenticated"`), a failed migration, or a schema newer than the store package; the message names the target and the fix',
  },
  assertion_keys_unsealable: {
    raisedBy: 'AssertionKeySealError (@svc/core)',
    exit: 1,
    meaning:
      "the cluster's assertion key set in the control store does not open with this node's key-encryption keys: sealed under another `:svc/key-encryption-key` (both key ids are named, never the keys), a sealed key altered in the database, or a key kept in the clear on a shared store. Nothing is signed with it",
  },
});

/** A failure code of core's own classes. */
export type CoreFailureCode = keyof typeof CORE_FAILURE_CODES;

/** The error classes of core whose `code` is an HTTP code of {@link ERROR_CODES}, for the docs. */
export const HTTP_ERROR_CLASSES = [
  'AuthError (@svc/core)',
  'StoreUnavailableError (@svc/core, always `store_unavailable`)',
  'ScimError (@svc/core, an AuthError with its SCIM `scimType`)',
] as const;

/**
 * Whether `value` is a failure code of a table defined in this process ({@link defineFailureCodes}):
 * core's own, and those of every package loaded.
 *
 * @example
 * isFailureCode('config_invalid'); // true
 */
export function isFailureCode(value: unknown): value is string {
  return typeof value === 'string' && registry.has(value);
}

/**
 * The entry of a registered failure code (its class, `svc`'s exit code, its meaning), or
 * undefined for an HTTP error code or an unknown one.
 *
 * @example
 * failureCodeEntry('config_invalid')?.exit; // 1
 */
export function failureCodeEntry(code: string): FailureCodeEntry | undefined {
  return registry.get(code);
}

/**
 * The stable code of `error` (an HTTP code of {@link ERROR_CODES} or a registered failure
 * code), or null when it carries none (a bug, a driver error). Reads `code` rather than
 * testing the class, so an error from another copy of a package (a store addon's) is
 * recognised too.
 *
 * @example
 * if (errorCodeOf(error) === 'store_open_failed') console.error(error.message);
 */
export function errorCodeOf(error: unknown): string | null {
  if (!(error instanceof Error)) return null;
  const code = (error as { code?: unknown }).code;
  return isErrorCode(code) || isFailureCode(code) ? code : null;
}

/**
 * Why a control store was not opened: its file or directory is accessible by group or other,
 * it is not a svc auth control store, its server is unreachable or refused the credentials, a
 * migration failed, or its schema is newer than the store package knows. The message is one
 * line that names the target (never a password) and says what to do; the CLI prints it as is.
 * Both SQL stores throw this one class.
 *
 * @example
 * throw new StoreOpenError('/p/.svc/control/control.db', 'the control database is readable by others; run `chmod 600 …`');
 */
export class StoreOpenError extends Error {
  readonly code = 'store_open_failed' as const satisfies CoreFailureCode;
  /** What the refusal is about: a path, or `host:port/database (schema s)`. */
  readonly target: string;
  /** The driver's or server's own code (`ECONNREFUSED`, SQLSTATE `28P01`, ...) when there is one. */
  readonly driverCode: string | undefined;
  /**
   * Why the store refused to open although it could: `unauthenticated` when its server lets
   * anyone connect as the store's role without a credential (so any process on the host,
   * a confined provider included, could write the control state) and the operator did not
   * accept that. Undefined for every other failure.
   */
  readonly refusal: 'unauthenticated' | undefined;

  constructor(target: string, message: string, options: { cause?: unknown; driverCode?: string; refusal?: 'unauthenticated' } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'StoreOpenError';
    this.target = target;
    this.driverCode = options.driverCode;
    this.refusal = options.refusal;
  }
}

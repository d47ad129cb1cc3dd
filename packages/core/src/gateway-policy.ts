/**
 * The rules of the application gateway (see the contract's "Application gateway"), as pure
 * functions: which inbound headers are identity headers (stripped before anything else runs),
 * which requests smuggle or are framed ambiguously (refused), which request paths are
 * ambiguous (refused, never normalised), which paths are public, and whether a principal meets
 * a path's requirement. The server applies them; nothing here does I/O.
 */
import type { AppPathRequirement } from './app-config.js';
import { AuthError } from './errors.js';
import type { Principal } from './principal.js';
import type { SessionRecord } from './store.js';
import { TOKEN_PREFIXES } from './tokens.js';
import { emailDomainOf } from './users.js';

/**
 * Identity-header name prefixes of the contract (compared after {@link normalizeHeaderName}):
 * our own, and those of the identity-aware proxies an application may have been written for
 * (oauth2-proxy, Pomerium, Cloudflare Access, Azure App Service, Google IAP, AWS ALB,
 * Authelia and Grafana's `Remote-*`, mod_auth_openidc's `OIDC-Claim-*`, Gitea/Grafana's
 * `X-WEBAUTH-*`): a forged one must never reach an application that trusts it.
 */
export const IDENTITY_HEADER_PREFIXES: readonly string[] = Object.freeze([
  'svc-',
  'x-svc-',
  'remote-',
  'x-remote-',
  'x-auth-request-',
  'x-pomerium-',
  'cf-access-',
  'x-ms-client-principal',
  'x-ms-token-aad-',
  'x-goog-authenticated-user-',
  'x-goog-iap-',
  'x-amzn-oidc-',
  'oidc-claim-',
  'x-webauth-',
]);

/** Identity-header names of the contract (compared after {@link normalizeHeaderName}). */
export const IDENTITY_HEADER_NAMES: readonly string[] = Object.freeze([
  'x-forwarded-user',
  'x-forwarded-email',
  'x-forwarded-preferred-username',
  'x-forwarded-groups',
  'x-forwarded-access-token',
  'x-user',
  'x-email',
  'x-webauth-user',
]);

/**
 * Headers the gateway or the HTTP framing itself interprets: one of these spelled with another
 * separator (`Content_Length`, `X.Forwarded.For`) is refused, since a backend that reads `_` as
 * `-` (CGI, WSGI, PHP) would see a second, different value of it.
 */
export const FRAMING_HEADER_NAMES: readonly string[] = Object.freeze([
  'authorization',
  'connection',
  'content-length',
  'expect',
  'forwarded',
  'host',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-forwarded-proto',
  'x-real-ip',
]);

/** A line break inside a header value (an obs-fold that got through the parser). */
const CR_OR_LF = /[\r\n]/;
/** A header name character other than a letter, a digit or `-` (the only names that fold differently). */
const OTHER_SEPARATOR = /[^A-Za-z0-9-]/;

/** Headers that must appear at most once in a request (a second copy means two parsers may disagree on which one counts). */
const SINGLE_HEADERS = new Set(['authorization', 'content-length', 'host', 'transfer-encoding']);

/**
 * A header name as the gateway compares it: lower-cased, with every character other than a
 * letter or a digit read as `-`. Stricter than the contract's "`_` read as `-`": backends
 * differ in which separators they fold (CGI, WSGI and PHP fold `_`; others fold `.`), so all
 * of them are folded.
 *
 * @example
 * normalizeHeaderName('X_Forwarded.User'); // 'x-forwarded-user'
 */
export function normalizeHeaderName(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]/g, '-');
}

/** How many header names one predicate remembers its verdict for. */
const IDENTITY_MEMO_MAX = 1024;

/**
 * A predicate for identity headers: the contract's prefixes and names, plus `extra` (the
 * project's `:svc/app-identity-headers`), every one compared after
 * {@link normalizeHeaderName}, so case and separators never let a forged header through.
 * Build it once per gateway; the predicate is called for every inbound header.
 *
 * @example
 * const isIdentity = identityHeaderPredicate(['x-tenant']);
 * isIdentity('X_Forwarded_User'); // true
 * isIdentity('X_TENANT'); // true
 * isIdentity('accept'); // false
 */
export function identityHeaderPredicate(extra: readonly string[] = []): (name: string) => boolean {
  const exact = new Set([...IDENTITY_HEADER_NAMES, ...extra.map(normalizeHeaderName)]);
  // Header names repeat from request to request: a bounded memo of verdicts by name as sent
  // keeps the per-request cost to a lookup (names never seen before are still judged in full).
  const memo = new Map<string, boolean>();
  const judge = (name: string): boolean => {
    const n = normalizeHeaderName(name);
    if (exact.has(n)) return true;
    for (const prefix of IDENTITY_HEADER_PREFIXES) if (n.startsWith(prefix)) return true;
    return false;
  };
  return (name) => {
    const known = memo.get(name);
    if (known !== undefined) return known;
    const verdict = judge(name);
    if (memo.size < IDENTITY_MEMO_MAX) memo.set(name, verdict);
    return verdict;
  };
}

/**
 * Whether `name` is an identity header (see {@link identityHeaderPredicate}; `extra` are the
 * project's own names).
 *
 * @example
 * isIdentityHeader('Svc-Subject'); // true
 * isIdentityHeader('cf_access_jwt_assertion'); // true
 */
export function isIdentityHeader(name: string, extra: readonly string[] = []): boolean {
  return identityHeaderPredicate(extra)(name);
}

/**
 * Why a request's header block is refused as smuggling or ambiguous framing, or null when it is
 * fine. `rawHeaders` is Node's flat `[name, value, name, value, ...]` list as received. Refused:
 * `Content-Length` or `Transfer-Encoding` (or `Host`, `Authorization`) sent more than once;
 * `Transfer-Encoding` together with `Content-Length`; any `Transfer-Encoding` other than exactly
 * `chunked`, or one in an HTTP/1.0 request; a value holding CR or LF (an obs-fold that got
 * through); a framing header ({@link FRAMING_HEADER_NAMES}) spelled with `_` or another separator.
 * Node 20's parser already refuses most of these; this is the same rule stated where it can be
 * tested, so a future parser leniency cannot let one through.
 *
 * @example
 * framingRefusal(['Content-Length', '2', 'Content-Length', '2'], '1.1'); // 'Content-Length is sent more than once'
 * framingRefusal(['Host', 'a'], '1.1'); // null
 */
export function framingRefusal(rawHeaders: readonly string[], httpVersion: string): string | null {
  const seen = new Map<string, number>();
  let transferEncoding: string | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    const value = rawHeaders[i + 1] as string;
    const lower = name.toLowerCase();
    if (CR_OR_LF.test(value)) return `the ${name} header is folded over several lines (obs-fold)`;
    if (OTHER_SEPARATOR.test(name)) {
      const normalized = normalizeHeaderName(name);
      if (FRAMING_HEADER_NAMES.includes(normalized)) {
        return `the header ${name} reads as ${normalized} where separators are folded; send ${normalized}`;
      }
    }
    if (SINGLE_HEADERS.has(lower)) {
      const count = (seen.get(lower) ?? 0) + 1;
      if (count > 1) return `${canonicalName(lower)} is sent more than once`;
      seen.set(lower, count);
    }
    if (lower === 'transfer-encoding') transferEncoding = value;
  }
  if (transferEncoding !== undefined) {
    if (seen.has('content-length')) return 'Transfer-Encoding and Content-Length are both sent';
    if (transferEncoding.trim().toLowerCase() !== 'chunked') return 'Transfer-Encoding must be exactly chunked';
    if (httpVersion !== '1.1') return 'Transfer-Encoding is not allowed in an HTTP/1.0 request';
  }
  return null;
}

function canonicalName(lower: string): string {
  return lower.replace(/(^|-)([a-z])/g, (_m, sep: string, c: string) => sep + c.toUpperCase());
}

/** A percent-encoded `.`, `/`, `;`, `\` or `%` (double encoding), or a percent-encoded control character. */
const ENCODED_AMBIGUOUS = /%(2e|2f|3b|5c|25|0[0-9a-f]|1[0-9a-f]|7f)/i;
/** A character outside ASCII (only such a path can change under Unicode compatibility folding). */
const NON_ASCII = /[\u0080-\u{10ffff}]/u;

/**
 * The path of a request target, percent-decoded, when the target is unambiguous: every proxy,
 * framework and filesystem reads it the same way, so a public-path or requirement match here
 * is the match the application sees. An ambiguous target is refused (`400 invalid_request`),
 * never normalised: anything but an origin-form target starting with `/` (absolute form, `*`);
 * a fragment; a backslash; an empty segment (`//`); a dot segment (`/./`, `/../`, also with a
 * `;parameter`, as in `/..;/`); a path parameter (`;`, raw or `%3b`: Tomcat and Jetty read
 * `/admin;x/y` as `/admin/y`); a segment ending in a dot or a space (IIS and Windows read
 * `/admin./x` and `/admin%20/x` as `/admin/x`); a percent-encoded `.`, `/`, `\`, `%` (double
 * encoding) or control character; a malformed escape or one that is not UTF-8; a path that
 * Unicode compatibility folding (NFKC) changes (a fullwidth `／` or `ａ` that a best-fit
 * decoder reads as ASCII). These are the classic path-confusion bypasses of identity-aware
 * proxies (a public prefix walked out of with `/public/../admin`, `/public/%2e%2e/admin`,
 * `/public/..;/admin`, `/public%2fadmin`, `/public\..\admin`; a requirement stepped around with
 * `/admin;x/y`).
 *
 * @throws {AuthError} `invalid_request` naming what is ambiguous.
 * @example
 * unambiguousPath('/docs/a%20b?x=1'); // '/docs/a b'
 * unambiguousPath('/public/../admin'); // throws invalid_request
 * unambiguousPath('/admin;x/y'); // throws invalid_request
 */
export function unambiguousPath(target: string): string {
  const q = target.indexOf('?');
  const raw = q < 0 ? target : target.slice(0, q);
  const refuse = (why: string): never => {
    throw new AuthError('invalid_request', `the request path is ambiguous: ${why}`);
  };
  if (!raw.startsWith('/')) refuse('it must start with / (origin form)');
  if (target.includes('#')) refuse('it holds a fragment (#)');
  if (raw.includes('\\')) refuse('it holds a backslash');
  if (raw.includes('//')) refuse('it holds an empty segment (//)');
  // Every request's path comes through here: the checks below that can only find something in
  // a path holding a `%`, a `.` or a `;` are skipped for one that holds none (the common case).
  const escaped = raw.includes('%');
  if (escaped && ENCODED_AMBIGUOUS.test(raw)) {
    refuse('it percent-encodes a dot, slash, semicolon, backslash, percent sign or control character');
  }
  if (raw.includes('.')) {
    for (const segment of raw.split('/')) {
      const name = segment.split(';', 1)[0];
      if (name === '.' || name === '..') refuse('it holds a dot segment (. or ..)');
    }
  }
  if (raw.includes(';')) refuse('it holds a path parameter (;), which servlet containers cut off the segment');
  let path = raw;
  if (escaped) {
    try {
      path = decodeURIComponent(raw);
    } catch {
      return refuse('a percent escape is malformed or not UTF-8');
    }
    if (NON_ASCII.test(path) && path.normalize('NFKC') !== path) {
      refuse('it holds characters that Unicode compatibility folding (NFKC) changes');
    }
  }
  if (path.includes('.') || path.includes(' ')) {
    for (const segment of path.split('/')) {
      if (segment.endsWith('.') || segment.endsWith(' ')) refuse('a segment ends in a dot or a space, which some servers drop');
    }
  }
  return path;
}

/** The `Sec-WebSocket-Key` of RFC 6455 §4.1: 16 bytes in base64 (24 characters, ending `==`). */
const WEBSOCKET_KEY = /^[A-Za-z0-9+/]{21}[AQgw]==$/;

/** What {@link upgradeRefusal} reads of a request that asks to switch protocols. */
export interface UpgradeRequestHead {
  readonly method: string;
  readonly httpVersion: string;
  /** Header names lower-cased, as Node parses them (a repeated header joined with `, `). */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
}

/**
 * Why a request that asks to switch protocols (`Upgrade`) is refused, or null when it is a valid
 * websocket opening handshake (RFC 6455 §4.1): `GET`, HTTP/1.1, `Upgrade: websocket` alone,
 * `Connection` naming `upgrade`, one `Sec-WebSocket-Key` of 16 base64 bytes and
 * `Sec-WebSocket-Version: 13`. The gateway relays websockets and nothing else (`h2c` included):
 * any other upgrade is refused before anything is sent upstream, so the upstream never sees a
 * handshake the caller did not validly make.
 *
 * @example
 * upgradeRefusal({ method: 'POST', httpVersion: '1.1', headers: { upgrade: 'websocket' } }); // 'an upgrade must be a GET ...'
 */
export function upgradeRefusal(req: UpgradeRequestHead): string | null {
  const one = (name: string): string | undefined => {
    const v = req.headers[name];
    return typeof v === 'string' ? v.trim() : undefined;
  };
  if (req.method !== 'GET') return `an upgrade must be a GET (RFC 6455 section 4.1), not ${req.method}`;
  if (req.httpVersion !== '1.1') return 'an upgrade needs HTTP/1.1';
  if (one('upgrade')?.toLowerCase() !== 'websocket') return 'the gateway upgrades only to websocket (Upgrade: websocket alone)';
  const connection = one('connection')?.toLowerCase().split(',') ?? [];
  if (!connection.some((t) => t.trim() === 'upgrade')) return 'a websocket handshake needs Connection: Upgrade';
  if (!WEBSOCKET_KEY.test(one('sec-websocket-key') ?? '')) return 'Sec-WebSocket-Key must be 16 bytes in base64, sent once';
  if (one('sec-websocket-version') !== '13') return 'Sec-WebSocket-Version must be 13';
  return null;
}

/** The gateway's reserved path prefix, as its own routes are written. */
export const RESERVED_PREFIX = '/.svc/';

/**
 * Whether a (decoded) path is under the reserved prefix `/.svc/` (`/.svc` itself included), in
 * any letter case: `/.SVC/x` is reserved too, since an application that folds case would serve
 * it as `/.svc/x`, and it must never reach the application.
 *
 * @example
 * isReservedPath('/.Svc/jwks.json'); // true
 * isReservedPath('/.svcx'); // false
 */
export function isReservedPath(path: string): boolean {
  const head = path.slice(0, RESERVED_PREFIX.length).toLowerCase();
  return head === RESERVED_PREFIX || (path.length === RESERVED_PREFIX.length - 1 && head === '/.svc');
}

/**
 * Whether a request target (as received) names the reserved prefix exactly as the gateway's own
 * routes are written: lower case and unescaped. A reserved path in any other spelling (`/.SVC/`,
 * `/.sv%63/`) is answered `404` by the gateway: the router matches case-sensitively, so it
 * would otherwise fall through to the application.
 *
 * @example
 * isCanonicalReservedTarget('/.svc/jwks.json?x=1'); // true
 * isCanonicalReservedTarget('/.SVC/jwks.json'); // false
 */
export function isCanonicalReservedTarget(target: string): boolean {
  return target.startsWith(RESERVED_PREFIX) || target === '/.svc' || target.startsWith('/.svc?');
}

/**
 * Whether `path` matches a pattern of `:svc/app-public` or `:svc/app-require`: an exact path,
 * or a prefix ending in `/*`, which matches every path below it (`/public/*` matches
 * `/public/a` and `/public/`, not `/public` nor `/publicity`). Case-sensitive unless `ignoreCase`.
 *
 * @example
 * pathMatches('/public/*', '/public/a/b'); // true
 * pathMatches('/healthz', '/healthz/'); // false
 */
export function pathMatches(pattern: string, path: string, ignoreCase = false): boolean {
  const p = ignoreCase ? pattern.toLowerCase() : pattern;
  const s = ignoreCase ? path.toLowerCase() : path;
  if (p.endsWith('/*')) return s.startsWith(p.slice(0, -1));
  return p === s;
}

/**
 * Whether `path` (from {@link unambiguousPath}) is public: it matches one of `publicPaths`,
 * case-sensitively (a public path never grows by case folding).
 *
 * @example
 * isPublicPath(['/healthz', '/public/*'], '/public/logo.svg'); // true
 * isPublicPath(['/healthz'], '/HEALTHZ'); // false
 */
export function isPublicPath(publicPaths: readonly string[], path: string): boolean {
  for (const pattern of publicPaths) if (pathMatches(pattern, path)) return true;
  return false;
}

/**
 * Whether a requirement pattern of `:svc/app-require` covers `path`, as the application will
 * read it: case-insensitively (a case-insensitive application serves `/Admin` as `/admin`); a
 * prefix `/admin/*` covers every path below it and the bare `/admin` itself (with a trailing `/`
 * too); an exact `/admin` covers `/admin` and `/admin/`; and both cover the bare path with a
 * format suffix on its last segment (`/admin.json`: Rails and Spring's suffix pattern matching
 * serve it as `/admin`). A requirement only ever grows by these rules, never shrinks.
 *
 * @example
 * requirementCovers('/admin/*', '/admin'); // true
 * requirementCovers('/admin/*', '/Admin.json'); // true
 * requirementCovers('/admin/*', '/administrator'); // false
 */
export function requirementCovers(pattern: string, path: string): boolean {
  const prefix = pattern.endsWith('/*');
  const base = (prefix ? pattern.slice(0, -2) : pattern).toLowerCase();
  const s = path.toLowerCase();
  if (!s.startsWith(base)) return false;
  const rest = s.slice(base.length);
  if (rest === '' || rest === '/') return true;
  if (prefix && rest.startsWith('/')) return true;
  return rest.startsWith('.') && !rest.includes('/');
}

/**
 * The requirement of `:svc/app-require` that applies to `path`, or null: the most specific
 * one that covers it ({@link requirementCovers}), where an exact pattern beats every prefix and
 * a longer prefix beats a shorter one.
 *
 * @example
 * requirementFor([{ path: '/admin/*', ... }, { path: '/admin/audit/*', ... }], '/admin/audit/x').path; // '/admin/audit/*'
 * requirementFor([{ path: '/admin/*', ... }], '/admin').path; // '/admin/*'
 */
export function requirementFor(requirements: readonly AppPathRequirement[], path: string): AppPathRequirement | null {
  let best: AppPathRequirement | null = null;
  let bestRank = -1;
  for (const r of requirements) {
    if (!requirementCovers(r.path, path)) continue;
    // Exact patterns outrank any prefix; among prefixes, the longer one is more specific.
    const rank = r.path.endsWith('/*') ? r.path.length : Number.MAX_SAFE_INTEGER;
    if (rank > bestRank) {
      best = r;
      bestRank = rank;
    }
  }
  return best;
}

/**
 * Why `principal` does not meet `requirement` at `now` (epoch ms), or null when it does. Each
 * field given must hold, and within a field any listed value suffices: its subject must be one
 * of `subjects`; it must be in one of `groups`; its email must be verified and at one of
 * `emailDomains` (an unverified email never counts, whatever its domain); its `amr` must hold
 * one of `amr`; and it must have signed in (`auth_time`) at most `maxAuthAgeSeconds` ago. A
 * null field asks nothing.
 *
 * @example
 * unmetRequirement({ path: '/admin/*', subjects: null, groups: ['ops'], emailDomains: null, amr: null, maxAuthAgeSeconds: null }, principal, Date.now());
 * // 'membership of one of these groups is required here: ops' (or null)
 */
export function unmetRequirement(requirement: AppPathRequirement, principal: Principal, now: number): string | null {
  if (requirement.subjects !== null && !requirement.subjects.includes(principal.subject)) return 'the subject is not one allowed here';
  const claims = principal.claims;
  if (requirement.groups !== null && !requirement.groups.some((g) => claims.groups?.includes(g) === true)) {
    return `membership of one of these groups is required here: ${requirement.groups.join(', ')}`;
  }
  if (requirement.emailDomains !== null) {
    const domain = claims.email === undefined ? null : emailDomainOf(claims.email).toLowerCase();
    if (claims.email_verified !== true || domain === null || !requirement.emailDomains.includes(domain)) {
      return `a verified email at one of these domains is required here: ${requirement.emailDomains.join(', ')}`;
    }
  }
  if (requirement.amr !== null && !requirement.amr.some((m) => claims.amr.includes(m))) {
    return `signing in with one of these methods is required here: ${requirement.amr.join(', ')}`;
  }
  if (requirement.maxAuthAgeSeconds !== null) {
    const authTime = Date.parse(claims.auth_time);
    if (!Number.isFinite(authTime) || now - authTime > requirement.maxAuthAgeSeconds * 1000) {
      return `a sign-in at most ${requirement.maxAuthAgeSeconds} s old is required here; sign in again`;
    }
  }
  return null;
}

/**
 * What a requirement asks for, in words a person reads on the gateway's refusal page (one
 * phrase per field given, every field must hold): "a member of ops or admins", "an email at
 * example.com, verified", ... A subject list is not spelled out (it names other people's
 * accounts). `domainName` shows a domain (kept in A-label form) as people read it, e.g. Node's
 * `domainToUnicode`; by default as kept.
 *
 * @example
 * requirementNeeds({ path: '/ops/*', subjects: null, groups: ['ops', 'admins'], emailDomains: ['example.com'], amr: null, maxAuthAgeSeconds: null });
 * // ['a member of ops or admins', 'an email at example.com, verified']
 */
export function requirementNeeds(requirement: AppPathRequirement, domainName: (domain: string) => string = (d) => d): string[] {
  const or = (items: readonly string[]) =>
    items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} or ${items[items.length - 1] as string}`;
  const out: string[] = [];
  if (requirement.subjects !== null) out.push('one of the accounts allowed here');
  if (requirement.groups !== null) out.push(`a member of ${or(requirement.groups)}`);
  if (requirement.emailDomains !== null) out.push(`an email at ${or(requirement.emailDomains.map(domainName))}, verified`);
  if (requirement.amr !== null) out.push(`a sign-in with ${or(requirement.amr)}`);
  if (requirement.maxAuthAgeSeconds !== null) out.push(`a sign-in at most ${requirement.maxAuthAgeSeconds} seconds old`);
  return out;
}

/**
 * Whether a bearer credential is one of ours by its shape: any svc token prefix (`svca_`,
 * `svcr_`, `svcb_`), well-formed or not. The gateway never lets such a credential reach the
 * application, whether it authenticated, failed, or is a refresh or bootstrap token sent where
 * it does not belong; a credential of any other shape is the application's own.
 *
 * @example
 * isSvcCredential('svcr_01M8...'); // true
 * isSvcCredential('eyJhbGciOi...'); // false
 */
export function isSvcCredential(token: string | undefined): boolean {
  if (token === undefined) return false;
  for (const prefix of Object.values(TOKEN_PREFIXES)) if (token.startsWith(prefix)) return true;
  return false;
}

/**
 * How often, by default, the gateway re-checks the session of every websocket it relays: a
 * session that ends (logout, revocation on any node sharing the store, device removal, refresh
 * reuse) or an access token that expires closes the websocket within this bound.
 */
export const WEBSOCKET_SESSION_CHECK_SECONDS = 5;

/**
 * Why a relayed websocket is closed (its close reason, with code 1008): its session was
 * revoked (logout, revocation, device removal, refresh reuse), it ended or no longer exists,
 * or the access token that opened the websocket expired.
 */
export type RelayedSessionEnd = 'session_revoked' | 'session_ended' | 'token_expired';

/**
 * Why a relayed websocket must be closed now, or null while it may go on: the session of the
 * principal it was opened with must still be the same live session (not revoked, not past its
 * absolute end, as `session`, read from the store now, says), and the access token it was opened
 * with must not have expired (`principal.claims.exp`): a websocket lives no longer than the
 * credential that opened it. `session` undefined means the store could not be read: only the
 * token's expiry is judged then. The gateway closes the websocket with code 1008 (policy
 * violation) and this as its reason.
 *
 * @example
 * relayedSessionEnd(principal, await store.getSession(principal.session), clock.now()); // null, or 'session_revoked'
 */
export function relayedSessionEnd(
  principal: Principal,
  session: Pick<SessionRecord, 'id' | 'revokedAt' | 'expiresAt'> | null | undefined,
  now: number,
): RelayedSessionEnd | null {
  if (session !== undefined) {
    if (session === null || session.id !== principal.session) return 'session_ended';
    if (session.revokedAt !== null) return 'session_revoked';
    if (session.expiresAt <= now) return 'session_ended';
  }
  const exp = Date.parse(principal.claims.exp);
  if (!Number.isFinite(exp) || exp <= now) return 'token_expired';
  return null;
}

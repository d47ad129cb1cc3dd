import * as nodeCrypto from 'node:crypto';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RandomBytes } from './ports.js';

/** The kinds of secret token and their scanner-friendly prefixes. */
export const TOKEN_PREFIXES = { bootstrap: 'svcb_', access: 'svca_', refresh: 'svcr_', scim: 'svcs_', handoff: 'svch_' } as const;

/** A kind of token. */
export type TokenKind = keyof typeof TOKEN_PREFIXES;

/** The kinds of token that belong to a session: they carry its id as their selector. */
export type SessionTokenKind = 'access' | 'refresh';

// 256 bits of CSPRNG output, base64url without padding.
const SECRET = '[A-Za-z0-9_-]{43}';
// A session id's ULID body (Crockford base32).
const SELECTOR = '[0-9A-HJKMNP-TV-Z]{26}';
const TOKEN_BODIES: Readonly<Record<TokenKind, RegExp>> = {
  bootstrap: new RegExp(`^${SECRET}$`),
  scim: new RegExp(`^${SECRET}$`),
  handoff: new RegExp(`^${SECRET}$`),
  access: new RegExp(`^${SELECTOR}${SECRET}$`),
  refresh: new RegExp(`^${SELECTOR}${SECRET}$`),
};
const SESSION_PREFIX = 'ses_';
const SELECTOR_LENGTH = 26;

function secret(random: RandomBytes): string {
  const bytes = random(32);
  if (bytes.length !== 32) throw new TypeError('random must return the requested number of bytes');
  return Buffer.from(bytes).toString('base64url');
}

/**
 * Mints an opaque, URL-safe bootstrap token: the `svcb_` prefix and 256 bits of CSPRNG output.
 *
 * @example
 * const token = mintToken('bootstrap', randomBytes); // "svcb_..."
 */
export function mintToken(kind: 'bootstrap' | 'scim' | 'handoff', random: RandomBytes): string {
  return TOKEN_PREFIXES[kind] + secret(random);
}

/**
 * Mints an access or refresh token of a session: the type prefix, the session id's ULID body
 * (the selector) and 256 bits of CSPRNG output (the verifier). A split token: the store finds
 * the session by its primary key and then compares the digest of the whole token in constant
 * time, instead of looking a secret up in an index (whose search is neither constant-time nor
 * cheap to keep up to date on every rotation). The selector is no secret: session ids are in
 * every token pair and audit event.
 *
 * @example
 * const access = mintSessionToken('access', 'ses_01JD...', randomBytes); // "svca_01JD...<43 chars>"
 */
export function mintSessionToken(kind: SessionTokenKind, sessionId: string, random: RandomBytes): string {
  if (!sessionId.startsWith(SESSION_PREFIX) || sessionId.length !== SESSION_PREFIX.length + SELECTOR_LENGTH) {
    throw new TypeError(`mintSessionToken: not a session id: ${sessionId}`);
  }
  return TOKEN_PREFIXES[kind] + sessionId.slice(SESSION_PREFIX.length) + secret(random);
}

/**
 * Whether `value` has the exact shape of a token of `kind`. A token of another shape is
 * refused without touching the store.
 *
 * @example
 * isTokenOfKind(header.slice(7), 'access');
 */
export function isTokenOfKind(value: unknown, kind: TokenKind): value is string {
  if (typeof value !== 'string') return false;
  const prefix = TOKEN_PREFIXES[kind];
  return value.startsWith(prefix) && TOKEN_BODIES[kind].test(value.slice(prefix.length));
}

/** A presented access or refresh token: the session it names and the digest to check. */
export interface PresentedSessionToken {
  readonly sessionId: string;
  readonly digest: string;
}

/**
 * Splits a presented access or refresh token into the session id it names and the SHA-256
 * digest of the whole token, or null when it does not have the shape of a token of `kind`.
 * Knowing the session id proves nothing: only a digest equal to the stored one does.
 *
 * @example
 * const presented = parseSessionToken(bearer, 'access'); // { sessionId: 'ses_01JD...', digest: '9f3c...' }
 */
export function parseSessionToken(value: unknown, kind: SessionTokenKind): PresentedSessionToken | null {
  if (!isTokenOfKind(value, kind)) return null;
  const start = TOKEN_PREFIXES[kind].length;
  return { sessionId: SESSION_PREFIX + value.slice(start, start + SELECTOR_LENGTH), digest: digestToken(value) };
}

/**
 * The SHA-256 digest of a token, as lowercase hex: the only form in which tokens are stored.
 *
 * @example
 * const digest = digestToken(accessToken);
 */
export function digestToken(token: string): string {
  return sha256Hex(token);
}

// The one-shot `crypto.hash` (Node >= 20.12) is a quarter of the cost of a Hash object on the
// bearer path; older Node 20 releases get the Hash object.
const oneShotHash: ((algorithm: string, data: string, encoding: 'hex') => string) | undefined =
  typeof nodeCrypto.hash === 'function' ? nodeCrypto.hash : undefined;

/** SHA-256 of a UTF-8 string, lowercase hex. */
export function sha256Hex(text: string): string {
  return oneShotHash !== undefined ? oneShotHash('sha256', text, 'hex') : createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * Compares two hex digests in constant time.
 *
 * @example
 * digestsEqual(stored, digestToken(presented));
 */
export function digestsEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

import { createHash, timingSafeEqual } from 'node:crypto';
import type { RandomBytes } from './deps.js';

/** The kinds of secret token and their scanner-friendly prefixes. */
export const TOKEN_PREFIXES = { bootstrap: 'svcb_', access: 'svca_', refresh: 'svcr_' } as const;

/** A kind of token. */
export type TokenKind = keyof typeof TOKEN_PREFIXES;

const TOKEN_BODY = /^[A-Za-z0-9_-]{43}$/;

/**
 * Mints an opaque, URL-safe token: a type prefix and 256 bits of CSPRNG output.
 *
 * @example
 * const access = mintToken('access', randomBytes); // "svca_..."
 */
export function mintToken(kind: TokenKind, random: RandomBytes): string {
  const bytes = random(32);
  if (bytes.length !== 32) throw new TypeError('random must return the requested number of bytes');
  return TOKEN_PREFIXES[kind] + Buffer.from(bytes).toString('base64url');
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
  return value.startsWith(prefix) && TOKEN_BODY.test(value.slice(prefix.length));
}

/**
 * The SHA-256 digest of a token, as lowercase hex: the only form in which tokens are stored.
 *
 * @example
 * const digest = digestToken(accessToken);
 */
export function digestToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** SHA-256 of a UTF-8 string, lowercase hex. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
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

import { createHash, timingSafeEqual } from 'node:crypto';
import { parsePublicKeyHex, verifyEd25519 } from './ed25519.js';
import { AuthError } from './errors.js';
import type { SenderConstraint } from './sender-constraint.js';
import { DPOP_MAX_AGE_SECONDS, DPOP_MAX_FUTURE_SKEW_SECONDS } from './settings.js';

// Sender-constrained sessions (DPoP, RFC 9449), the pure part: the proof a client signs with its
// device key, its verification, and the key's thumbprint a bound session records. node:crypto
// only; the replay cache is a store operation (`useDpopProof`), the policy per realm a setting.

/** The `typ` of a DPoP proof's header (RFC 9449 §4.2). */
export const DPOP_TYP = 'dpop+jwt';

/** The longest proof accepted, in characters: a header with an Ed25519 JWK and a handful of claims is far below it. */
export const DPOP_MAX_PROOF_LENGTH = 4096;

const JTI = /^[\x21-\x7e]{16,256}$/;
const NONCE = /^[A-Za-z0-9_-]{16,128}$/;
const B64URL = /^[A-Za-z0-9_-]*$/;

/** An Ed25519 public key as a JWK (RFC 8037): what a proof's header carries. */
export interface Ed25519PublicJwk {
  readonly kty: 'OKP';
  readonly crv: 'Ed25519';
  readonly x: string;
}

/**
 * The public JWK of a device key given as 64 hex digits (the form enrollment takes).
 *
 * @example
 * publicJwkOfHex(device.publicKey); // { kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' }
 */
export function publicJwkOfHex(publicKeyHex: string): Ed25519PublicJwk {
  return Object.freeze({ kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKeyHex, 'hex').toString('base64url') });
}

/**
 * The RFC 7638 thumbprint of an Ed25519 JWK (SHA-256 over `{"crv","kty","x"}` in that order,
 * no spaces), base64url: what `cnf.jkt` holds.
 *
 * @example
 * jwkThumbprint(publicJwkOfHex(device.publicKey));
 */
export function jwkThumbprint(jwk: Pick<Ed25519PublicJwk, 'x'>): string {
  const canonical = `{"crv":"Ed25519","kty":"OKP","x":"${jwk.x}"}`;
  return createHash('sha256').update(canonical, 'utf8').digest('base64url');
}

/**
 * The `cnf.jkt` of a device key given as hex: {@link jwkThumbprint} of {@link publicJwkOfHex}.
 *
 * @example
 * const jkt = thumbprintOfPublicKeyHex(device.publicKey);
 */
export function thumbprintOfPublicKeyHex(publicKeyHex: string): string {
  return jwkThumbprint(publicJwkOfHex(publicKeyHex));
}

/**
 * `ath`: base64url of the SHA-256 of the access token's ASCII (RFC 9449 §4.2).
 *
 * @example
 * const ath = accessTokenHash(accessToken);
 */
export function accessTokenHash(accessToken: string): string {
  return createHash('sha256').update(accessToken, 'ascii').digest('base64url');
}

/**
 * Whether a realm under `mode` binds the refresh token of a session a device key signs in
 * (`:refresh` and `:required`), and whether it binds the access token too (`:required`).
 *
 * @example
 * bindsRefresh(settings.senderConstraint.management); // true by default
 */
export function bindsRefresh(mode: SenderConstraint): boolean {
  return mode !== 'off';
}

/** What the request a proof must match is. */
export interface DpopExpectation {
  /** The request's method, upper case. */
  readonly htm: string;
  /** The request's URL as this server is reached (scheme, host, port, path; no query). */
  readonly htu: string;
  /** Milliseconds since the epoch. */
  readonly now: number;
  /**
   * The thumbprint the proof's key must have (the session's `cnf.jkt`). Null only where the
   * caller compares the proof's own `jkt` with the session's binding itself: a refresh, whose
   * rotation does so on the session row it reads (core's `rotationProof`).
   */
  readonly jkt: string | null;
  /** The access token presented with the proof, whose hash `ath` must be. */
  readonly accessToken?: string;
  /** The nonce the server asked for, which `nonce` must equal. */
  readonly nonce?: string;
}

/** A proof that verified: what the replay cache records. */
export interface VerifiedDpopProof {
  readonly jkt: string;
  readonly jti: string;
  /** Seconds since the epoch, as the proof says. */
  readonly iat: number;
  /** Milliseconds since the epoch after which the proof is refused as too old, so its `jti` need no longer be remembered. */
  readonly expiresAt: number;
  /** The server nonce the proof carries (RFC 9449 §8), if any: it must be one the server issued. */
  readonly nonce?: string;
}

/** The `WWW-Authenticate` of a refused proof (RFC 9449 §7.1). */
export const DPOP_PROOF_CHALLENGE = 'DPoP error="invalid_dpop_proof", algs="EdDSA"';

function refuse(detail: string): AuthError {
  return new AuthError('invalid_dpop_proof', detail, { headers: { 'www-authenticate': DPOP_PROOF_CHALLENGE } });
}

function decodeJson(part: string): Record<string, unknown> | null {
  if (!B64URL.test(part)) return null;
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * The URL a proof's `htu` is compared as: origin and path, without query and fragment
 * (RFC 9449 §4.3, with the normalisation of RFC 3986 §6 that `URL` applies: scheme and host in
 * lower case, a default port dropped). Null for anything that is not an http(s) URL.
 *
 * @example
 * normalizedHtu('HTTP://127.0.0.1:80/v1/auth/refresh?x'); // 'http://127.0.0.1/v1/auth/refresh'
 */
export function normalizedHtu(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username !== '' || url.password !== '') return null;
  return `${url.origin}${url.pathname}`;
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Verifies a DPoP proof (RFC 9449 §4.3) for one request: a compact JWS with header
 * `typ: "dpop+jwt"`, `alg: "EdDSA"` and a public Ed25519 `jwk` (no private part), whose
 * thumbprint is `expect.jkt` (any key when that is null: the caller then holds the answer's
 * `jkt` to the session's binding); claims `htm` and `htu` naming this request, `iat` within
 * {@link DPOP_MAX_AGE_SECONDS} in the past and {@link DPOP_MAX_FUTURE_SKEW_SECONDS} in the
 * future, a `jti` (16 to 256 printable characters), `ath` when an access token is presented,
 * `nonce` when one is expected; and an Ed25519 signature that verifies. Anything else is
 * `401 invalid_dpop_proof` with `WWW-Authenticate: DPoP error="invalid_dpop_proof"`. The
 * caller then records the `jti` once (the store's `useDpopProof`, or for a refresh its
 * `rotateRefreshToken`): this function does no I/O.
 *
 * @example
 * const proof = await verifyDpopProof(req.headers.dpop, { htm: 'POST', htu, now, jkt: session.jkt });
 */
export async function verifyDpopProof(proof: unknown, expect: DpopExpectation): Promise<VerifiedDpopProof> {
  if (typeof proof !== 'string' || proof === '') throw dpopProofRequired(false);
  if (proof.length > DPOP_MAX_PROOF_LENGTH) throw refuse('the DPoP proof is too long');
  const parts = proof.split('.');
  if (parts.length !== 3) throw refuse('the DPoP proof is not a compact JWS');
  const [h, p, s] = parts as [string, string, string];
  const header = decodeJson(h);
  const claims = decodeJson(p);
  if (header === null || claims === null || !B64URL.test(s)) throw refuse('the DPoP proof is not a compact JWS');
  if (header.typ !== DPOP_TYP) throw refuse('the DPoP proof must have typ "dpop+jwt"');
  if (header.alg !== 'EdDSA') throw refuse('the DPoP proof must be signed with alg "EdDSA" (Ed25519)');
  const jwk = header.jwk;
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) throw refuse('the DPoP proof must carry the public jwk');
  const key = jwk as Record<string, unknown>;
  if (Object.hasOwn(key, 'd')) throw refuse('the DPoP proof jwk must not carry a private key');
  if (key.kty !== 'OKP' || key.crv !== 'Ed25519' || typeof key.x !== 'string' || !B64URL.test(key.x)) {
    throw refuse('the DPoP proof jwk must be an Ed25519 public key (kty OKP, crv Ed25519)');
  }
  const raw = Buffer.from(key.x, 'base64url');
  if (raw.length !== 32 || raw.toString('base64url') !== key.x) throw refuse('the DPoP proof jwk is not an Ed25519 public key');
  const jkt = jwkThumbprint({ x: key.x });
  if (expect.jkt !== null && !sameText(jkt, expect.jkt)) throw dpopProofRequired(true);
  if (typeof claims.htm !== 'string' || claims.htm !== expect.htm) throw refuse('the DPoP proof is for another HTTP method');
  const htu = typeof claims.htu === 'string' ? normalizedHtu(claims.htu) : null;
  const expectedHtu = normalizedHtu(expect.htu);
  if (htu === null || expectedHtu === null || htu !== expectedHtu) throw refuse('the DPoP proof is for another URL');
  const iat = claims.iat;
  if (typeof iat !== 'number' || !Number.isInteger(iat)) throw refuse('the DPoP proof needs iat (whole seconds)');
  const nowSeconds = expect.now / 1000;
  if (iat > nowSeconds + DPOP_MAX_FUTURE_SKEW_SECONDS) throw refuse('the DPoP proof is dated in the future');
  if (iat < nowSeconds - DPOP_MAX_AGE_SECONDS) throw refuse('the DPoP proof is too old');
  if (typeof claims.jti !== 'string' || !JTI.test(claims.jti)) throw refuse('the DPoP proof needs a jti of 16 to 256 printable characters');
  if (expect.accessToken !== undefined) {
    if (typeof claims.ath !== 'string' || !sameText(claims.ath, accessTokenHash(expect.accessToken))) {
      throw refuse('the DPoP proof is not bound to this access token (ath)');
    }
  }
  if (expect.nonce !== undefined && (typeof claims.nonce !== 'string' || !sameText(claims.nonce, expect.nonce))) {
    throw refuse('the DPoP proof does not carry the nonce the server asked for');
  }
  let publicKeyHex: string;
  try {
    publicKeyHex = parsePublicKeyHex(raw.toString('hex'));
  } catch {
    throw refuse('the DPoP proof jwk is not a valid Ed25519 public key');
  }
  const signature = Buffer.from(s, 'base64url');
  // On the event loop, not libuv's pool: a DPoP check runs on every request it guards, and
  // one verification through the pool costs ~40% more CPU than on the event loop (113 against 82 µs).
  // Measured side by side on 2 cores: 17-22% less server CPU per checked request and 12% more
  // of them per second (docs/performance.md, 2026-11-28). A login's verification stays on the
  // pool (`create-session.ts`): there it overlaps the login's writes, and on the event loop
  // logins/s measured about 5% lower.
  if (!verifyEd25519(publicKeyHex, Buffer.from(`${h}.${p}`, 'ascii'), signature)) {
    throw refuse('the DPoP proof signature does not verify');
  }
  if (claims.nonce !== undefined && (typeof claims.nonce !== 'string' || !NONCE.test(claims.nonce))) {
    throw refuse('the DPoP proof nonce is not one this server issues');
  }
  return Object.freeze({
    jkt,
    jti: claims.jti,
    iat,
    expiresAt: (iat + DPOP_MAX_AGE_SECONDS) * 1000 + 1000,
    ...(typeof claims.nonce === 'string' ? { nonce: claims.nonce } : {}),
  });
}

/**
 * The replay cache's key of a verified proof: SHA-256 of its key's thumbprint and its `jti`,
 * hex (a fixed length, and nothing the client chose is stored as it is).
 *
 * @example
 * await store.useDpopProof({ key: dpopReplayKey(proof), expiresAt: proof.expiresAt, now });
 */
export function dpopReplayKey(proof: Pick<VerifiedDpopProof, 'jkt' | 'jti'>): string {
  return createHash('sha256').update(`${proof.jkt} ${proof.jti}`, 'utf8').digest('hex');
}

/**
 * The refusal of a request to a session bound to a device key that came without a proof by
 * that key: none at all, or (`anotherKey`) one signed by another key.
 *
 * @example
 * if (outcome.kind === 'proof_required') throw dpopProofRequired(proof !== undefined);
 */
export function dpopProofRequired(anotherKey: boolean): AuthError {
  return refuse(
    anotherKey ? 'the DPoP proof is not signed by the key this session is bound to' : 'a DPoP proof by the session key is required',
  );
}

/**
 * The refusal of a proof whose `jti` was already used within its window.
 *
 * @example
 * if (!(await store.useDpopProof(...))) throw dpopReplayed();
 */
export function dpopReplayed(): AuthError {
  return refuse('the DPoP proof was already used (jti)');
}

/** How long a server nonce (`DPoP-Nonce`) is accepted after it was issued. */
export const DPOP_NONCE_TTL_SECONDS = 120;

/** How often a node issues a fresh server nonce; the previous ones stay good until they expire. */
export const DPOP_NONCE_ROTATE_SECONDS = 30;

/**
 * The replay cache's key of a server nonce: SHA-256 of `nonce <value>`, hex (a different
 * domain from {@link dpopReplayKey}, in the same store table).
 *
 * @example
 * await store.hasDpopRecord({ key: dpopNonceKey(proof.nonce), now });
 */
export function dpopNonceKey(nonce: string): string {
  return createHash('sha256').update(`nonce ${nonce}`, 'utf8').digest('hex');
}

/**
 * The refusal of a proof whose nonce the server does not know (any more): `401 use_dpop_nonce`;
 * the HTTP layer adds a fresh `DPoP-Nonce`.
 *
 * @example
 * throw useDpopNonce();
 */
export function useDpopNonce(): AuthError {
  return new AuthError('use_dpop_nonce', 'the DPoP proof must carry the nonce of the DPoP-Nonce header', {
    headers: { 'www-authenticate': 'DPoP error="use_dpop_nonce", algs="EdDSA"' },
  });
}

/**
 * The cluster's assertion key set at rest: what the control store keeps (the key set as JSON
 * text) and how its private halves are sealed under a key-encryption key (KEK) that only the
 * nodes hold (`:svc/key-encryption-key`, a secret reference). AES-256-GCM, a fresh 96-bit IV per
 * key and save, the key's `kid` as additional data (a sealed half moved to another key does not
 * open), and the KEK's id beside it, so a node with another KEK says so instead of guessing.
 * Pure: the store keeps the text, the runtime resolves the KEK.
 */
import { createCipheriv, createDecipheriv, createHash, createPrivateKey } from 'node:crypto';
import { type AssertionKeyJson, type AssertionKeySetJson, parseAssertionKeySet } from './assertion-keys.js';
import type { CoreFailureCode } from './errors.js';
import type { RandomBytes } from './ports.js';

/** A key-encryption key: 32 bytes, and its id (which says which KEK sealed a set, never the KEK). */
export interface KeyEncryptionKey {
  readonly id: string;
  readonly key: Uint8Array;
}

/** The prefix of a sealed private half in the stored set: `sealed.v1.<kek id>.<iv>.<ciphertext and tag>`. */
const SEALED = 'sealed.v1.';

/** A key set as the store keeps it, or what stops it from opening. */
export class AssertionKeySealError extends Error {
  override readonly name = 'AssertionKeySealError';
  readonly code = 'assertion_keys_unsealable' as const satisfies CoreFailureCode;
}

/**
 * Reads a KEK as a secret reference resolves it: 32 bytes as base64 or base64url (what
 * `openssl rand -base64 32` prints) or as 64 hex digits. Its id is the first 12 characters of the
 * base64url SHA-256 of `svc-kek-id:` and the key: it names the key in messages and in the stored
 * set without revealing it.
 *
 * @throws {TypeError} when the text is not 32 bytes in one of those forms (the message never quotes it).
 * @example
 * const kek = parseKeyEncryptionKey(resolveSecret(ref)); // { id: "Pq3...", key: Uint8Array(32) }
 */
export function parseKeyEncryptionKey(text: string): KeyEncryptionKey {
  const t = text.trim();
  let key: Buffer | null = null;
  if (/^[0-9a-fA-F]{64}$/.test(t)) key = Buffer.from(t, 'hex');
  else if (/^[A-Za-z0-9+/_-]{43}=?$/.test(t)) key = Buffer.from(t.replace(/=$/, ''), 'base64url');
  if (key === null || key.length !== 32) {
    throw new TypeError('a key-encryption key is 32 random bytes, as base64 (`openssl rand -base64 32`) or 64 hex digits');
  }
  const id = createHash('sha256').update('svc-kek-id:').update(key).digest('base64url').slice(0, 12);
  return { id, key: new Uint8Array(key) };
}

const aad = (kid: string): Buffer => Buffer.from(`svc-assertion-key:v1:${kid}`, 'utf8');

function seal(d: string, kid: string, kek: KeyEncryptionKey, random: RandomBytes): string {
  const iv = Buffer.from(random(12));
  const cipher = createCipheriv('aes-256-gcm', kek.key, iv);
  cipher.setAAD(aad(kid));
  const body = Buffer.concat([cipher.update(Buffer.from(d, 'base64url')), cipher.final(), cipher.getAuthTag()]);
  return `${SEALED}${kek.id}.${iv.toString('base64url')}.${body.toString('base64url')}`;
}

function unseal(sealed: string, key: AssertionKeyJson, keks: readonly KeyEncryptionKey[], where: string): string {
  const [kekId, ivText, bodyText, ...rest] = sealed.slice(SEALED.length).split('.');
  if (kekId === undefined || ivText === undefined || bodyText === undefined || rest.length > 0) {
    throw new AssertionKeySealError(`${where}.d is not a sealed key`);
  }
  const kek = keks.find((k) => k.id === kekId);
  if (kek === undefined) {
    const have = keks.length === 0 ? 'none is configured' : `this node has ${keks.map((k) => k.id).join(', ')}`;
    throw new AssertionKeySealError(
      `the assertion keys are sealed under the key-encryption key ${kekId}; ${have} (:svc/key-encryption-key)`,
    );
  }
  const iv = Buffer.from(ivText, 'base64url');
  const body = Buffer.from(bodyText, 'base64url');
  if (iv.length !== 12 || body.length !== 32 + 16) throw new AssertionKeySealError(`${where}.d is not a sealed key`);
  let d: Buffer;
  try {
    const decipher = createDecipheriv('aes-256-gcm', kek.key, iv);
    decipher.setAAD(aad(key.kid));
    decipher.setAuthTag(body.subarray(32));
    d = Buffer.concat([decipher.update(body.subarray(0, 32)), decipher.final()]);
  } catch {
    throw new AssertionKeySealError(
      `${where} (${key.kid}) does not open under the key-encryption key ${kek.id}: the stored key was altered or moved`,
    );
  }
  const text = d.toString('base64url');
  assertPairMatches(text, key, where);
  return text;
}

/** A private half that does not derive the public one is never used (a restored or edited row). */
function assertPairMatches(d: string, key: AssertionKeyJson, where: string): void {
  let x: string | undefined;
  try {
    x = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', d, x: key.x }, format: 'jwk' }).export({ format: 'jwk' }).x;
  } catch {
    x = undefined;
  }
  if (x !== key.x) throw new AssertionKeySealError(`${where} (${key.kid}): its private half is not the private key of its public one`);
}

/**
 * The key set as the store keeps it: JSON text of the set with each private half sealed under
 * `kek` (or, without one, in the clear: the embedded store's owner-only file only).
 *
 * @example
 * await store.saveAssertionKeys({ expectedVersion, keySet: sealAssertionKeySet(set, kek, deps.random), now }, events);
 */
export function sealAssertionKeySet(set: AssertionKeySetJson, kek: KeyEncryptionKey | null, random: RandomBytes): string {
  const keys = set.keys.map((k) => (k.d === null || kek === null ? k : { ...k, d: seal(k.d, k.kid, kek, random) }));
  return JSON.stringify({ version: 1, keys });
}

/** What {@link openAssertionKeySet} read. */
export interface OpenedAssertionKeySet {
  readonly set: AssertionKeySetJson;
  /**
   * Whether saving it again would change how it is kept: a private half in the clear while a KEK
   * is given, or sealed under a KEK other than the first of `keks` (a KEK rotation).
   */
  readonly reseal: boolean;
  /** Whether any private half is kept in the clear. */
  readonly clear: boolean;
}

/**
 * Opens the stored text of a key set with the node's KEKs (the current one first, then any
 * previous one still accepted during a KEK rotation). Checks the result as a key set, and that
 * each private half opens and is the private key of its public half.
 *
 * @throws {AssertionKeySealError} naming what is wrong (never quoting a key): not a key set, a
 *   half sealed under a KEK this node does not have, a half that does not open (altered), or a
 *   half in the clear when `requireSealed`.
 * @example
 * const { set } = openAssertionKeySet(record.keySet, [kek]);
 */
export function openAssertionKeySet(
  text: string,
  keks: readonly KeyEncryptionKey[],
  opts: { readonly requireSealed: boolean } = { requireSealed: false },
): OpenedAssertionKeySet {
  let value: { keys?: unknown } | null;
  try {
    value = JSON.parse(text);
  } catch {
    throw new AssertionKeySealError('the stored assertion key set is not JSON');
  }
  const raw = Array.isArray(value?.keys) ? (value.keys as AssertionKeyJson[]) : [];
  let reseal = false;
  let clear = false;
  const keys = raw.map((k, i): AssertionKeyJson => {
    const where = `keys[${i}]`;
    if (typeof k !== 'object' || k === null || typeof k.d !== 'string' || !k.d.startsWith(SEALED)) {
      if (typeof k?.d === 'string') {
        clear = true;
        if (opts.requireSealed) {
          throw new AssertionKeySealError(`${where} (${String(k.kid)}) is kept in the clear, and this store requires sealed keys`);
        }
        if (keks.length > 0) reseal = true;
      }
      return k;
    }
    const d = unseal(k.d, k, keks, where);
    if (!k.d.startsWith(`${SEALED}${keks[0]?.id}.`)) reseal = true;
    return { ...k, d };
  });
  let set: AssertionKeySetJson;
  try {
    set = parseAssertionKeySet({ ...value, keys });
  } catch (error) {
    throw new AssertionKeySealError(`the stored assertion key set is not valid (${(error as Error).message})`);
  }
  for (const [i, k] of set.keys.entries()) if (k.d !== null) assertPairMatches(k.d, k, `keys[${i}]`);
  return { set, reseal, clear };
}

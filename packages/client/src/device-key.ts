import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { publicKeyHexOf } from '@svc/core';

/** A device's Ed25519 key, able to answer challenges. The private key never leaves it. */
export interface DeviceKey {
  /** The raw 32-byte public key as 64 lowercase hex digits: what enrollment takes. */
  readonly publicKeyHex: string;
  /** Signs the exact UTF-8 bytes of `message` (pure Ed25519) and returns 128 hex digits. */
  sign(message: string): string;
}

function fromKeyObject(key: KeyObject): DeviceKey {
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new TypeError(`expected an Ed25519 private key, found ${key.asymmetricKeyType ?? 'an unknown key type'}`);
  }
  const publicKeyHex = publicKeyHexOf(createPublicKey(key));
  return Object.freeze({
    publicKeyHex,
    sign: (message: string) => sign(null, Buffer.from(message, 'utf8'), key).toString('hex'),
  });
}

/**
 * Loads an Ed25519 private key from PEM text or from a file holding it: PKCS#8 as written by
 * `svc auth keygen` or by `openssl genpkey -algorithm ed25519`.
 *
 * @example
 * const key = loadDeviceKey('./device.pem');
 * const signature = key.sign(challenge.challenge);
 */
export function loadDeviceKey(pemOrPath: string): DeviceKey {
  const pem = pemOrPath.trimStart().startsWith('-----BEGIN') ? pemOrPath : readFileSync(pemOrPath, 'utf8');
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (cause) {
    throw new TypeError('not a PEM private key (expected PKCS#8 "BEGIN PRIVATE KEY")', { cause });
  }
  return fromKeyObject(key);
}

/**
 * Generates a new Ed25519 device key and returns its PKCS#8 PEM (to be written with mode
 * 0600) and the device key.
 *
 * @example
 * const { pem, key } = generateDeviceKey();
 * console.log(key.publicKeyHex);
 */
export function generateDeviceKey(): { readonly pem: string; readonly key: DeviceKey } {
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  return { pem, key: fromKeyObject(privateKey) };
}

import { createPrivateKey, createPublicKey, type KeyObject, sign } from 'node:crypto';
import { nodeIdOf, publicKeyHexOf, type RetiredNodeKeyJson } from '@svc/core';

/** The node's own Ed25519 identity: its id, its public key, and a signer that never exposes the private key. */
export interface NodeIdentity {
  /** The human-comparable id derived from the public key (see core's `nodeIdOf`). */
  readonly nodeId: string;
  /** The raw 32-byte public key, 64 lowercase hex digits. */
  readonly publicKeyHex: string;
  /** Signs the exact bytes of `message` with pure Ed25519; 64 bytes. */
  sign(message: Uint8Array): Buffer;
  /** When this key became the node key (RFC 3339), when known. */
  readonly validFrom?: string | null;
  /** The keys this node signed with before, newest first, each with its validity window (see `svc node rotate-key`). */
  readonly previousKeys?: readonly RetiredNodeKeyJson[];
}

/** A node identity, or how to read the current one: a node whose key is rotated while it runs passes a function. */
export type NodeIdentitySource = NodeIdentity | (() => NodeIdentity);

/**
 * The current identity of a {@link NodeIdentitySource}: read once per request, so one answer
 * never mixes the id of one key with the signature of another.
 *
 * @example
 * const { nodeId } = currentIdentity(opts.identity);
 */
export function currentIdentity(source: NodeIdentitySource): NodeIdentity {
  return typeof source === 'function' ? source() : source;
}

/**
 * The identity of a node from its Ed25519 private key: a `KeyObject`, or the PKCS#8 PEM text
 * that `svc auth init` writes to `<control>/node-key.pem`.
 *
 * @throws {TypeError} when the key is not an Ed25519 private key.
 * @example
 * const identity = createNodeIdentity(readFileSync(project.nodeKey, 'utf8'));
 * identity.nodeId; // "XXXX-XXXX-...-C"
 */
export function createNodeIdentity(
  privateKey: KeyObject | string,
  history: { readonly validFrom?: string | null; readonly previousKeys?: readonly RetiredNodeKeyJson[] } = {},
): NodeIdentity {
  let key: KeyObject;
  try {
    key = typeof privateKey === 'string' ? createPrivateKey({ key: privateKey, format: 'pem' }) : privateKey;
  } catch (cause) {
    throw new TypeError('the node key is not a PEM private key', { cause });
  }
  if (key.type !== 'private' || key.asymmetricKeyType !== 'ed25519') {
    throw new TypeError(`the node key must be an Ed25519 private key, found ${key.asymmetricKeyType ?? key.type}`);
  }
  const publicKeyHex = publicKeyHexOf(createPublicKey(key));
  return Object.freeze({
    nodeId: nodeIdOf(publicKeyHex),
    publicKeyHex,
    sign: (message: Uint8Array) => sign(null, message, key),
    validFrom: history.validFrom ?? null,
    previousKeys: Object.freeze([...(history.previousKeys ?? [])].map((k) => Object.freeze({ ...k }))),
  });
}

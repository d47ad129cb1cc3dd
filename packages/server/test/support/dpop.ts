import { randomBytes } from 'node:crypto';
import { publicJwkOfHex } from '@svc/core';
import type { DeviceKey } from './harness.js';

/** What a test proof is made of; each part can be bent to make an attack. */
export interface ProofParts {
  readonly htm: string;
  readonly htu: string;
  /** Milliseconds since the epoch (the harness's fake clock): `iat` is its whole seconds. */
  readonly now: number;
  readonly jti?: string;
  readonly ath?: string;
  readonly nonce?: string;
  /** Merged over `{typ, alg, jwk}`; a key set to undefined is left out. */
  readonly header?: Record<string, unknown>;
}

/**
 * A DPoP proof (RFC 9449) signed by `key` with pure Ed25519, whatever its header says.
 *
 * @example
 * const proof = dpopProof(key, { htm: 'POST', htu: `${h.base}/v1/auth/refresh`, now: h.clock.now() });
 */
export function dpopProof(key: DeviceKey, p: ProofParts): string {
  const header: Record<string, unknown> = { typ: 'dpop+jwt', alg: 'EdDSA', jwk: publicJwkOfHex(key.publicKeyHex), ...(p.header ?? {}) };
  for (const [k, v] of Object.entries(header)) if (v === undefined) delete header[k];
  const claims = {
    htm: p.htm,
    htu: p.htu,
    iat: Math.floor(p.now / 1000),
    jti: p.jti ?? randomBytes(16).toString('base64url'),
    ...(p.ath === undefined ? {} : { ath: p.ath }),
    ...(p.nonce === undefined ? {} : { nonce: p.nonce }),
  };
  const b64 = (v: object) => Buffer.from(JSON.stringify(v), 'utf8').toString('base64url');
  const input = `${b64(header)}.${b64(claims)}`;
  return `${input}.${Buffer.from(key.signHex(input), 'hex').toString('base64url')}`;
}

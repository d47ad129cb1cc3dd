import { dpopProof as signProof, type TestDpopProof } from '@svc/store-testkit';
import type { DeviceKey } from './harness.js';

/** What a test proof is made of; each part can be bent to make an attack (store-testkit's proof parts). */
export type ProofParts = TestDpopProof;

/**
 * A DPoP proof (RFC 9449) signed by the harness's device `key`, whatever its header says: the
 * store-testkit's proof maker, given this harness's key shape.
 *
 * @example
 * const proof = dpopProof(key, { htm: 'POST', htu: `${h.base}/v1/auth/refresh`, now: h.clock.now() });
 */
export function dpopProof(key: DeviceKey, p: ProofParts): string {
  return signProof({ publicKey: key.publicKeyHex, sign: (message) => key.signHex(message) }, p);
}

import { randomBytes } from 'node:crypto';
import { accessTokenHash, DPOP_TYP, publicJwkOfHex } from '@svc/core';
import type { DeviceKey } from './device-key.js';

/** What a DPoP proof is made for: one request. */
export interface DpopProofInput {
  /** The request's method, e.g. `POST`. */
  readonly htm: string;
  /** The request's URL; its query and fragment are left out of the proof. */
  readonly htu: string;
  /** The access token sent with the request, bound in by its hash (`ath`). */
  readonly accessToken?: string;
  /** The server's `DPoP-Nonce`, when it asked for one. */
  readonly nonce?: string;
  /** Milliseconds since the epoch; defaults to `Date.now()`. */
  readonly now?: number;
}

/**
 * Makes a DPoP proof (RFC 9449) for one request, signed by the device key: a compact JWS with
 * header `{"typ":"dpop+jwt","alg":"EdDSA","jwk":{...}}` and claims `htm`, `htu`, `iat`, a fresh
 * random `jti`, and `ath` / `nonce` when given. Send it as the `DPoP` header; it is good for
 * one request, once.
 *
 * @example
 * const proof = createDpopProof(key, { htm: 'POST', htu: 'http://127.0.0.1:9090/v1/auth/refresh' });
 */
export function createDpopProof(key: DeviceKey, input: DpopProofInput): string {
  const url = new URL(input.htu);
  const header = { typ: DPOP_TYP, alg: 'EdDSA', jwk: publicJwkOfHex(key.publicKeyHex) };
  const claims = {
    htm: input.htm,
    htu: `${url.origin}${url.pathname}`,
    iat: Math.floor((input.now ?? Date.now()) / 1000),
    jti: randomBytes(16).toString('base64url'),
    ...(input.accessToken === undefined ? {} : { ath: accessTokenHash(input.accessToken) }),
    ...(input.nonce === undefined ? {} : { nonce: input.nonce }),
  };
  const signingInput = `${b64(header)}.${b64(claims)}`;
  return `${signingInput}.${Buffer.from(key.sign(signingInput), 'hex').toString('base64url')}`;
}

function b64(value: object): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

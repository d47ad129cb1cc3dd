import type { IncomingMessage } from 'node:http';

// The key a request proved possession of (DPoP, RFC 9449), from the identity step to the
// assertion: the `Authorization` and `DPoP` headers are gone by the time the upstream attach
// runs, so the identity step leaves the proven binding on the raw request, under a registered
// symbol (one key, however many copies of this module are loaded), read-only. Only the
// gateway's identity step writes it, after authenticating the proof.
const PROVEN_KEY = Symbol.for('svc.gateway.dpop-proven-jkt');

/** Records that `req` proved possession of the key whose thumbprint is `jkt`. */
export function markProvenKey(req: IncomingMessage, jkt: string): void {
  Object.defineProperty(req, PROVEN_KEY, { value: jkt, writable: false, configurable: false, enumerable: false });
}

/**
 * The thumbprint of the key `req` proved possession of with a DPoP proof, or null (a bearer
 * request, a cookie session, a public path): what the assertion passes on as `cnf.jkt`.
 *
 * @example
 * const jkt = provenKeyOf(req.raw);
 */
export function provenKeyOf(req: IncomingMessage | undefined): string | null {
  const value = req === undefined ? undefined : (req as unknown as Record<symbol, unknown>)[PROVEN_KEY];
  return typeof value === 'string' ? value : null;
}

import type { AuthDeps } from '../deps.js';
import { dpopNonceKey, dpopReplayed, dpopReplayKey, useDpopNonce, type VerifiedDpopProof, verifyDpopProof } from '../dpop.js';

/** The request a DPoP proof was presented with, as the HTTP layer read it. */
export interface DpopRequest {
  /** The `DPoP` header's value; undefined when there was none. */
  readonly proof: unknown;
  /** The method, upper case. */
  readonly htm: string;
  /** The URL as the client reached this server: origin and path (see core's `normalizedHtu`). */
  readonly htu: string;
}

/**
 * Checks a DPoP proof for a session bound to `jkt`: {@link verifyPresentedDpopProof}, then the
 * replay cache: the proof's `jti` is used once across every node sharing the store
 * (`useDpopProof`). `401 invalid_dpop_proof` otherwise; refusals are logged without the proof.
 *
 * @example
 * await checkDpopProof(deps, { proof: req.headers.dpop, htm: 'POST', htu }, { jkt: session.jkt });
 */
export async function checkDpopProof(
  deps: Pick<AuthDeps, 'store' | 'clock' | 'log'>,
  request: DpopRequest,
  bound: { readonly jkt: string; readonly accessToken?: string; readonly nonce?: string; readonly sessionId?: string },
): Promise<VerifiedDpopProof> {
  let proof: VerifiedDpopProof;
  try {
    proof = await verifyPresentedDpopProof(deps, request, bound);
  } catch (err) {
    logRefusal(deps, bound.sessionId, (err as Error).message);
    throw err;
  }
  if (!(await deps.store.useDpopProof({ key: dpopReplayKey(proof), expiresAt: proof.expiresAt, now: deps.clock.now() }))) {
    logRefusal(deps, bound.sessionId, 'jti replayed');
    throw dpopReplayed();
  }
  return proof;
}

/**
 * Verifies a DPoP proof (core's {@link verifyDpopProof}: key, method, URL, freshness, `ath`,
 * signature; with `bound.jkt` null any key, whose thumbprint the caller holds to the session's
 * binding), then the server nonce when the proof carries one: it must be live in the store,
 * `401 use_dpop_nonce` otherwise. Records nothing and logs nothing: the caller does both.
 *
 * @example
 * const proof = await verifyPresentedDpopProof(deps, { proof: req.headers.dpop, htm: 'POST', htu }, { jkt: null });
 */
export async function verifyPresentedDpopProof(
  deps: Pick<AuthDeps, 'store' | 'clock'>,
  request: DpopRequest,
  bound: { readonly jkt: string | null; readonly accessToken?: string; readonly nonce?: string },
): Promise<VerifiedDpopProof> {
  const now = deps.clock.now();
  const proof = await verifyDpopProof(request.proof, {
    htm: request.htm,
    htu: request.htu,
    now,
    jkt: bound.jkt,
    ...(bound.accessToken === undefined ? {} : { accessToken: bound.accessToken }),
    ...(bound.nonce === undefined ? {} : { nonce: bound.nonce }),
  });
  // A client that asked for server nonces (it sends the last `DPoP-Nonce` it got) must send one
  // that some node issued and that has not expired: the store knows them all.
  if (proof.nonce !== undefined && !(await deps.store.hasDpopRecord({ key: dpopNonceKey(proof.nonce), now }))) {
    throw useDpopNonce();
  }
  return proof;
}

/**
 * Logs a refused proof: the session and why, never the proof.
 *
 * @example
 * logRefusal(deps, session.id, 'jti replayed');
 */
export function logRefusal(deps: Pick<AuthDeps, 'log'>, sessionId: string | undefined, reason: string): void {
  deps.log.warn({ event: 'dpop.refused', session_id: sessionId, reason }, 'DPoP proof refused');
}

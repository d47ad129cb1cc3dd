import type { AuditEventDraft } from '../audit.js';
import type { AuthDeps } from '../deps.js';
import { dpopProofRequired, dpopReplayed, dpopReplayKey } from '../dpop.js';
import { AuthError } from '../errors.js';
import type { Realm } from '../realm.js';
import { openSuccessor, sealSuccessor } from '../refresh-rotation.js';
import type { AuditedRotation, RotationProof } from '../store.js';
import { digestToken, mintSessionToken, parseSessionToken } from '../tokens.js';
import type { TokenPairJson } from '../wire/management.js';
import { tokenPairToJson } from '../wire.js';
import { type DpopRequest, logRefusal, verifyPresentedDpopProof } from './check-dpop-proof.js';
import { auditDraft } from './event.js';

/**
 * The audit event of a refresh presentation's outcome, as the store's transaction appends it:
 * `session.rotated`, `session.rotated_in_grace` (with the session's generation) or
 * `session.refresh_reused` (the session revoked).
 *
 * @example
 * await store.rotateRefreshToken(input, (outcome) => rotationAuditDraft(deps, outcome, now));
 */
export function rotationAuditDraft(deps: Pick<AuthDeps, 'clock' | 'random'>, o: AuditedRotation, at?: number): AuditEventDraft {
  return auditDraft(
    deps,
    o.kind === 'rotated' ? 'session.rotated' : o.kind === 'rotated_in_grace' ? 'session.rotated_in_grace' : 'session.refresh_reused',
    {
      realm: o.session.realm,
      subject: o.session.subject,
      deviceId: o.session.deviceId,
      sessionId: o.session.id,
      ...(at === undefined ? {} : { at }),
      data: o.kind === 'reused' ? { revoked: true } : { generation: o.session.generation },
    },
  );
}

/**
 * Rotates a session's token pair with its single-use refresh token. The immediately previous
 * token, presented again within the grace interval (two tabs refreshing at once, a retry after a
 * lost answer), is answered with the SAME pair its rotation issued, so every such caller ends
 * holding the one live pair; any other retired token revokes the whole session
 * (`refresh_token_reused`), and so does the previous one when its rotation time lies in the
 * future (the clock was stepped back: the interval cannot be measured, so no grace). Every
 * outcome that changes state is audited in the same transaction. A token of a session in
 * another realm is refused as unknown and changes nothing (realm binding).
 *
 * A session bound to a device key (DPoP, its `jkt`) is only refreshed with a valid proof by that
 * key (`dpop`): a refresh without one is `401 invalid_dpop_proof` and changes nothing (no
 * rotation, no reuse detection, no revocation), so a copied refresh token without the key can
 * neither use the session nor end it. The proof is verified here first, all but its key
 * (`verifyPresentedDpopProof`); the store's rotation holds its key to the session's binding on
 * the row it reads (core's `rotationProof`) and records its `jti` in the rotation's own
 * transaction (a replay is refused there, as `useDpopProof` would refuse it): no read of the
 * session before the rotation, one write fewer. A session without a `jkt` (a bearer session)
 * ignores the proof.
 *
 * @example
 * const pair = await rotateRefreshToken(deps, { refreshToken, realm: 'management' });
 */
export async function rotateRefreshToken(
  deps: AuthDeps,
  input: { readonly refreshToken: unknown; readonly realm: Realm; readonly dpop?: DpopRequest },
): Promise<TokenPairJson> {
  if (typeof input.refreshToken !== 'string') {
    throw new AuthError('invalid_request', 'refresh_token must be a string');
  }
  const presented = parseSessionToken(input.refreshToken, 'refresh');
  if (presented === null) throw new AuthError('invalid_refresh_token', 'unknown refresh token');
  // Verified before the rotation, all but the key (a server nonce is looked up in the store): a
  // proof that does not verify, or whose nonce is unknown or could not be looked up, is held
  // against the session only if the rotation finds it bound (a bearer session ignores it), so
  // its refusal waits for the rotation's answer.
  let dpop: RotationProof | undefined;
  let refusal: Error | undefined;
  if (input.dpop !== undefined && input.dpop.proof !== undefined) {
    try {
      const proof = await verifyPresentedDpopProof(deps, input.dpop, { jkt: null });
      dpop = { jkt: proof.jkt, key: dpopReplayKey(proof), expiresAt: proof.expiresAt };
    } catch (err) {
      refusal = err as Error;
    }
  }
  const now = deps.clock.now();
  const s = deps.settings;
  // The new pair names the same session: its selector never changes.
  const access = mintSessionToken('access', presented.sessionId, deps.random);
  const refresh = mintSessionToken('refresh', presented.sessionId, deps.random);
  const accessBound = s.senderConstraint[input.realm] === 'required';
  const outcome = await deps.store.rotateRefreshToken(
    {
      sessionId: presented.sessionId,
      presentedDigest: presented.digest,
      realm: input.realm,
      now,
      graceMs: s.refreshReuseGraceSeconds * 1000,
      next: {
        accessDigest: digestToken(access),
        refreshDigest: digestToken(refresh),
        accessExpiresAt: now + s.accessTokenTtlSeconds * 1000,
        refreshExpiresAt: now + s.refreshTokenTtlSeconds * 1000,
      },
      sealedSuccessor: sealSuccessor(input.refreshToken, presented.sessionId, { access, refresh }, deps.random),
      ...(dpop === undefined ? {} : { dpop }),
    },
    (o) => rotationAuditDraft(deps, o, now),
  );
  switch (outcome.kind) {
    case 'rotated':
      deps.log.info({ event: 'session.rotated', session_id: outcome.session.id }, 'token pair rotated');
      return tokenPairToJson(outcome.session, access, refresh, now, accessBound);
    case 'rotated_in_grace': {
      // The live pair, as its rotation issued it: sealed for exactly the token presented now.
      const live = openSuccessor(input.refreshToken, presented.sessionId, outcome.sealedSuccessor);
      if (live === null) throw new AuthError('invalid_refresh_token', 'unknown or expired refresh token, or its session is revoked');
      deps.log.info({ event: 'session.rotated_in_grace', session_id: outcome.session.id }, 'token pair answered again within grace');
      return tokenPairToJson(outcome.session, live.access, live.refresh, now, accessBound);
    }
    case 'reused': {
      deps.log.warn({ event: 'session.refresh_reused', session_id: outcome.session.id }, 'refresh token reused: session revoked');
      // A stolen sign-in ends on every route host too: the whole sign-in (the session a
      // handed-off one came from, and every session handed off from it; none without
      // `:svc/app-auth-origin`) is revoked right after, each with its event. A stolen host
      // session's token is evidence against the sign-in it came from, not only against itself.
      const family = outcome.session.parentId ?? outcome.session.id;
      await deps.store.revokeSessionFamily({ sessionId: family, now, reason: 'refresh_token_reused' }, (s) =>
        auditDraft(deps, 'session.revoked', {
          realm: s.realm,
          subject: s.subject,
          deviceId: s.deviceId,
          sessionId: s.id,
          at: now,
          data: { reason: 'refresh_token_reused', family },
        }),
      );
      throw new AuthError('refresh_token_reused', 'the refresh token was already used; the session is now revoked');
    }
    case 'invalid':
      throw new AuthError('invalid_refresh_token', 'unknown or expired refresh token, or its session is revoked');
    case 'proof_required': {
      const refused = refusal ?? dpopProofRequired(dpop !== undefined);
      logRefusal(deps, presented.sessionId, refused.message);
      throw refused;
    }
    case 'proof_replayed':
      logRefusal(deps, presented.sessionId, 'jti replayed');
      throw dpopReplayed();
  }
}

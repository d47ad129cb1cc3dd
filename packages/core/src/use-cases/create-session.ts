import type { AuthDeps } from '../deps.js';
import { bindsRefresh, thumbprintOfPublicKeyHex } from '../dpop.js';
import { parseSignatureHex, verifyEd25519Async } from '../ed25519.js';
import { AuthError } from '../errors.js';
import { isIdOfKind, newId } from '../ids.js';
import type { Realm } from '../realm.js';
import { type SessionClientInput, sessionClient } from '../session-client.js';
import type { SessionCreation } from '../store.js';
import { newSessionRecord } from '../store-rules.js';
import { digestToken, mintSessionToken } from '../tokens.js';
import type { TokenPairJson } from '../wire/management.js';
import { tokenPairToJson } from '../wire.js';
import { auditDraft } from './event.js';

/**
 * Signs a device in: reads the challenge, verifies the Ed25519 signature over its exact
 * string, checks the key is enrolled in `realm`, and creates a session with a fresh opaque
 * token pair, using the challenge up in the session's own transaction (store contract 11). A
 * refused sign-in uses its challenge up too, so each challenge answers one attempt however it
 * ends; of concurrent attempts with one challenge, at most one signs in. Every refusal after
 * the input is well-formed is audited as `signin.failed`, unless `auditFailure` is false: an attempt beyond its failure budget (see the server's failure
 * limiter) still runs, so a valid signature signs in whoever spent the budget, but its failure
 * must not grow the audit trail. The session records the `client` it was created from (see
 * `sessionClient`) and, unless the realm's `:auth/sender-constraint` is `:off`, the thumbprint
 * of the device key (`jkt`) its tokens are bound to (DPoP).
 *
 * @example
 * const pair = await createSession(deps, { challengeId, signature, realm: 'management', client: { address: req.ip } });
 */
export async function createSession(
  deps: AuthDeps,
  input: {
    readonly challengeId: unknown;
    readonly signature: unknown;
    readonly realm: Realm;
    readonly client?: SessionClientInput;
    /** Audit a refusal as `signin.failed` (default true). */
    readonly auditFailure?: boolean;
  },
): Promise<TokenPairJson> {
  // Only an id of the exact challenge shape (chl_ and a ULID) goes any further: refusals are
  // audited with the id, and an unauthenticated caller must not be able to write free text
  // (fake event lines, terminal escape sequences) into the audit trail.
  if (!isIdOfKind(input.challengeId, 'challenge')) {
    throw new AuthError('invalid_request', 'challenge_id must be a challenge id (chl_ and 26 Crockford base32 characters)');
  }
  const challengeId = input.challengeId;
  const signature = parseSignatureHex(input.signature);
  const realm = input.realm;
  const fail = async (code: 'invalid_challenge' | 'invalid_signature' | 'user_disabled', reason: string, detail: string) => {
    if (input.auditFailure === false) return new AuthError(code, detail);
    await deps.store.appendAuditEvent(auditDraft(deps, 'signin.failed', { realm, data: { reason, challenge_id: challengeId } }));
    deps.log.warn({ event: 'signin.failed', realm, reason }, 'sign-in refused');
    return new AuthError(code, detail);
  };
  const now = deps.clock.now();
  const use = { id: challengeId, now };
  const unusable = () => fail('invalid_challenge', 'challenge_unknown_expired_or_used', 'unknown, expired or already used challenge');
  const challenge = await deps.store.readChallenge(use);
  if (challenge === null) throw await unusable();
  // A refusal before the session's transaction uses the challenge up by itself: when another
  // attempt used it first, that one's outcome stands, and this one is refused as coming second.
  const refuse = async (code: 'invalid_challenge' | 'invalid_signature', reason: string, detail: string) =>
    (await deps.store.consumeChallenge(use)) === null ? unusable() : fail(code, reason, detail);
  if (challenge.realm !== realm) {
    throw await refuse('invalid_challenge', 'challenge_for_other_realm', 'the challenge was issued for another realm');
  }
  if (!(await verifyEd25519Async(challenge.publicKey, Buffer.from(challenge.challenge, 'utf8'), signature))) {
    throw await refuse('invalid_signature', 'bad_signature', 'the signature does not verify');
  }
  // The active device of the challenge's key, read with the challenge (one store step).
  const device = challenge.device;
  if (device === null || device.realm !== realm) {
    throw await refuse(
      'invalid_signature',
      device === null ? 'key_not_enrolled' : 'key_in_other_realm',
      `the key is not enrolled in the ${realm} realm`,
    );
  }
  const s = deps.settings;
  const expiresAt = now + s.sessionMaxLifetimeSeconds * 1000;
  const sessionId = newId('session', deps.clock, deps.random);
  const access = mintSessionToken('access', sessionId, deps.random);
  const refresh = mintSessionToken('refresh', sessionId, deps.random);
  const session = newSessionRecord({
    id: sessionId,
    device,
    now,
    expiresAt,
    pair: { accessExpiresAt: now + s.accessTokenTtlSeconds * 1000, refreshExpiresAt: now + s.refreshTokenTtlSeconds * 1000 },
    client: sessionClient(input.client),
    // Bound to the key that signed the challenge (DPoP, `cnf.jkt`) unless the realm is `:off`.
    jkt: bindsRefresh(s.senderConstraint[realm]) ? thumbprintOfPublicKeyHex(device.publicKey) : null,
  });
  const pair = {
    accessDigest: digestToken(access),
    refreshDigest: digestToken(refresh),
    accessExpiresAt: session.accessExpiresAt,
    refreshExpiresAt: session.refreshExpiresAt,
  };
  const event = auditDraft(deps, 'session.created', {
    realm,
    subject: device.subject,
    deviceId: device.id,
    sessionId: session.id,
    at: now,
    data: { challenge_id: challenge.id, amr: 'ed25519' },
  });
  let created: SessionCreation;
  try {
    created = await deps.store.createSession(session, pair, event, use);
  } catch (error) {
    // The store failed (an outage, a lock held too long) and the transaction rolled back with the
    // challenge's use: it is used up on its own, if the store lets it, so that even this attempt
    // leaves nothing to try again with.
    await deps.store.consumeChallenge(use).catch(() => undefined);
    throw error;
  }
  if (created === 'challenge_used') throw await unusable();
  if (created === 'device_inactive')
    throw await fail('invalid_signature', 'device_removed', `the key is not enrolled in the ${realm} realm`);
  if (created === 'user_disabled') throw await fail('user_disabled', 'user_disabled', 'the user is disabled: an operator must enable them');
  deps.log.info({ event: 'session.created', session_id: session.id, device_id: device.id, realm }, 'session created');
  return tokenPairToJson(session, access, refresh, now, s.senderConstraint[realm] === 'required');
}

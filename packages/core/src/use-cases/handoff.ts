import type { AuthDeps } from '../deps.js';
import { AuthError } from '../errors.js';
import { HANDOFF_CODE_TTL_SECONDS, isHandoffCode, isHandoffState } from '../handoff.js';
import { newId } from '../ids.js';
import type { Principal } from '../principal.js';
import { type SessionClientInput, sessionClient } from '../session-client.js';
import type { HandoffOutcome } from '../store.js';
import { digestToken, mintSessionToken, mintToken, sha256Hex } from '../tokens.js';
import type { TokenPairJson } from '../wire/management.js';
import { tokenPairToJson } from '../wire.js';
import { auditDraft } from './event.js';

/** A digest of a handoff state value: SHA-256, lowercase hex. */
const DIGEST = /^[0-9a-f]{64}$/;

/**
 * The digest a handoff code is bound to: SHA-256 of the route host's state value (what the
 * route host sends to the auth origin; the value itself stays in the browser's cookie).
 *
 * @example
 * const binding = handoffBinding(state); // 64 hex digits
 */
export function handoffBinding(state: string): string {
  return sha256Hex(state);
}

/**
 * Mints a one-time handoff code at the auth origin for the signed-in browser's session
 * (`principal`, of the application realm): 256 bits of CSPRNG output (`svch_...`), only its
 * digest stored, usable once within {@link HANDOFF_CODE_TTL_SECONDS} at `origin` only, by the
 * browser whose state value digests to `bindingDigest`. A session that was itself handed off
 * (a route host's) cannot hand off again: only the sign-in session can.
 *
 * @example
 * const { code } = await mintHandoffCode(deps, { principal, origin: 'https://app.b.test', bindingDigest });
 */
export async function mintHandoffCode(
  deps: AuthDeps,
  input: { readonly principal: Principal; readonly origin: string; readonly bindingDigest: unknown },
): Promise<{ readonly code: string; readonly expiresAt: number }> {
  const { principal } = input;
  if (principal.realm !== 'application') throw new AuthError('invalid_token', 'only an application session hands off to a route host');
  if (typeof input.bindingDigest !== 'string' || !DIGEST.test(input.bindingDigest)) {
    throw new AuthError('invalid_request', 'binding must be the SHA-256 (64 lowercase hex digits) of the route host state');
  }
  const session = await deps.store.getSession(principal.session);
  if (session === null || (session.parentId ?? null) !== null) {
    throw new AuthError('invalid_token', 'this session was handed off from another host: sign in at the auth origin');
  }
  const now = deps.clock.now();
  const code = mintToken('handoff', deps.random);
  const expiresAt = now + HANDOFF_CODE_TTL_SECONDS * 1000;
  await deps.store.createHandoffCode({
    digest: digestToken(code),
    sessionId: principal.session,
    origin: input.origin,
    bindingDigest: input.bindingDigest,
    createdAt: now,
    expiresAt,
  });
  return { code, expiresAt };
}

/** The refusal a browser is told, by reason (every one is `invalid_handoff` but a disabled user). */
const REFUSAL_DETAIL: Readonly<Record<Exclude<HandoffOutcome, { kind: 'created' }>['reason'], string>> = {
  unknown: 'this sign-in link was already used or is unknown',
  expired: 'this sign-in link expired (it lasts 30 seconds)',
  wrong_origin: 'this sign-in link was made for another site',
  wrong_binding: 'this sign-in link was not started in this browser',
  session_ended: 'the sign-in this link carried has ended',
  user_disabled: 'the user is disabled: an operator must enable them',
};

/**
 * Redeems a handoff code at a route host: uses it up (once, whatever follows), and when it is
 * live, meant for `origin`, bound to this browser's `state` (its state cookie) and its sign-in
 * session is still active, creates the route host's own session (a new token pair, the sign-in
 * session as its parent: revoked with it) and answers its pair. Audited in the same
 * transaction: `session.created` (with `handoff_from` and `origin`), or `signin.failed`
 * (reason `handoff_<why>`) for a refused code that existed.
 *
 * @throws {AuthError} `invalid_handoff` for any refused code (unknown, used, expired, another
 * origin, another browser, an ended sign-in); `user_disabled`.
 * @example
 * const pair = await redeemHandoffCode(deps, { code, state, origin: 'https://app.b.test', client: { address: req.ip } });
 */
export async function redeemHandoffCode(
  deps: AuthDeps,
  input: { readonly code: unknown; readonly state: unknown; readonly origin: string; readonly client?: SessionClientInput },
): Promise<TokenPairJson> {
  if (!isHandoffCode(input.code)) throw new AuthError('invalid_handoff', 'the sign-in link carries no well-formed code');
  if (!isHandoffState(input.state)) throw new AuthError('invalid_handoff', REFUSAL_DETAIL.wrong_binding);
  const now = deps.clock.now();
  const s = deps.settings;
  const id = newId('session', deps.clock, deps.random);
  const access = mintSessionToken('access', id, deps.random);
  const refresh = mintSessionToken('refresh', id, deps.random);
  const client = sessionClient(input.client);
  const outcome = await deps.store.consumeHandoffCode(
    {
      digest: digestToken(input.code),
      origin: input.origin,
      bindingDigest: handoffBinding(input.state),
      now,
      child: {
        id,
        accessExpiresAt: now + s.accessTokenTtlSeconds * 1000,
        refreshExpiresAt: now + s.refreshTokenTtlSeconds * 1000,
        clientAddress: client.clientAddress,
        userAgent: client.userAgent,
      },
      pair: {
        accessDigest: digestToken(access),
        refreshDigest: digestToken(refresh),
        accessExpiresAt: now + s.accessTokenTtlSeconds * 1000,
        refreshExpiresAt: now + s.refreshTokenTtlSeconds * 1000,
      },
    },
    (o) => {
      if (o.kind === 'created') {
        return [
          auditDraft(deps, 'session.created', {
            realm: o.session.realm,
            subject: o.session.subject,
            deviceId: o.session.deviceId,
            sessionId: o.session.id,
            at: now,
            data: { handoff_from: o.parent.id, origin: input.origin, amr: o.session.amr.join(' ') },
          }),
        ];
      }
      // An unknown code is anyone's guess and writes nothing; a real code refused is worth a line.
      if (o.code === null) return [];
      return [
        auditDraft(deps, 'signin.failed', {
          realm: 'application',
          sessionId: o.code.sessionId,
          at: now,
          data: { reason: `handoff_${o.reason}`, origin: input.origin, code_origin: o.code.origin },
        }),
      ];
    },
  );
  if (outcome.kind === 'refused') {
    deps.log.warn({ event: 'signin.failed', reason: `handoff_${outcome.reason}`, origin: input.origin }, 'handoff code refused');
    if (outcome.reason === 'user_disabled') throw new AuthError('user_disabled', REFUSAL_DETAIL.user_disabled);
    throw new AuthError('invalid_handoff', REFUSAL_DETAIL[outcome.reason]);
  }
  deps.log.info(
    { event: 'session.created', session_id: outcome.session.id, handoff_from: outcome.parent.id, origin: input.origin },
    'session handed off',
  );
  return tokenPairToJson(outcome.session, access, refresh, now);
}

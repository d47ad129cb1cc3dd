import { timingSafeEqual } from 'node:crypto';
import type { AuthDeps } from '../deps.js';
import { AuthError } from '../errors.js';
import { isIdOfKind, newId } from '../ids.js';
import type { Principal } from '../principal.js';
import { type SessionClientInput, sessionClient } from '../session-client.js';
import type { SessionRecord } from '../store.js';
import { newSessionRecord } from '../store-rules.js';
import { digestToken, mintSessionToken } from '../tokens.js';
import type { TokenPairJson } from '../wire/management.js';
import { tokenPairToJson } from '../wire.js';
import { auditDraft } from './event.js';

/** How long a console sign-in link lives: one minute, as the contract fixes it. */
export const CONSOLE_LINK_TTL_SECONDS = 60;

/** The `provider` of the flow record that holds a console link (no provider module has this name: aliases are keywords). */
export const CONSOLE_FLOW_PROVIDER = ':svc/console';

/**
 * How a console session was made (its `amr`): the browser holds no key, it was handed a
 * one-time link by a device that signed in with its key. Not an RFC 8176 value on purpose: a
 * requirement on `ed25519` or `hwk` must never be met by a console cookie.
 */
export const CONSOLE_AMR: readonly string[] = Object.freeze(['console']);

// `flw_<ULID>.<256-bit secret, base64url>`
const CODE = /^(flw_[0-9A-HJKMNP-TV-Z]{26})\.([A-Za-z0-9_-]{43})$/;

/**
 * Mints a one-time console sign-in code for the management principal's subject and device:
 * single use and valid {@link CONSOLE_LINK_TTL_SECONDS} seconds. It is stored as a flow record
 * (`createFlow`/`consumeFlow`: exactly one winner on every store), keeping only the digest of
 * the secret half; the code exists only in the answer.
 *
 * @example
 * const { code, expiresAt } = await createConsoleLink(deps, { principal });
 */
export async function createConsoleLink(
  deps: AuthDeps,
  input: { readonly principal: Principal },
): Promise<{ readonly code: string; readonly expiresAt: number }> {
  const p = input.principal;
  if (p.realm !== 'management') throw new AuthError('invalid_token', 'the console needs a management-realm token', { realm: 'management' });
  const now = deps.clock.now();
  const id = newId('flow', deps.clock, deps.random);
  const secret = Buffer.from(deps.random(32)).toString('base64url');
  const expiresAt = now + CONSOLE_LINK_TTL_SECONDS * 1000;
  await deps.store.createFlow({
    id,
    provider: CONSOLE_FLOW_PROVIDER,
    realm: 'management',
    intent: 'signin',
    subject: p.subject,
    pairingIntentId: null,
    state: JSON.stringify({ device: p.device, digest: digestToken(secret), parent_session: p.session }),
    createdAt: now,
    expiresAt,
  });
  deps.log.info({ event: 'console.link_created', subject: p.subject, device_id: p.device }, 'console sign-in link minted');
  return { code: `${id}.${secret}`, expiresAt };
}

/**
 * Uses up a console sign-in code and creates a management session for the subject and device
 * that minted it (amr {@link CONSOLE_AMR}, no key binding: a browser cookie session). Unknown,
 * malformed, expired or already used codes are all `401 invalid_flow`, and a failure is audited
 * as `signin.failed`. The device must still be enrolled and the user not disabled
 * (`createSession`'s own checks).
 *
 * @example
 * const { pair, session } = await redeemConsoleLink(deps, { code, client: { address: req.ip } });
 */
export async function redeemConsoleLink(
  deps: AuthDeps,
  input: { readonly code: unknown; readonly client?: SessionClientInput },
): Promise<{ readonly pair: TokenPairJson; readonly session: SessionRecord }> {
  const refuse = async (reason: string, flowId: string | null) => {
    await deps.store.appendAuditEvent(
      auditDraft(deps, 'signin.failed', { realm: 'management', data: { reason, via: 'console_link', flow_id: flowId } }),
    );
    deps.log.warn({ event: 'signin.failed', realm: 'management', reason }, 'console sign-in refused');
    return new AuthError('invalid_flow', 'the console link is unknown, expired or already used: run `svc auth console` again');
  };
  const m = typeof input.code === 'string' ? CODE.exec(input.code) : null;
  if (m === null || !isIdOfKind(m[1], 'flow')) throw await refuse('malformed_code', null);
  const flowId = m[1] as string;
  const now = deps.clock.now();
  const flow = await deps.store.consumeFlow({ id: flowId, now });
  if (flow === null || flow.provider !== CONSOLE_FLOW_PROVIDER || flow.realm !== 'management' || flow.subject === null) {
    throw await refuse('console_link_unknown_expired_or_used', flowId);
  }
  const state = JSON.parse(flow.state) as { device: string; digest: string; parent_session: string };
  const a = Buffer.from(digestToken(m[2] as string), 'hex');
  const b = Buffer.from(state.digest, 'hex');
  if (a.length !== b.length || !timingSafeEqual(a, b)) throw await refuse('console_link_wrong_secret', flowId);
  const s = deps.settings;
  const sessionId = newId('session', deps.clock, deps.random);
  const access = mintSessionToken('access', sessionId, deps.random);
  const refresh = mintSessionToken('refresh', sessionId, deps.random);
  const session = newSessionRecord({
    id: sessionId,
    device: { id: state.device, realm: 'management', subject: flow.subject },
    now,
    expiresAt: now + s.sessionMaxLifetimeSeconds * 1000,
    pair: { accessExpiresAt: now + s.accessTokenTtlSeconds * 1000, refreshExpiresAt: now + s.refreshTokenTtlSeconds * 1000 },
    client: sessionClient(input.client),
    amr: CONSOLE_AMR,
    jkt: null,
  });
  const created = await deps.store.createSession(
    session,
    {
      accessDigest: digestToken(access),
      refreshDigest: digestToken(refresh),
      accessExpiresAt: session.accessExpiresAt,
      refreshExpiresAt: session.refreshExpiresAt,
    },
    auditDraft(deps, 'session.created', {
      realm: 'management',
      subject: flow.subject,
      deviceId: state.device,
      sessionId,
      at: now,
      data: { amr: 'console', via: 'console_link', flow_id: flowId, parent_session: state.parent_session },
    }),
  );
  if (created === 'device_inactive') throw await refuse('device_removed', flowId);
  if (created === 'user_disabled') throw await refuse('user_disabled', flowId);
  // Only a sign-in's challenge can be used already, and this session is made with none.
  if (created !== 'created') throw new Error(`createSession answered ${created} for a session made without a challenge`);
  deps.log.info({ event: 'session.created', session_id: sessionId, realm: 'management', via: 'console_link' }, 'console session created');
  return { pair: tokenPairToJson(session, access, refresh, now, false), session };
}

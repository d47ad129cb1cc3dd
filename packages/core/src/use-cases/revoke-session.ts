import type { AuthDeps } from '../deps.js';
import { AuthError } from '../errors.js';
import { isIdOfKind } from '../ids.js';
import type { Principal } from '../principal.js';
import type { SessionRecord } from '../store.js';
import { auditDraft } from './event.js';

/** Revokes `target` for `reason` with its `session.revoked` event (`data` says by whom); false when it was already revoked. */
function revokeWithEvent(
  deps: AuthDeps,
  target: SessionRecord,
  now: number,
  data: { readonly reason: string } & Readonly<Record<string, string>>,
): Promise<boolean> {
  return deps.store.revokeSession(
    { sessionId: target.id, now, reason: data.reason },
    auditDraft(deps, 'session.revoked', {
      realm: target.realm,
      subject: target.subject,
      deviceId: target.deviceId,
      sessionId: target.id,
      at: now,
      data,
    }),
  );
}

/**
 * Revokes a session immediately: its access and refresh tokens are refused from the next
 * request on, in every process sharing the store. With no `sessionId` the principal logs
 * itself out. Revoking another session needs a management principal; an application
 * principal may only log itself out. Revoking an already revoked session succeeds (idempotent)
 * without a second event.
 *
 * @example
 * await revokeSession(deps, { principal, sessionId: 'ses_...' });
 */
export async function revokeSession(
  deps: AuthDeps,
  input: { readonly principal: Principal; readonly sessionId?: unknown },
): Promise<{ readonly session_id: string; readonly revoked: true }> {
  const { principal } = input;
  const sessionId = input.sessionId ?? principal.session;
  if (typeof sessionId !== 'string' || !isIdOfKind(sessionId, 'session')) {
    throw new AuthError('invalid_request', 'session_id must be a session id (ses_...)');
  }
  const target = await deps.store.getSession(sessionId);
  if (target === null || (principal.realm !== 'management' && target.id !== principal.session)) {
    throw new AuthError('not_found', 'no such session');
  }
  const now = deps.clock.now();
  const logout = target.id === principal.session;
  const reason = logout ? 'logout' : 'revoked_by_admin';
  // A logout on any route host ends the whole sign-in: the sign-in session (the parent of a
  // handed-off one) and every session handed off from it. Revoking a sign-in session revokes
  // the sessions handed off from it too. One transaction, one event per session revoked.
  const root = logout ? (target.parentId ?? target.id) : target.id;
  const revoked = await deps.store.revokeSessionFamily({ sessionId: root, now, reason }, (s) =>
    auditDraft(deps, 'session.revoked', {
      realm: s.realm,
      subject: s.subject,
      deviceId: s.deviceId,
      sessionId: s.id,
      at: now,
      data: { reason, by_subject: principal.subject, by_session: principal.session, ...(s.id === root ? {} : { family: root }) },
    }),
  );
  if (revoked.length > 0)
    deps.log.info({ event: 'session.revoked', session_id: sessionId, reason, count: revoked.length }, 'session revoked');
  return { session_id: sessionId, revoked: true };
}

/**
 * Revokes the session of a token that was seen where it must never travel (a management token
 * arriving from a network peer: anyone on the path may hold a copy), with reason
 * `token_exposed` and its audit event. The token stops working at once, wherever the copy went.
 *
 * @example
 * await revokeExposedSession(deps, { principal, where: 'node surface, non-loopback peer' });
 */
export async function revokeExposedSession(
  deps: AuthDeps,
  input: { readonly principal: Principal; readonly where: string },
): Promise<boolean> {
  const { principal } = input;
  const target = await deps.store.getSession(principal.session);
  if (target === null) return false;
  const now = deps.clock.now();
  const changed = await revokeWithEvent(deps, target, now, { reason: 'token_exposed', where: input.where });
  if (changed)
    deps.log.warn({ event: 'session.revoked', session_id: target.id, reason: 'token_exposed' }, 'session revoked: its token was exposed');
  return changed;
}

/**
 * Signs the principal's subject out everywhere else: revokes every active session of its
 * subject in its realm except the one making the request (reason `revoked_by_owner`, each with
 * its audit event), as "sign out other sessions" in Better Auth or Kratos. Returns the ids it
 * revoked, newest first; a session revoked meanwhile by someone else is left out.
 *
 * @example
 * const { revoked } = await revokeOtherSessions(deps, { principal });
 */
export async function revokeOtherSessions(
  deps: AuthDeps,
  input: { readonly principal: Principal /** `'self'` from the account page: recorded in each event. */; readonly via?: 'self' },
): Promise<{ readonly revoked: readonly string[] }> {
  const { principal } = input;
  const now = deps.clock.now();
  const others = (await deps.store.listActiveSessions({ now, realm: principal.realm, subject: principal.subject })).filter(
    (s) => s.id !== principal.session,
  );
  const revoked: string[] = [];
  for (const target of others) {
    const data = {
      reason: 'revoked_by_owner',
      by_subject: principal.subject,
      by_session: principal.session,
      ...(input.via === undefined ? {} : { via: input.via }),
    };
    if (await revokeWithEvent(deps, target, now, data)) revoked.push(target.id);
  }
  if (revoked.length > 0)
    deps.log.info({ event: 'session.revoked', count: revoked.length, reason: 'revoked_by_owner' }, 'other sessions revoked');
  return { revoked };
}

/**
 * Ends the browser session a new sign-in replaces (a step-up, or signing in again, in a browser
 * whose cookies held a live session): its cookies are overwritten by the new pair, so nobody
 * should be left holding a live copy of the old one. Reason `replaced`, with the session that
 * replaced it; only that session (a handed-off host session's sign-in stays). Nothing when
 * `previous` is the new session itself or already ended.
 *
 * @example
 * await endReplacedSession(deps, { previous: principal, replacedBy: pair.session_id });
 */
export async function endReplacedSession(
  deps: AuthDeps,
  input: { readonly previous: Principal; readonly replacedBy: string },
): Promise<boolean> {
  const { previous, replacedBy } = input;
  if (previous.session === replacedBy) return false;
  const target = await deps.store.getSession(previous.session);
  if (target === null || target.revokedAt !== null) return false;
  const now = deps.clock.now();
  const data = { reason: 'replaced', replaced_by: replacedBy, by_subject: previous.subject, by_session: previous.session };
  // A replaced sign-in session (no parent) ends with the route-host sessions handed off from it,
  // so the next logout, which knows only the new sign-in, leaves none of them live: the hosts
  // hand the new sign-in over again without a page. A replaced host session ends alone.
  const ended =
    target.parentId === null || target.parentId === undefined
      ? (
          await deps.store.revokeSessionFamily({ sessionId: target.id, now, reason: 'replaced' }, (s) =>
            auditDraft(deps, 'session.revoked', {
              realm: s.realm,
              subject: s.subject,
              deviceId: s.deviceId,
              sessionId: s.id,
              at: now,
              data: { ...data, ...(s.id === target.id ? {} : { family: target.id }) },
            }),
          )
        ).length > 0
      : await revokeWithEvent(deps, target, now, data);
  if (ended) deps.log.info({ event: 'session.revoked', session_id: target.id, reason: 'replaced' }, 'session replaced by a new sign-in');
  return ended;
}

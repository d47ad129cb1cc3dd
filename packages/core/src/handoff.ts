// One sign-in across route hosts (`:svc/app-auth-origin`): the rules of the one-time handoff
// code, pure. The auth origin mints a code for a signed-in browser; the route host redeems it
// for a session of its own, tied to the sign-in session (its parent). Stores apply
// `decideHandoff` inside the transaction that uses the code up.

import { canonicalOrigin, SSO_AUTHORIZE_PATH } from './browser-policy.js';
import type { HandoffChild, HandoffCodeRecord, HandoffOutcome, SessionRecord } from './store.js';
import { isSessionActive, latestTrustedTime } from './store-rules.js';
import { digestsEqual } from './tokens.js';

/** How long a handoff code can be redeemed: long enough for two redirects, short enough that a copy in a log or a history is dead. */
export const HANDOFF_CODE_TTL_SECONDS = 30;

/** The routes of the handoff, under the gateway's `/.svc/auth/v1`. */
export const SSO_START_PATH = '/.svc/auth/v1/sso/start';
export { SSO_AUTHORIZE_PATH };
export const SSO_CALLBACK_PATH = '/.svc/auth/v1/sso/callback';

/** A handoff code: `svch_` and 256 bits of CSPRNG output, base64url. */
const CODE_PATTERN = /^svch_[A-Za-z0-9_-]{43}$/;

/** Whether `value` has the exact shape of a handoff code (anything else is refused without touching the store). */
export function isHandoffCode(value: unknown): value is string {
  return typeof value === 'string' && CODE_PATTERN.test(value);
}

/** A route host's state value (the state cookie): 256 bits, base64url. */
const STATE_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** Whether `value` has the exact shape of a handoff state value. */
export function isHandoffState(value: unknown): value is string {
  return typeof value === 'string' && STATE_PATTERN.test(value);
}

/**
 * The judgement of a handoff code that was just used up (`code`, null when none was: unknown
 * or already used) for a browser at `origin` carrying the state whose digest is
 * `bindingDigest`, against the sign-in session it names (`parent`, null when gone). On success
 * the route host's session: the parent's realm, subject, device (or link) and `amr`, its own
 * token lifetimes, never outliving the parent (`expiresAt` is the parent's), a bearer session
 * (cookies are outside DPoP), `parentId` the parent's id, created when the parent was (its `auth_time`). Checks in this order: unknown,
 * expired, wrong origin, wrong binding, session ended. The user's status is the store's
 * (`user_disabled`).
 *
 * @example
 * const outcome = decideHandoff({ code, parent, origin: 'https://app.b.test', bindingDigest, now, child });
 */
export function decideHandoff(input: {
  readonly code: HandoffCodeRecord | null;
  readonly parent: SessionRecord | null;
  readonly origin: string;
  readonly bindingDigest: string;
  readonly now: number;
  readonly child: HandoffChild;
}): HandoffOutcome {
  const { code, parent, now, child } = input;
  if (code === null) return { kind: 'refused', reason: 'unknown', code: null };
  if (code.expiresAt <= now || code.createdAt > latestTrustedTime(now)) return { kind: 'refused', reason: 'expired', code };
  if (canonicalOrigin(input.origin) !== code.origin) return { kind: 'refused', reason: 'wrong_origin', code };
  if (!digestsEqual(code.bindingDigest, input.bindingDigest)) return { kind: 'refused', reason: 'wrong_binding', code };
  if (parent === null || parent.id !== code.sessionId || !isSessionActive(parent, now) || (parent.parentId ?? null) !== null) {
    return { kind: 'refused', reason: 'session_ended', code };
  }
  const session: SessionRecord = {
    id: child.id,
    realm: parent.realm,
    subject: parent.subject,
    deviceId: parent.deviceId,
    // The sign-in's time, not the handoff's: a session's creation is its `auth_time`, and a
    // handoff is no new sign-in (`:max-auth-age-seconds` keeps counting from the real one).
    createdAt: parent.createdAt,
    expiresAt: parent.expiresAt,
    accessExpiresAt: Math.min(child.accessExpiresAt, parent.expiresAt),
    refreshExpiresAt: Math.min(child.refreshExpiresAt, parent.expiresAt),
    generation: 0,
    lastRotatedAt: null,
    revokedAt: null,
    revokedReason: null,
    clientAddress: child.clientAddress,
    userAgent: child.userAgent,
    amr: parent.amr,
    jkt: null,
    parentId: parent.id,
  };
  return { kind: 'created', session, parent };
}

/** A handoff code as the SQL stores keep it. */
export interface HandoffCodeRow {
  digest: string;
  session_id: string;
  origin: string;
  binding_digest: string;
  created_at: number;
  expires_at: number;
}

/** A {@link HandoffCodeRow} as a record. */
export function toHandoffCode(r: HandoffCodeRow): HandoffCodeRecord {
  return Object.freeze({
    digest: r.digest,
    sessionId: r.session_id,
    origin: r.origin,
    bindingDigest: r.binding_digest,
    createdAt: Number(r.created_at),
    expiresAt: Number(r.expires_at),
  });
}

/**
 * Where a browser may be sent back to after a handoff: `returnUrl` parsed as an absolute
 * `http(s)` URL whose origin is one of `origins` (the configured route origins), with no user
 * info; anything else is null (an open redirect refused). The answer is the target origin and
 * the path (with query) on it.
 *
 * @example
 * handoffReturn('https://app.b.test/orders?id=7', ['https://app.b.test']); // { origin: 'https://app.b.test', path: '/orders?id=7' }
 * handoffReturn('https://evil.test/', ['https://app.b.test']); // null
 */
export function handoffReturn(returnUrl: unknown, origins: readonly string[]): { readonly origin: string; readonly path: string } | null {
  if (typeof returnUrl !== 'string' || returnUrl.length > 2048) return null;
  let url: URL;
  try {
    url = new URL(returnUrl);
  } catch {
    return null;
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.username !== '' || url.password !== '') return null;
  const origin = canonicalOrigin(url.origin);
  if (origin === null || !origins.includes(origin)) return null;
  const path = `${url.pathname}${url.search}`;
  if (path[0] !== '/' || path[1] === '/' || path[1] === '\\') return null;
  return { origin, path };
}

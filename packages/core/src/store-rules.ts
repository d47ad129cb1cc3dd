import type { BootstrapOutcome, DeviceRecord, PairingCompletion, SessionRecord, UserFilter, UserRecord } from './store.js';
import { digestsEqual } from './tokens.js';

// The single-use and liveness rules every store applies, pure: each takes what the store read
// (inside its transaction, under whatever lock it holds) and says what happens and what to
// write. Stores keep the locking, the SQL and the transactions; where a rule must run inside
// one conditional UPDATE (the winner of a race is whoever's UPDATE matches), the SQL store
// builds that WHERE from the fragment beside the predicate here (`@svc/core/sql-rows`).

/**
 * How far a stored time may lie in the future of `now` and still be trusted, in milliseconds:
 * the clock skew tolerated between the nodes sharing a store. A stored rotation time further in
 * the future means the clock was stepped back (or a node's clock is wrong): the interval since
 * it cannot be measured, so the grace interval does not apply (fail closed).
 */
export const CLOCK_SKEW_TOLERANCE_MS = 1000;

/** Why a session was revoked when a retired refresh token came back. */
export const REVOKED_REFRESH_REUSED = 'refresh_token_reused';
/** Why a session was revoked when its device was removed. */
export const REVOKED_DEVICE_REMOVED = 'device_removed';
/** Why a session was revoked when its link (a passkey, an OIDC login) was removed. */
export const REVOKED_LINK_REMOVED = 'link_removed';
/** The revocation reason of the sessions a user's disabling ends. */
export const REVOKED_USER_DISABLED = 'user_disabled';
/** The revocation reason of the sessions a user's removal ends. */
export const REVOKED_USER_REMOVED = 'user_removed';

/**
 * Whether `user` passes a {@link UserFilter} (paging aside): the rule the memory store applies and
 * the SQL stores write as their WHERE clause. `text` matches a substring of the name, email or
 * userName, ASCII letters compared without case.
 *
 * @example
 * users.filter((u) => userMatches(u, { realm: 'application', group: 'ops', limit: 10 }));
 */
export function userMatches(user: UserRecord, filter: UserFilter): boolean {
  if (filter.realm !== undefined && user.realm !== filter.realm) return false;
  if (filter.status !== undefined && user.status !== filter.status) return false;
  if (filter.group !== undefined && !user.groups.includes(filter.group)) return false;
  if (filter.email !== undefined && user.email !== filter.email) return false;
  if (filter.userName !== undefined && user.userName !== filter.userName) return false;
  if (filter.externalId !== undefined && user.externalId !== filter.externalId) return false;
  if (filter.after !== undefined && !(user.subject > filter.after)) return false;
  if (filter.text !== undefined) {
    const needle = asciiLower(filter.text);
    const hay = [user.name, user.email, user.userName].filter((x): x is string => x !== null).map(asciiLower);
    if (!hay.some((h) => h.includes(needle))) return false;
  }
  return true;
}

function asciiLower(s: string): string {
  return s.replace(/[A-Z]/g, (c) => c.toLowerCase());
}

/** How a device-key session was made (RFC 8176 has no value for Ed25519 keys: the contract's own). */
export const DEVICE_AMR: readonly string[] = Object.freeze(['ed25519']);

/**
 * Whether a session can still be used at `now`: not revoked and within its absolute lifetime.
 * SQL form: `liveSessionSql`.
 *
 * @example
 * if (!isSessionLive(session, now)) return { kind: 'invalid' };
 */
export function isSessionLive(s: Pick<SessionRecord, 'revokedAt' | 'expiresAt'>, now: number): boolean {
  return s.revokedAt === null && s.expiresAt > now;
}

/**
 * Whether a session is listed as active at `now`: live, and its refresh token not expired (it
 * can still be renewed). SQL form: `activeSessionSql`.
 *
 * @example
 * const active = sessions.filter((s) => isSessionActive(s, now));
 */
export function isSessionActive(s: Pick<SessionRecord, 'revokedAt' | 'expiresAt' | 'refreshExpiresAt'>, now: number): boolean {
  return isSessionLive(s, now) && s.refreshExpiresAt > now;
}

/**
 * Whether a session's current access token authenticates at `now`: the session is live and the
 * access token has not expired.
 *
 * @example
 * if (session === null || !isAccessValid(session, now)) throw invalidToken();
 */
export function isAccessValid(s: Pick<SessionRecord, 'revokedAt' | 'expiresAt' | 'accessExpiresAt'>, now: number): boolean {
  return isSessionLive(s, now) && s.accessExpiresAt > now;
}

/**
 * The expiries a new token pair is stored with: no pair outlives its session.
 *
 * @example
 * const { accessExpiresAt, refreshExpiresAt } = clampPairToSession(next, session.expiresAt);
 */
export function clampPairToSession(
  pair: { readonly accessExpiresAt: number; readonly refreshExpiresAt: number },
  sessionExpiresAt: number,
): { readonly accessExpiresAt: number; readonly refreshExpiresAt: number } {
  return {
    accessExpiresAt: Math.min(pair.accessExpiresAt, sessionExpiresAt),
    refreshExpiresAt: Math.min(pair.refreshExpiresAt, sessionExpiresAt),
  };
}

/**
 * The latest creation time of a record (a challenge) that can still be aged at `now`: one
 * dated further in the future means the clock was stepped back, so it is refused (fail closed).
 *
 * @example
 * const latest = latestTrustedTime(now); // now + CLOCK_SKEW_TOLERANCE_MS
 */
export function latestTrustedTime(now: number): number {
  return now + CLOCK_SKEW_TOLERANCE_MS;
}

/** A bootstrap token as a store keeps it (its digest is how it was found). */
export interface BootstrapTokenState {
  readonly usedAt: number | null;
  readonly supersededAt: number | null;
  readonly expiresAt: number;
}

/**
 * The bootstrap-token rule, in the contract's refusal order: unknown → `unknown`; used (even if
 * superseded afterwards: the more useful answer) → `used`; superseded → `unknown`; expired →
 * `expired`; the device's key already enrolled → `already_enrolled` (the token stays unused);
 * otherwise `consume`: mark it used, insert the device, append the event. SQL form of "can be
 * consumed": `usableBootstrapSql`.
 *
 * @example
 * const d = decideBootstrapConsumption(row, { now, keyTaken: activeDevice !== undefined });
 */
export function decideBootstrapConsumption(
  token: BootstrapTokenState | undefined,
  input: { readonly now: number; readonly keyTaken: boolean },
): Exclude<BootstrapOutcome, { kind: 'enrolled' }> | { readonly kind: 'consume' } {
  if (token === undefined) return { kind: 'unknown' };
  if (token.usedAt !== null) return { kind: 'used' };
  if (token.supersededAt !== null) return { kind: 'unknown' };
  if (token.expiresAt <= input.now) return { kind: 'expired' };
  if (input.keyTaken) return { kind: 'already_enrolled' };
  return { kind: 'consume' };
}

/** A challenge as a store keeps it. */
export interface ChallengeState {
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly usedAt: number | null;
}

/**
 * Whether a challenge can be used up at `now`: unused, not expired, and not dated beyond
 * {@link latestTrustedTime} (its age could not be measured). SQL form: `consumableChallengeSql`.
 *
 * @example
 * if (isChallengeConsumable(row, now)) row.usedAt = now;
 */
export function isChallengeConsumable(c: ChallengeState, now: number): boolean {
  return c.usedAt === null && c.expiresAt > now && c.createdAt <= latestTrustedTime(now);
}

/** A pairing intent's lifecycle fields. */
export interface IntentState {
  readonly codeDigest: string;
  readonly expiresAt: number;
  readonly failures: number;
  readonly completedAt: number | null;
  readonly burnedAt: number | null;
}

/**
 * Whether a pairing intent can still be completed or fail at `now`: not completed, not burned,
 * not expired. SQL form: `liveIntentSql`.
 *
 * @example
 * if (!isIntentLive(intent, now)) return null;
 */
export function isIntentLive(i: Pick<IntentState, 'expiresAt' | 'completedAt' | 'burnedAt'>, now: number): boolean {
  return i.completedAt === null && i.burnedAt === null && i.expiresAt > now;
}

/**
 * One wrong pairing code against an intent: null (nothing written) when the intent is unknown
 * or no longer live; otherwise its new failure count, burned (`burnedAt = now`) once the count
 * reaches `maxFailures`. The SQL stores compute the same in one conditional UPDATE (see
 * `pairingFailureSql`), so concurrent wrong codes each count once.
 *
 * @example
 * const r = decidePairingFailure(intent, { now, maxFailures: 5 }); // { failures: 3, burned: false }
 */
export function decidePairingFailure(
  intent: IntentState | undefined,
  input: { readonly now: number; readonly maxFailures: number },
): { readonly failures: number; readonly burned: boolean } | null {
  if (intent === undefined || !isIntentLive(intent, input.now)) return null;
  const failures = intent.failures + 1;
  return { failures, burned: failures >= input.maxFailures };
}

/**
 * Completing a pairing intent with a code digest: `invalid` unless the intent is live and the
 * code matches; `already_enrolled` when the device's key is taken (the intent stays live, like a
 * bootstrap token: the admin's code is not wasted); otherwise `complete`: mark it completed,
 * insert the device, append the event.
 *
 * @example
 * const d = decidePairingCompletion(intent, { codeDigest, now, keyTaken: false });
 */
export function decidePairingCompletion(
  intent: IntentState | undefined,
  input: { readonly codeDigest: string; readonly now: number; readonly keyTaken: boolean },
): Exclude<PairingCompletion, { kind: 'completed' }> | { readonly kind: 'complete' } {
  if (intent === undefined || !isIntentLive(intent, input.now) || !digestsEqual(intent.codeDigest, input.codeDigest)) {
    return { kind: 'invalid' };
  }
  if (input.keyTaken) return { kind: 'already_enrolled' };
  return { kind: 'complete' };
}

/**
 * Whether an intent's users let it complete, given the status of its subject's user and of its
 * creator's (`createdBy`) user, each read inside the completing transaction (null: no user).
 * A missing user was removed: `invalid` (completion must never recreate a removed user, nor
 * honour the intent of a removed admin); a disabled one: `user_disabled`. Nothing is written
 * either way.
 *
 * @example
 * decideIntentUsers('active', null); // 'invalid': the admin who prepared it was removed
 */
export function decideIntentUsers(
  subject: UserRecord['status'] | null,
  creator: UserRecord['status'] | null,
): 'complete' | 'invalid' | 'user_disabled' {
  if (subject === null || creator === null) return 'invalid';
  if (subject === 'disabled' || creator === 'disabled') return 'user_disabled';
  return 'complete';
}

/**
 * Removing a device: `not_found` when it is unknown or already removed (nothing written);
 * with `keepLast`, `last` when it is the only active device of its realm (nothing written);
 * otherwise `remove`: mark it removed, revoke its live sessions ({@link REVOKED_DEVICE_REMOVED}),
 * append the event. `activeInRealm` must be counted inside the store's transaction, with the
 * realm's active rows locked where writers run concurrently.
 *
 * @example
 * const d = decideDeviceRemoval({ active: true, activeInRealm: 1, keepLast: true }); // 'last'
 */
export function decideDeviceRemoval(input: {
  readonly active: boolean;
  readonly activeInRealm: number;
  readonly keepLast: boolean;
}): 'remove' | 'not_found' | 'last' {
  if (!input.active) return 'not_found';
  if (input.keepLast && input.activeInRealm <= 1) return 'last';
  return 'remove';
}

/**
 * A new session's record: generation 0, never rotated, not revoked, its first pair's expiries
 * clamped to the session's end ({@link clampPairToSession}).
 *
 * @example
 * const session = newSessionRecord({ id, device, now, expiresAt, pair: { accessExpiresAt, refreshExpiresAt } });
 */
export function newSessionRecord(input: {
  readonly id: string;
  readonly device: Pick<DeviceRecord, 'id' | 'realm' | 'subject'>;
  readonly now: number;
  readonly expiresAt: number;
  readonly pair: { readonly accessExpiresAt: number; readonly refreshExpiresAt: number };
  /** What the session records about its client (see `sessionClient`); none when omitted. */
  readonly client?: Pick<SessionRecord, 'clientAddress' | 'userAgent'>;
  /** How it was made (RFC 8176 values); a device key's {@link DEVICE_AMR} when omitted. */
  readonly amr?: readonly string[];
  /** The thumbprint of the device key its tokens are bound to (DPoP); a bearer session when omitted. */
  readonly jkt?: string | null;
}): SessionRecord {
  return {
    id: input.id,
    realm: input.device.realm,
    subject: input.device.subject,
    deviceId: input.device.id,
    createdAt: input.now,
    expiresAt: input.expiresAt,
    ...clampPairToSession(input.pair, input.expiresAt),
    generation: 0,
    lastRotatedAt: null,
    revokedAt: null,
    revokedReason: null,
    clientAddress: input.client?.clientAddress ?? null,
    userAgent: input.client?.userAgent ?? null,
    amr: Object.freeze([...(input.amr ?? DEVICE_AMR)]),
    jkt: input.jkt ?? null,
  };
}

/**
 * Whether a credential's signature counter, as an authenticator just reported it, may replace
 * the stored one: it must strictly increase (a counter that stands still or goes back means a
 * cloned authenticator, WebAuthn §6.1.1), except that an authenticator without a counter
 * reports 0 every time (both 0). A credential without a counter (null) stays without one.
 * SQL form: `counterAdvanceSql`.
 *
 * @example
 * isCounterAdvance(41, 42); // true
 * isCounterAdvance(42, 42); // false: replayed or cloned
 * isCounterAdvance(0, 0); // true: no counter on this authenticator
 */
export function isCounterAdvance(stored: number | null, presented: number | null): boolean {
  if (stored === null || presented === null) return stored === null && presented === null;
  return presented > stored || (stored === 0 && presented === 0);
}

/** A flow's lifecycle fields. */
export interface FlowState {
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly consumedAt: number | null;
}

/**
 * Whether a flow can be used up at `now`: unconsumed, not expired, and not dated beyond
 * {@link latestTrustedTime}. SQL form: `consumableFlowSql`.
 *
 * @example
 * if (isFlowConsumable(row, now)) row.consumedAt = now;
 */
export function isFlowConsumable(f: FlowState, now: number): boolean {
  return f.consumedAt === null && f.expiresAt > now && f.createdAt <= latestTrustedTime(now);
}

/**
 * The page of audit events `listAuditEvents` reads: `afterSeq` and `limit` as whole numbers
 * from 0 (NaN is 0, fractions round down, Infinity is the largest safe integer), which every
 * engine accepts for LIMIT/OFFSET.
 *
 * @example
 * const { afterSeq, limit } = auditPage(input); // auditPage({ afterSeq: -3, limit: 2.5 }) → { afterSeq: 0, limit: 2 }
 */
export function auditPage(input: { readonly afterSeq: number; readonly limit: number }): {
  readonly afterSeq: number;
  readonly limit: number;
} {
  const whole = (n: number): number => (Number.isNaN(n) ? 0 : Math.max(0, Math.min(Math.floor(n), Number.MAX_SAFE_INTEGER)));
  return { afterSeq: whole(input.afterSeq), limit: whole(input.limit) };
}

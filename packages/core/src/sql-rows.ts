// For the two SQL store addons only (`@svc/core/sql-rows`): the column lists of the relational
// layout their migrations share, and the WHERE fragments of the rules that must run inside one
// conditional UPDATE (or a filtered SELECT) to stay atomic. Each fragment is the SQL form of a
// pure predicate in `store-rules.ts`, kept beside its name here so the two cannot drift: change
// one, change the other (the conformance suite runs the same cases against the SQL stores and
// the in-memory store, which evaluates the predicates themselves). Arguments are the SQL
// expressions to compare with (a placeholder such as `$2` or `@now`), and an optional table
// alias with its dot.

import type { AttemptWindow } from './attempt-budget.js';
import type { SessionRecord, TokenPairDigests } from './store.js';
import { amrText } from './store-rows.js';
import { clampPairToSession } from './store-rules.js';

export const DEVICE_COLUMNS = 'id, public_key, realm, subject, name, created_at, removed_at';
export const SESSION_COLUMNS =
  'id, realm, subject, device_id, created_at, expires_at, access_expires_at, refresh_expires_at, generation, last_rotated_at, revoked_at, revoked_reason, client_address, user_agent, amr, jkt, parent_id';
export const ACCESS_COLUMNS = `${SESSION_COLUMNS}, access_digest`;
/**
 * The bearer check's columns over {@link ACCESS_FROM}: the session's, its access digest, and
 * its user's attributes (`u_*`, null when the subject has no user).
 */
export const ACCESS_USER_COLUMNS = `${SESSION_COLUMNS.split(', ')
  .map((c) => `s.${c}`)
  .join(', ')}, s.access_digest, u.name AS u_name, u.email AS u_email, u.email_verified AS u_email_verified, u.groups AS u_groups`;
/** The bearer check's FROM: a session and its user, one primary-key lookup each. */
export const ACCESS_FROM = 'sessions s LEFT JOIN users u ON u.subject = s.subject';
export const USER_COLUMNS =
  'subject, realm, user_name, external_id, name, name_source, email, email_verified, email_source, groups, groups_source, status, created_at, updated_at, last_sign_in_at, disabled_at';
export const GROUP_COLUMNS = 'id, realm, name, external_id, created_at, updated_at';
export const SCIM_TOKEN_COLUMNS = 'id, digest, name, created_at, created_by, last_used_at, revoked_at';
export const ROTATION_COLUMNS = `${SESSION_COLUMNS}, refresh_digest, prev_refresh_digest, prev_rotated_at`;
/** The columns of a `RefreshRow`, for the stores' SELECT before `decideRotation`. */
export const REFRESH_COLUMNS = `${ROTATION_COLUMNS}, prev_successor`;

/** The columns a new session is inserted with, in the order of {@link newSessionValues} (a handed-off session adds `parent_id`). */
export const NEW_SESSION_COLUMNS =
  'id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at, refresh_digest, refresh_expires_at, generation, last_rotated_at, revoked_at, revoked_reason, client_address, user_agent, amr, jkt';

/** The values of a new session, in {@link NEW_SESSION_COLUMNS}' order. */
export type NewSessionValues = [
  id: string,
  realm: SessionRecord['realm'],
  subject: string,
  deviceId: string,
  createdAt: number,
  expiresAt: number,
  accessDigest: string,
  accessExpiresAt: number,
  refreshDigest: string,
  refreshExpiresAt: number,
  generation: number,
  lastRotatedAt: number | null,
  revokedAt: number | null,
  revokedReason: string | null,
  clientAddress: string | null,
  userAgent: string | null,
  amr: string,
  jkt: string | null,
];

/**
 * The 18 values of a new session for {@link NEW_SESSION_COLUMNS}, its pair's expiries clamped to
 * the session's: positional parameters for both SQL stores (on SQLite, named ones are looked up
 * on an object one by one, the costliest binding of a sign-in).
 *
 * @example
 * insert.run(...newSessionValues(session, pair), session.parentId ?? null);
 */
export function newSessionValues(session: SessionRecord, pair: TokenPairDigests): NewSessionValues {
  const expiries = clampPairToSession(pair, session.expiresAt);
  return [
    session.id,
    session.realm,
    session.subject,
    session.deviceId,
    session.createdAt,
    session.expiresAt,
    pair.accessDigest,
    expiries.accessExpiresAt,
    pair.refreshDigest,
    expiries.refreshExpiresAt,
    session.generation,
    session.lastRotatedAt,
    session.revokedAt,
    session.revokedReason,
    session.clientAddress,
    session.userAgent,
    amrText(session.amr),
    session.jkt ?? null,
  ];
}
export const EVENT_COLUMNS = 'seq, id, at, type, realm, subject, device_id, session_id, data, prev_hash, hash';
export const INTENT_COLUMNS =
  'id, realm, subject, name, code_digest, created_at, expires_at, created_by, failures, completed_at, burned_at, device_id, prepared_by_node';
export const CHALLENGE_COLUMNS = 'id, public_key, realm, challenge, created_at, expires_at';
export const LINK_COLUMNS =
  'id, realm, subject, provider, issuer, external_subject, credential_data, counter, name, created_at, last_used_at, removed_at';
export const HANDOFF_CODE_COLUMNS = 'digest, session_id, origin, binding_digest, created_at, expires_at';
export const FLOW_COLUMNS = 'id, provider, realm, intent, subject, pairing_intent_id, state, created_at, expires_at';

/**
 * `isSessionLive` as SQL: not revoked, within its absolute lifetime.
 *
 * @example
 * `UPDATE sessions SET ... WHERE device_id = $1 AND ${liveSessionSql('$2')}`
 */
export function liveSessionSql(now: string, alias = ''): string {
  return `${alias}revoked_at IS NULL AND ${alias}expires_at > ${now}`;
}

/**
 * `gracePairEnded` as SQL: a sealed grace pair whose previous token was rotated before `before`.
 *
 * @example
 * `UPDATE sessions SET prev_successor = NULL WHERE ${gracePairEndedSql('@graceEndedBefore')}`
 */
export function gracePairEndedSql(before: string, alias = ''): string {
  return `${alias}prev_successor IS NOT NULL AND ${alias}prev_rotated_at < ${before}`;
}

/**
 * `isSessionActive` as SQL: live, with a refresh token that has not expired.
 *
 * @example
 * `SELECT ... FROM sessions WHERE ${activeSessionSql('@now')}`
 */
export function activeSessionSql(now: string, alias = ''): string {
  return `${liveSessionSql(now, alias)} AND ${alias}refresh_expires_at > ${now}`;
}

/**
 * A bootstrap token `decideBootstrapConsumption` would consume (the key check aside): unused,
 * not superseded, not expired.
 *
 * @example
 * `UPDATE bootstrap_tokens SET used_at = $2 WHERE digest = $1 AND ${usableBootstrapSql('$2')}`
 */
export function usableBootstrapSql(now: string): string {
  return `used_at IS NULL AND superseded_at IS NULL AND expires_at > ${now}`;
}

/**
 * `isChallengeConsumable` as SQL; `latest` is `latestTrustedTime(now)`; `alias` (`c.`) qualifies
 * the challenge's columns.
 *
 * @example
 * `UPDATE challenges SET used_at = $2 WHERE id = $1 AND ${consumableChallengeSql('$2', '$3')}`
 */
export function consumableChallengeSql(now: string, latest: string, alias = ''): string {
  return `${alias}used_at IS NULL AND ${alias}expires_at > ${now} AND ${alias}created_at <= ${latest}`;
}

/**
 * `isIntentLive` as SQL: not completed, not burned, not expired.
 *
 * @example
 * `UPDATE pairing_intents SET ... WHERE id = $1 AND ${liveIntentSql('$3')}`
 */
export function liveIntentSql(now: string): string {
  return `completed_at IS NULL AND burned_at IS NULL AND expires_at > ${now}`;
}

/**
 * Burns every live intent created by or for a subject (a disable or a removal of its user):
 * parameters subject, now.
 *
 * @example
 * `${burnSubjectIntentsSql('$1', '$2')}`
 */
export function burnSubjectIntentsSql(subject: string, now: string): string {
  return `UPDATE pairing_intents SET burned_at = ${now} WHERE (subject = ${subject} OR created_by = ${subject}) AND ${liveIntentSql(now)}`;
}

/**
 * `decidePairingFailure` as one conditional UPDATE's SET and WHERE: the count is taken on the
 * row as committed, so concurrent wrong codes each count once and exactly one burns the intent.
 *
 * @example
 * `UPDATE pairing_intents ${pairingFailureSql({ id: '$1', now: '$2', maxFailures: '$3' })} RETURNING failures, burned_at`
 */
export function pairingFailureSql(p: { readonly id: string; readonly now: string; readonly maxFailures: string }): string {
  return `SET failures = failures + 1, burned_at = CASE WHEN failures + 1 >= ${p.maxFailures} THEN ${p.now} ELSE NULL END
       WHERE id = ${p.id} AND ${liveIntentSql(p.now)}`;
}

/**
 * `isFlowConsumable` as SQL; `latest` is `latestTrustedTime(now)`.
 *
 * @example
 * `UPDATE flows SET consumed_at = $2 WHERE id = $1 AND ${consumableFlowSql('$2', '$3')} RETURNING ${FLOW_COLUMNS}`
 */
export function consumableFlowSql(now: string, latest: string): string {
  return `consumed_at IS NULL AND expires_at > ${now} AND created_at <= ${latest}`;
}

/**
 * `isCounterAdvance` as SQL over the `counter` column: both null, or strictly greater, or both
 * 0. `presented` must be typed where the engine needs it (PostgreSQL: `$3::bigint`).
 *
 * @example
 * `UPDATE links SET counter = $3, last_used_at = $2 WHERE id = $1 AND removed_at IS NULL AND ${counterAdvanceSql('$3::bigint')}`
 */
export function counterAdvanceSql(presented: string, alias = ''): string {
  return `((${alias}counter IS NULL AND ${presented} IS NULL) OR ${alias}counter < ${presented} OR (${alias}counter = 0 AND ${presented} = 0))`;
}

/**
 * The window `decideAttemptWindow` is given for an attempt_budget row: none for a row whose
 * counts are both 0 (it holds nothing, so its window starts afresh, as a missing one does),
 * else the row's. `attemptWindowSql` decides on the same terms.
 *
 * @example
 * decideAttemptWindow(row.key, storedAttemptWindow(row), input);
 */
export function storedAttemptWindow(row: {
  readonly key: string;
  readonly window_start: number;
  readonly failures: number;
  readonly pending: number;
  readonly pending_since: number;
}): AttemptWindow | undefined {
  return row.failures + row.pending === 0
    ? undefined
    : { key: row.key, start: row.window_start, failures: row.failures, pending: row.pending, pendingSince: row.pending_since };
}

/**
 * `decideAttemptWindow` as SQL, for one more attempt at `now`, over the attempt_budget row
 * `alias` (its `window_start`, `failures`, `pending`, `pending_since` as committed and locked):
 * the select-list columns `reserve` (the decision is `reserve`), and `new_start`,
 * `new_failures`, `new_pending`, `new_pending_since` (the window it reserves). A row whose
 * counts are both 0 holds nothing, so its window starts afresh at `now` (see
 * `storedAttemptWindow`); running attempts count only within their lease (`leaseMs` after
 * `pending_since`). PostgreSQL decides and reserves in one statement with it, so no row lock is
 * held across a round trip; the store runs `decideAttemptWindow` on the same locked row and
 * refuses to go on if the two differ.
 *
 * @example
 * `SELECT key, ${attemptWindowSql({ now: '$2::bigint', windowMs: '$3::bigint', max: '$4::int', leaseMs: '$5::bigint' })} FROM attempt_budget ...`
 */
export function attemptWindowSql(
  p: { readonly now: string; readonly windowMs: string; readonly max: string; readonly leaseMs: string },
  alias = '',
): string {
  const fresh = `(${alias}failures + ${alias}pending = 0 OR ${p.now} - ${alias}window_start >= ${p.windowMs})`;
  const leased = `(${alias}pending > 0 AND ${p.now} - ${alias}pending_since < ${p.leaseMs})`;
  return `(${fresh} OR ${alias}failures + CASE WHEN ${leased} THEN ${alias}pending ELSE 0 END < ${p.max}) AS reserve,
    CASE WHEN ${fresh} OR ${alias}window_start > ${p.now} THEN ${p.now} ELSE ${alias}window_start END AS new_start,
    CASE WHEN ${fresh} THEN 0 ELSE ${alias}failures END AS new_failures,
    CASE WHEN ${fresh} OR NOT ${leased} THEN 1 ELSE ${alias}pending + 1 END AS new_pending,
    CASE WHEN ${fresh} OR NOT ${leased} OR ${alias}pending_since > ${p.now} THEN ${p.now} ELSE ${alias}pending_since END AS new_pending_since`;
}

/**
 * The diagnostics counters' queries (see `toStoreStats`): live devices and active sessions per
 * realm, and the kept per-type event counts (migration 006: a GROUP BY over the whole trail grew
 * with every event). `now` is the placeholder of the current time. The audit head is read by
 * each store its own way (SQLite: the last event; PostgreSQL: its `audit_head` row).
 *
 * @example
 * const sql = statsSql('$1');
 * const devices = (await client.query(sql.devices)).rows;
 */
export function statsSql(now: string): { readonly devices: string; readonly sessions: string; readonly events: string } {
  return {
    devices: 'SELECT realm, COUNT(*) AS n FROM devices WHERE removed_at IS NULL GROUP BY realm',
    sessions: `SELECT realm, COUNT(*) AS n FROM sessions WHERE ${activeSessionSql(now)} GROUP BY realm`,
    events: 'SELECT type, n FROM audit_counts',
  };
}

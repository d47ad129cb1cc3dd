// The rows and parameters of the SQLite store's statements.
import type { AuditEvent } from '@svc/core';
import type { AccessRow, ChallengeRow, DeviceRow, RefreshRow } from '@svc/core/store';
import type Database from 'better-sqlite3';

/**
 * `stmt` answering each row as an array, once its columns are checked to be `columns`, in that
 * order: what a tuple reader below indexes by. better-sqlite3 builds a row object by adding its
 * columns one at a time through V8's slow path (about 2,500 instructions a column); an array and
 * one object literal in JS cost a fraction of that. Checked when prepared, so a column list
 * reordered in core fails as the store opens instead of misreading rows.
 *
 * @example
 * const byKey = inColumnOrder(db.prepare<[string], DeviceTuple>(`SELECT ${DEVICE_COLUMNS} FROM devices WHERE public_key = ?`), DEVICE_TUPLE);
 */
export function inColumnOrder<S extends Database.Statement<unknown[] | object, unknown>>(stmt: S, columns: string): S {
  const names = stmt
    .columns()
    .map((c) => c.name)
    .join(', ');
  if (names !== columns) throw new TypeError(`the statement answers the columns ${names}, where its reader expects ${columns}`);
  stmt.raw(true);
  return stmt;
}

/** The columns {@link challengeRowOf} reads, in order. */
export const CHALLENGE_TUPLE = 'id, public_key, realm, challenge, created_at, expires_at';
export type ChallengeTuple = [
  id: string,
  public_key: string,
  realm: ChallengeRow['realm'],
  challenge: string,
  created_at: number,
  expires_at: number,
];
export function challengeRowOf(t: ChallengeTuple): ChallengeRow {
  return { id: t[0], public_key: t[1], realm: t[2], challenge: t[3], created_at: t[4], expires_at: t[5] };
}

/** The columns {@link deviceRowOf} reads, in order. */
export const DEVICE_TUPLE = 'id, public_key, realm, subject, name, created_at, removed_at';
export type DeviceTuple = [
  id: string,
  public_key: string,
  realm: DeviceRow['realm'],
  subject: string,
  name: string,
  created_at: number,
  removed_at: number | null,
];
export function deviceRowOf(t: DeviceTuple): DeviceRow {
  return { id: t[0], public_key: t[1], realm: t[2], subject: t[3], name: t[4], created_at: t[5], removed_at: t[6] };
}

export interface BootstrapRow {
  used_at: number | null;
  superseded_at: number | null;
  expires_at: number;
}

export interface ProjectRow {
  project_id: string;
  created_at: number;
}

/**
 * The parameters of a rotation's UPDATE, in its order. The hot statements (a sign-in's, a
 * rotation's) take theirs by position, never as `@name` and an object, which better-sqlite3
 * looks up on the object twice per parameter through V8's slow path; the session INSERT's come
 * from core (`newSessionValues`), in the order of `NEW_SESSION_COLUMNS`.
 */
export type PairUpdate = [
  accessDigest: string,
  accessExpiresAt: number,
  refreshDigest: string,
  refreshExpiresAt: number,
  prevRefreshDigest: string,
  prevRotatedAt: number,
  prevSuccessor: string,
  now: number,
  id: string,
];

/** The parameters of an audit event's INSERT, in `EVENT_COLUMNS`' order (positional, see {@link PairUpdate}). */
export type EventInsert = [
  seq: number,
  id: string,
  at: number,
  type: AuditEvent['type'],
  realm: AuditEvent['realm'],
  subject: AuditEvent['subject'],
  deviceId: AuditEvent['deviceId'],
  sessionId: AuditEvent['sessionId'],
  data: string,
  prevHash: string,
  hash: string,
];

/** The columns {@link refreshRowOf} reads, in order: a session with its refresh state, read by every rotation. */
export const REFRESH_TUPLE =
  'id, realm, subject, device_id, created_at, expires_at, access_expires_at, refresh_expires_at, generation, last_rotated_at, revoked_at, revoked_reason, client_address, user_agent, amr, jkt, parent_id, refresh_digest, prev_refresh_digest, prev_rotated_at, prev_successor';
/** A session's columns as both readers below read them first, in `SESSION_COLUMNS`' order. */
type SessionTuple = [
  id: string,
  realm: RefreshRow['realm'],
  subject: string,
  device_id: string,
  created_at: number,
  expires_at: number,
  access_expires_at: number,
  refresh_expires_at: number,
  generation: number,
  last_rotated_at: number | null,
  revoked_at: number | null,
  revoked_reason: string | null,
  client_address: string | null,
  user_agent: string | null,
  amr: string,
  jkt: string | null,
  parent_id: string | null,
];
export type RefreshTuple = [
  ...session: SessionTuple,
  refresh_digest: string,
  prev_refresh_digest: string | null,
  prev_rotated_at: number | null,
  prev_successor: string | null,
];
export function refreshRowOf(t: RefreshTuple): RefreshRow {
  return {
    id: t[0],
    realm: t[1],
    subject: t[2],
    device_id: t[3],
    created_at: t[4],
    expires_at: t[5],
    access_expires_at: t[6],
    refresh_expires_at: t[7],
    generation: t[8],
    last_rotated_at: t[9],
    revoked_at: t[10],
    revoked_reason: t[11],
    client_address: t[12],
    user_agent: t[13],
    amr: t[14],
    jkt: t[15],
    parent_id: t[16],
    refresh_digest: t[17],
    prev_refresh_digest: t[18],
    prev_rotated_at: t[19],
    prev_successor: t[20],
  };
}

/** The columns {@link accessRowOf} reads, in order: a session with its access digest and its user's attributes, read by every bearer check the cache does not answer. */
export const ACCESS_TUPLE =
  'id, realm, subject, device_id, created_at, expires_at, access_expires_at, refresh_expires_at, generation, last_rotated_at, revoked_at, revoked_reason, client_address, user_agent, amr, jkt, parent_id, access_digest, u_name, u_email, u_email_verified, u_groups';
export type AccessTuple = [
  ...session: SessionTuple,
  access_digest: string,
  u_name: string | null,
  u_email: string | null,
  u_email_verified: number | null,
  u_groups: string | null,
];
export function accessRowOf(t: AccessTuple): AccessRow {
  return {
    id: t[0],
    realm: t[1],
    subject: t[2],
    device_id: t[3],
    created_at: t[4],
    expires_at: t[5],
    access_expires_at: t[6],
    refresh_expires_at: t[7],
    generation: t[8],
    last_rotated_at: t[9],
    revoked_at: t[10],
    revoked_reason: t[11],
    client_address: t[12],
    user_agent: t[13],
    amr: t[14],
    jkt: t[15],
    parent_id: t[16],
    access_digest: t[17],
    u_name: t[18],
    u_email: t[19],
    u_email_verified: t[20],
    u_groups: t[21],
  };
}

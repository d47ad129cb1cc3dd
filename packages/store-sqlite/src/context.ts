import type { AuditEvent, AuditEventDraft, Realm } from '@svc/core';
import type { DeviceRecord, DeviceRow, SessionRecord, TokenPairDigests, UserRecord, UserRow } from '@svc/core/store';
import type Database from 'better-sqlite3';
import type { BearerCache } from './bearer-cache.js';
import type { WriteQueue } from './write-queue.js';

/**
 * What the SQLite store's operation modules share: its one connection, its write path, its
 * bearer-check cache, and the few steps one module's writes take in another's tables (each
 * only inside a write transaction).
 */
export interface SqliteContext {
  readonly db: Database.Database;
  readonly durability: 'normal' | 'full';
  readonly writes: WriteQueue;
  readonly cache: BearerCache;
  /** Seals `draft` after the current head and appends it (see `SqliteAuditTrail.append`). */
  append(draft: AuditEventDraft): AuditEvent;
  /** The active device with this key, if any (see `SqliteDevices.activeDeviceWithKey`). */
  activeDeviceWithKey(publicKey: string): DeviceRow | undefined;
  /** Inserts a device and answers it as stored (see `SqliteDevices.insertDevice`). */
  insertDevice(device: DeviceRecord): DeviceRecord;
  /** Inserts a session with its first pair (see `SqliteSessions.insertSession`). */
  insertSession(session: SessionRecord, pair: TokenPairDigests): void;
  /** The user row of a subject, if any (see `SqliteUsers.userRow`). */
  userRow(subject: string): UserRow | undefined;
  /** The status of a subject's user, if it has one (see `SqliteUsers.userStatus`). */
  userStatus(subject: string): UserRow['status'] | undefined;
  /** Inserts a user unless its subject has one; true when inserted (see `SqliteUsers.insertUser`). */
  insertUser(user: UserRecord): boolean;
  /** Creates the subject's user (active, no attributes) when it has none (see `SqliteUsers.ensureUser`). */
  ensureUser(subject: string, realm: Realm, now: number): void;
  /** Writes a user over its row (see `SqliteUsers.writeUser`). */
  writeUser(user: UserRecord): void;
  /** Records a sign-in as the user's lastSignInAt (see `SqliteUsers.signedIn`). */
  signedIn(subject: string, now: number): void;
}

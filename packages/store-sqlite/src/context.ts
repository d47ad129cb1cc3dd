import type { AuditEvent, AuditEventDraft } from '@svc/core';
import type { DeviceRecord, DeviceRow, SessionRecord, TokenPairDigests } from '@svc/core/store';
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
}

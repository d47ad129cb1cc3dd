// The SQLite store's operations on the project, bootstrap tokens and devices (see `SqliteStore`, whose methods call these).
import type { AuditEventDraft, Realm } from '@svc/core';
import { DEVICE_COLUMNS, liveSessionSql } from '@svc/core/sql-rows';
import {
  type BootstrapOutcome,
  type DeviceRecord,
  type DeviceRow,
  decideBootstrapConsumption,
  decideDeviceRemoval,
  REVOKED_DEVICE_REMOVED,
  toDevice,
} from '@svc/core/store';
import type Database from 'better-sqlite3';
import type { SqliteContext } from './context.js';
import { type BootstrapRow, DEVICE_TUPLE, type DeviceTuple, deviceRowOf, inColumnOrder, type ProjectRow } from './rows.js';

/** The statements of this module, prepared once per connection. */
function prepare(db: Database.Database) {
  // Each statement declares its parameters and row, so reads need no casts.
  const p = <Params extends unknown[] | object = [], Row = unknown>(sql: string) => db.prepare<Params, Row>(sql);
  return {
    getProject: p<[], ProjectRow>('SELECT project_id, created_at FROM project WHERE singleton = 1'),
    insertProject: p<[string, number]>(
      'INSERT INTO project (singleton, project_id, created_at) VALUES (1, ?, ?) ON CONFLICT (singleton) DO NOTHING',
    ),
    supersedeBootstrap: p<[number]>('UPDATE bootstrap_tokens SET superseded_at = ? WHERE used_at IS NULL AND superseded_at IS NULL'),
    insertBootstrap: p<[string, string, number, number]>(
      'INSERT INTO bootstrap_tokens (id, digest, created_at, expires_at) VALUES (?, ?, ?, ?)',
    ),
    bootstrapByDigest: p<[string], BootstrapRow>('SELECT used_at, superseded_at, expires_at FROM bootstrap_tokens WHERE digest = ?'),
    useBootstrap: p<[number, string, string]>(
      'UPDATE bootstrap_tokens SET used_at = ?, device_id = ? WHERE digest = ? AND used_at IS NULL',
    ),
    insertDevice: p<Omit<DeviceRecord, 'removedAt'>>(
      'INSERT INTO devices (id, public_key, realm, subject, name, created_at, removed_at) VALUES (@id, @publicKey, @realm, @subject, @name, @createdAt, NULL)',
    ),
    // Read by every sign-in: an array (see inColumnOrder).
    deviceByKey: inColumnOrder(
      p<[string], DeviceTuple>(`SELECT ${DEVICE_COLUMNS} FROM devices WHERE public_key = ? AND removed_at IS NULL`),
      DEVICE_TUPLE,
    ),
    deviceById: p<[string], DeviceRow>(`SELECT ${DEVICE_COLUMNS} FROM devices WHERE id = ?`),
    listDevices: p<{ realm: Realm | null; subject: string | null }, DeviceRow>(
      `SELECT ${DEVICE_COLUMNS} FROM devices
       WHERE removed_at IS NULL AND (@realm IS NULL OR realm = @realm) AND (@subject IS NULL OR subject = @subject)
       ORDER BY created_at, id`,
    ),
    countDevices: p<[Realm], { n: number }>('SELECT COUNT(*) AS n FROM devices WHERE realm = ? AND removed_at IS NULL'),
    removeDevice: p<[number, string]>('UPDATE devices SET removed_at = ? WHERE id = ? AND removed_at IS NULL'),
    revokeDeviceSessions: p<{ now: number; deviceId: string; reason: string }>(
      `UPDATE sessions SET revoked_at = @now, revoked_reason = @reason, prev_successor = NULL WHERE device_id = @deviceId AND ${liveSessionSql('@now')}`,
    ),
  };
}

/** The SQLite store's operations on the project, bootstrap tokens and devices, on the store's connection. */
export class SqliteDevices {
  readonly #ctx: SqliteContext;
  readonly #s: ReturnType<typeof prepare>;

  constructor(ctx: SqliteContext) {
    this.#ctx = ctx;
    this.#s = prepare(ctx.db);
  }

  activeDeviceWithKey(publicKey: string): DeviceRow | undefined {
    const row = this.#s.deviceByKey.get(publicKey);
    return row === undefined ? undefined : deviceRowOf(row);
  }

  insertDevice(device: DeviceRecord): DeviceRecord {
    this.#s.insertDevice.run({
      id: device.id,
      publicKey: device.publicKey,
      realm: device.realm,
      subject: device.subject,
      name: device.name,
      createdAt: device.createdAt,
    });
    this.#ctx.ensureUser(device.subject, device.realm, device.createdAt);
    const row = this.#s.deviceById.get(device.id);
    if (row === undefined) throw new Error(`device ${device.id} vanished inside the transaction that inserted it`);
    return toDevice(row);
  }

  async getProject(): Promise<{ readonly projectId: string; readonly createdAt: number } | null> {
    const row = this.#s.getProject.get();
    return row === undefined ? null : { projectId: row.project_id, createdAt: row.created_at };
  }

  async initProject(input: { readonly projectId: string; readonly createdAt: number }): Promise<{ readonly projectId: string }> {
    return this.#ctx.writes.run(() => {
      this.#s.insertProject.run(input.projectId, input.createdAt);
      const row = this.#s.getProject.get();
      if (row === undefined) throw new Error('the project row vanished after it was written');
      return { projectId: row.project_id };
    }, true);
  }

  async issueBootstrapToken(
    input: { readonly id: string; readonly digest: string; readonly createdAt: number; readonly expiresAt: number },
    event: AuditEventDraft,
  ): Promise<void> {
    await this.#ctx.writes.run(() => {
      this.#s.supersedeBootstrap.run(input.createdAt);
      this.#s.insertBootstrap.run(input.id, input.digest, input.createdAt, input.expiresAt);
      this.#ctx.append(event);
    }, true);
  }

  async consumeBootstrapToken(
    input: { readonly digest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<BootstrapOutcome> {
    return this.#ctx.writes.run((): BootstrapOutcome => {
      const token = this.#s.bootstrapByDigest.get(input.digest);
      const decision = decideBootstrapConsumption(
        token && { usedAt: token.used_at, supersededAt: token.superseded_at, expiresAt: token.expires_at },
        { now: input.now, keyTaken: this.#ctx.activeDeviceWithKey(input.device.publicKey) !== undefined },
      );
      if (decision.kind !== 'consume') return decision;
      const device = this.#ctx.insertDevice(input.device);
      this.#s.useBootstrap.run(input.now, device.id, input.digest);
      this.#ctx.append(event);
      return { kind: 'enrolled', device };
    }, true);
  }

  async enrollDevice(device: DeviceRecord, event: AuditEventDraft): Promise<'enrolled' | 'already_enrolled'> {
    return this.#ctx.writes.run(() => {
      if (this.#ctx.activeDeviceWithKey(device.publicKey) !== undefined) return 'already_enrolled';
      this.#ctx.insertDevice(device);
      this.#ctx.append(event);
      return 'enrolled';
    }, true);
  }

  async findDeviceByPublicKey(publicKey: string): Promise<DeviceRecord | null> {
    const row = this.#ctx.activeDeviceWithKey(publicKey);
    return row === undefined ? null : toDevice(row);
  }

  async getDevice(id: string): Promise<DeviceRecord | null> {
    const row = this.#s.deviceById.get(id);
    return row === undefined ? null : toDevice(row);
  }

  async listDevices(filter: { readonly realm?: Realm; readonly subject?: string }): Promise<readonly DeviceRecord[]> {
    return this.#s.listDevices.all({ realm: filter.realm ?? null, subject: filter.subject ?? null }).map(toDevice);
  }

  async countDevices(realm: Realm): Promise<number> {
    return this.#s.countDevices.get(realm)?.n ?? 0;
  }

  async removeDevice(
    input: { readonly deviceId: string; readonly now: number; readonly keepLast?: boolean },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly last?: true }> {
    return this.#ctx.writes.run(() => {
      // Inside the write transaction (BEGIN IMMEDIATE: one writer at a time), so the count
      // cannot change between this check and the removal.
      const row = this.#s.deviceById.get(input.deviceId);
      const active = row !== undefined && row.removed_at === null;
      const keepLast = input.keepLast === true;
      const decision = decideDeviceRemoval({
        active,
        activeInRealm: active && keepLast ? (this.#s.countDevices.get(row.realm)?.n ?? 0) : 0,
        keepLast,
      });
      if (decision === 'last') return { removed: false, revokedSessions: 0, last: true as const };
      if (decision === 'not_found' || this.#s.removeDevice.run(input.now, input.deviceId).changes === 0) {
        return { removed: false, revokedSessions: 0 };
      }
      this.#ctx.cache.clear();
      const revoked = this.#s.revokeDeviceSessions.run({
        deviceId: input.deviceId,
        now: input.now,
        reason: REVOKED_DEVICE_REMOVED,
      }).changes;
      this.#ctx.append(event);
      return { removed: true, revokedSessions: revoked };
    }, true);
  }
}

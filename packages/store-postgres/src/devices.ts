// The PostgreSQL store's operations on the project, bootstrap tokens and devices (see `PostgresStore`, whose methods call these).
import type { AuditEventDraft, Realm } from '@svc/core';
import { DEVICE_COLUMNS, liveSessionSql, usableBootstrapSql } from '@svc/core/sql-rows';
import {
  type BootstrapOutcome,
  type DeviceRecord,
  type DeviceRow,
  decideBootstrapConsumption,
  decideDeviceRemoval,
  REVOKED_DEVICE_REMOVED,
  toDevice,
} from '@svc/core/store';
import type { PoolClient } from 'pg';
import { INSERT_DEVICE, type PgContext } from './context.js';
import { changes, first, rollback, rows, runReplicated } from './sql.js';
import { ensureDefaultUser } from './users.js';

/** Inserts `device` unless an active device has its key (the partial unique index decides, also between nodes). */
export async function insertDevice(_ctx: PgContext, c: PoolClient, device: DeviceRecord): Promise<DeviceRecord | null> {
  const row = await first<DeviceRow>(c, INSERT_DEVICE, [
    device.id,
    device.publicKey,
    device.realm,
    device.subject,
    device.name,
    device.createdAt,
  ]);
  return row === undefined ? null : toDevice(row);
}

export async function getProject(ctx: PgContext): Promise<{ readonly projectId: string; readonly createdAt: number } | null> {
  const row = await first<{ project_id: string; created_at: number }>(ctx.pool, 'SELECT project_id, created_at FROM project');
  return row === undefined ? null : { projectId: row.project_id, createdAt: row.created_at };
}

export async function initProject(
  ctx: PgContext,
  input: { readonly projectId: string; readonly createdAt: number },
): Promise<{ readonly projectId: string }> {
  // A concurrent insert from another node makes this one wait, then do nothing; the read
  // after it sees whichever id was committed first.
  await runReplicated(ctx.pool, 'INSERT INTO project (singleton, project_id, created_at) VALUES (TRUE, $1, $2) ON CONFLICT DO NOTHING', [
    input.projectId,
    input.createdAt,
  ]);
  const row = await first<{ project_id: string }>(ctx.pool, 'SELECT project_id FROM project');
  if (row === undefined) throw new Error('the project row vanished after it was written');
  return { projectId: row.project_id };
}

export async function issueBootstrapToken(
  ctx: PgContext,
  input: { readonly id: string; readonly digest: string; readonly createdAt: number; readonly expiresAt: number },
  event: AuditEventDraft,
): Promise<void> {
  await ctx.tx(async (c) => {
    // Two nodes issuing at once would each supersede only the tokens they can see and leave
    // two live ones. This self-conflicting table lock makes issuers take turns; consumers
    // (ROW EXCLUSIVE) wait for it too. Taken first, before any row lock, so it cannot deadlock.
    await c.query('LOCK TABLE bootstrap_tokens IN SHARE ROW EXCLUSIVE MODE');
    await c.query('UPDATE bootstrap_tokens SET superseded_at = $1 WHERE used_at IS NULL AND superseded_at IS NULL', [input.createdAt]);
    await c.query('INSERT INTO bootstrap_tokens (id, digest, created_at, expires_at) VALUES ($1, $2, $3, $4)', [
      input.id,
      input.digest,
      input.createdAt,
      input.expiresAt,
    ]);
    await ctx.append(c, event);
  });
}

export async function consumeBootstrapToken(
  ctx: PgContext,
  input: { readonly digest: string; readonly now: number; readonly device: DeviceRecord },
  event: AuditEventDraft,
): Promise<BootstrapOutcome> {
  return ctx.tx(async (c): Promise<BootstrapOutcome> => {
    // The one conditional update that decides the winner. device_id's foreign key is
    // deferred to COMMIT, so the claim can name the device inserted just below.
    const claimed = await changes(
      c,
      `UPDATE bootstrap_tokens SET used_at = $2, device_id = $3 WHERE digest = $1 AND ${usableBootstrapSql('$2')}`,
      [input.digest, input.now, input.device.id],
    );
    if (claimed === 0) {
      // Not live: say why, in the contract's order. States only move away from live, so
      // this later read cannot find a live token the update missed.
      const token = await first<{ used_at: number | null; superseded_at: number | null; expires_at: number }>(
        c,
        'SELECT used_at, superseded_at, expires_at FROM bootstrap_tokens WHERE digest = $1',
        [input.digest],
      );
      const decision = decideBootstrapConsumption(
        token && { usedAt: token.used_at, supersededAt: token.superseded_at, expiresAt: token.expires_at },
        // The key is checked by the insert below, after the claim: the same order as core's rule.
        { now: input.now, keyTaken: false },
      );
      return decision.kind === 'consume' ? { kind: 'unknown' } : decision;
    }
    const device = await insertDevice(ctx, c, input.device);
    // The key is taken: undo the claim, the token stays usable for another key.
    if (device === null) return rollback({ kind: 'already_enrolled' });
    await ensureDefaultUser(c, { subject: device.subject, realm: device.realm, now: device.createdAt });
    await ctx.append(c, event);
    return { kind: 'enrolled', device };
  });
}

export async function enrollDevice(ctx: PgContext, device: DeviceRecord, event: AuditEventDraft): Promise<'enrolled' | 'already_enrolled'> {
  return ctx.tx(async (c) => {
    const enrolled = await insertDevice(ctx, c, device);
    if (enrolled === null) return 'already_enrolled';
    await ensureDefaultUser(c, { subject: enrolled.subject, realm: enrolled.realm, now: enrolled.createdAt });
    await ctx.append(c, event);
    return 'enrolled';
  });
}

export async function findDeviceByPublicKey(ctx: PgContext, publicKey: string): Promise<DeviceRecord | null> {
  const row = await first<DeviceRow>(
    ctx.pool,
    { name: 'svc_device_by_key', text: `SELECT ${DEVICE_COLUMNS} FROM devices WHERE public_key = $1 AND removed_at IS NULL` },
    [publicKey],
  );
  return row === undefined ? null : toDevice(row);
}

export async function getDevice(ctx: PgContext, id: string): Promise<DeviceRecord | null> {
  const row = await first<DeviceRow>(ctx.pool, `SELECT ${DEVICE_COLUMNS} FROM devices WHERE id = $1`, [id]);
  return row === undefined ? null : toDevice(row);
}

export async function listDevices(
  ctx: PgContext,
  filter: { readonly realm?: Realm; readonly subject?: string },
): Promise<readonly DeviceRecord[]> {
  const list = await rows<DeviceRow>(
    ctx.pool,
    `SELECT ${DEVICE_COLUMNS} FROM devices
     WHERE removed_at IS NULL AND ($1::text IS NULL OR realm = $1) AND ($2::text IS NULL OR subject = $2)
     ORDER BY created_at, id`,
    [filter.realm ?? null, filter.subject ?? null],
  );
  return list.map(toDevice);
}

export async function countDevices(ctx: PgContext, realm: Realm): Promise<number> {
  const row = await first<{ n: number }>(ctx.pool, 'SELECT COUNT(*) AS n FROM devices WHERE realm = $1 AND removed_at IS NULL', [realm]);
  return row?.n ?? 0;
}

export async function removeDevice(
  ctx: PgContext,
  input: { readonly deviceId: string; readonly now: number; readonly keepLast?: boolean },
  event: AuditEventDraft,
): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly last?: true }> {
  return ctx.tx(async (c) => {
    if (input.keepLast === true) {
      // Lock every active device of the realm (in id order, so two removals never deadlock):
      // a concurrent removal waits here, then re-reads the rows the winner changed and no
      // longer counts the device it removed. READ COMMITTED alone would let both count two.
      const realm = await first<{ realm: string }>(c, 'SELECT realm FROM devices WHERE id = $1 AND removed_at IS NULL', [input.deviceId]);
      if (realm !== undefined) {
        const active = await rows<{ id: string }>(
          c,
          'SELECT id FROM devices WHERE realm = $1 AND removed_at IS NULL ORDER BY id FOR UPDATE',
          [realm.realm],
        );
        const decision = decideDeviceRemoval({
          active: active.some((d) => d.id === input.deviceId),
          activeInRealm: active.length,
          keepLast: true,
        });
        if (decision === 'last') return { removed: false, revokedSessions: 0, last: true as const };
        if (decision === 'not_found') return { removed: false, revokedSessions: 0 };
      }
    }
    const removed = await changes(c, 'UPDATE devices SET removed_at = $2 WHERE id = $1 AND removed_at IS NULL', [
      input.deviceId,
      input.now,
    ]);
    if (removed === 0) return { removed: false, revokedSessions: 0 };
    const revokedSessions = await changes(
      c,
      `UPDATE sessions SET revoked_at = $2, revoked_reason = $3, prev_successor = NULL WHERE device_id = $1 AND ${liveSessionSql('$2')}`,
      [input.deviceId, input.now, REVOKED_DEVICE_REMOVED],
    );
    await ctx.append(c, event);
    return { removed: true, revokedSessions };
  });
}

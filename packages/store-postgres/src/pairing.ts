// The PostgreSQL store's operations on pairing intents (see `PostgresStore`, whose methods call these).
import type { AuditEventDraft } from '@svc/core';
import { INTENT_COLUMNS, liveIntentSql, pairingFailureSql } from '@svc/core/sql-rows';
import {
  type DeviceRecord,
  decideIntentUsers,
  type IntentRow,
  type PairingCompletion,
  type PairingIntentRecord,
  toIntent,
} from '@svc/core/store';
import type { PgContext } from './context.js';
import { insertDevice } from './devices.js';
import { first, rollback } from './sql.js';
import { ensureDefaultUser, lockedIntentUsers } from './users.js';

export async function createPairingIntent(ctx: PgContext, intent: PairingIntentRecord, event: AuditEventDraft): Promise<void> {
  await ctx.tx(async (c) => {
    await c.query(`INSERT INTO pairing_intents (${INTENT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`, [
      intent.id,
      intent.realm,
      intent.subject,
      intent.name,
      intent.codeDigest,
      intent.createdAt,
      intent.expiresAt,
      intent.createdBy,
      intent.failures,
      intent.completedAt,
      intent.burnedAt,
      intent.deviceId,
      intent.preparedByNode,
    ]);
    // A new subject's user comes with its intent: completion requires one.
    await ensureDefaultUser(c, { subject: intent.subject, realm: intent.realm, now: intent.createdAt });
    await ctx.append(c, event);
  });
}

export async function getPairingIntent(ctx: PgContext, id: string): Promise<PairingIntentRecord | null> {
  const row = await first<IntentRow>(ctx.pool, `SELECT ${INTENT_COLUMNS} FROM pairing_intents WHERE id = $1`, [id]);
  return row === undefined ? null : toIntent(row);
}

export async function recordPairingFailure(
  ctx: PgContext,
  input: { readonly id: string; readonly now: number; readonly maxFailures: number },
  event: (failures: number, burned: boolean) => AuditEventDraft,
): Promise<{ readonly failures: number; readonly burned: boolean } | null> {
  return ctx.tx(async (c) => {
    // failures + 1 is computed on the row as committed, so concurrent wrong codes on several
    // nodes each count once and exactly one of them burns the intent.
    const row = await first<{ failures: number; burned_at: number | null }>(
      c,
      `UPDATE pairing_intents ${pairingFailureSql({ id: '$1', now: '$2', maxFailures: '$3' })} RETURNING failures, burned_at`,
      [input.id, input.now, input.maxFailures],
    );
    if (row === undefined) return null;
    const result = { failures: row.failures, burned: row.burned_at !== null };
    await ctx.append(c, event(result.failures, result.burned));
    return result;
  });
}

export async function completePairing(
  ctx: PgContext,
  input: { readonly id: string; readonly codeDigest: string; readonly now: number; readonly device: DeviceRecord },
  event: AuditEventDraft,
): Promise<PairingCompletion> {
  return ctx.tx(async (c): Promise<PairingCompletion> => {
    // The one conditional update that decides the winner (device_id's foreign key is checked at COMMIT).
    const claimed = await first<{ created_by: string }>(
      c,
      `UPDATE pairing_intents SET completed_at = $3, device_id = $4 WHERE id = $1 AND code_digest = $2 AND ${liveIntentSql('$3')}
       RETURNING created_by`,
      [input.id, input.codeDigest, input.now, input.device.id],
    );
    if (claimed === undefined) return { kind: 'invalid' };
    const device = await insertDevice(ctx, c, input.device);
    // The intent stays live when the key is taken, like a bootstrap token: the admin's code is not wasted.
    if (device === null) return rollback({ kind: 'already_enrolled' });
    // A removed (no user) or disabled subject or creator gets no device: nothing written, and
    // never a user recreated (a removal that committed meanwhile is seen here as no row).
    const locked = await lockedIntentUsers(c, device.subject, claimed.created_by);
    const users = decideIntentUsers(locked.subject, locked.creator);
    if (users !== 'complete') return rollback({ kind: users });
    await ctx.append(c, event);
    return { kind: 'completed', device };
  });
}

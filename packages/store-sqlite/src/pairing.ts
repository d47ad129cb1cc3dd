// The SQLite store's operations on pairing intents (see `SqliteStore`, whose methods call these).
import type { AuditEventDraft } from '@svc/core';
import { INTENT_COLUMNS, pairingFailureSql } from '@svc/core/sql-rows';
import {
  type DeviceRecord,
  decideIntentUsers,
  decidePairingCompletion,
  type IntentRow,
  type PairingCompletion,
  type PairingIntentRecord,
  toIntent,
} from '@svc/core/store';
import type Database from 'better-sqlite3';
import type { SqliteContext } from './context.js';

/** The statements of this module, prepared once per connection. */
function prepare(db: Database.Database) {
  // Each statement declares its parameters and row, so reads need no casts.
  const p = <Params extends unknown[] | object = [], Row = unknown>(sql: string) => db.prepare<Params, Row>(sql);
  return {
    insertIntent: p<PairingIntentRecord>(
      `INSERT INTO pairing_intents (${INTENT_COLUMNS})
       VALUES (@id, @realm, @subject, @name, @codeDigest, @createdAt, @expiresAt, @createdBy, @failures, @completedAt, @burnedAt, @deviceId, @preparedByNode)`,
    ),
    intentById: p<[string], IntentRow>(`SELECT ${INTENT_COLUMNS} FROM pairing_intents WHERE id = ?`),
    failIntent: p<{ id: string; now: number; maxFailures: number }, { failures: number; burned_at: number | null }>(
      `UPDATE pairing_intents ${pairingFailureSql({ id: '@id', now: '@now', maxFailures: '@maxFailures' })} RETURNING failures, burned_at`,
    ),
    completeIntent: p<{ id: string; now: number; deviceId: string }>(
      'UPDATE pairing_intents SET completed_at = @now, device_id = @deviceId WHERE id = @id',
    ),
  };
}

/** The SQLite store's operations on pairing intents, on the store's connection. */
export class SqlitePairing {
  readonly #ctx: SqliteContext;
  readonly #s: ReturnType<typeof prepare>;

  constructor(ctx: SqliteContext) {
    this.#ctx = ctx;
    this.#s = prepare(ctx.db);
  }

  async createPairingIntent(intent: PairingIntentRecord, event: AuditEventDraft): Promise<void> {
    await this.#ctx.writes.run(() => {
      this.#s.insertIntent.run({
        id: intent.id,
        realm: intent.realm,
        subject: intent.subject,
        name: intent.name,
        codeDigest: intent.codeDigest,
        createdAt: intent.createdAt,
        expiresAt: intent.expiresAt,
        createdBy: intent.createdBy,
        failures: intent.failures,
        completedAt: intent.completedAt,
        burnedAt: intent.burnedAt,
        deviceId: intent.deviceId,
        preparedByNode: intent.preparedByNode,
      });
      // A new subject's user comes with its intent: completion requires one.
      this.#ctx.ensureUser(intent.subject, intent.realm, intent.createdAt);
      this.#ctx.append(event);
    }, true);
  }

  async getPairingIntent(id: string): Promise<PairingIntentRecord | null> {
    const row = this.#s.intentById.get(id);
    return row === undefined ? null : toIntent(row);
  }

  async recordPairingFailure(
    input: { readonly id: string; readonly now: number; readonly maxFailures: number },
    event: (failures: number, burned: boolean) => AuditEventDraft,
  ): Promise<{ readonly failures: number; readonly burned: boolean } | null> {
    return this.#ctx.writes.run(() => {
      const row = this.#s.failIntent.get({ id: input.id, now: input.now, maxFailures: input.maxFailures }) as
        | { failures: number; burned_at: number | null }
        | undefined;
      if (row === undefined) return null;
      const result = { failures: row.failures, burned: row.burned_at !== null };
      this.#ctx.append(event(result.failures, result.burned));
      return result;
    }, true);
  }

  async completePairing(
    input: { readonly id: string; readonly codeDigest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<PairingCompletion> {
    return this.#ctx.writes.run((): PairingCompletion => {
      const intent = this.#s.intentById.get(input.id);
      const decision = decidePairingCompletion(intent && toIntent(intent), {
        codeDigest: input.codeDigest,
        now: input.now,
        keyTaken: this.#ctx.activeDeviceWithKey(input.device.publicKey) !== undefined,
      });
      if (decision.kind !== 'complete') return decision;
      // A removed (no user) or disabled subject or creator: nothing written, never a user recreated.
      const users = decideIntentUsers(
        this.#ctx.userRow(input.device.subject)?.status ?? null,
        this.#ctx.userRow((intent as IntentRow).created_by)?.status ?? null,
      );
      if (users !== 'complete') return { kind: users };
      const device = this.#ctx.insertDevice(input.device);
      this.#s.completeIntent.run({ id: input.id, now: input.now, deviceId: device.id });
      this.#ctx.append(event);
      return { kind: 'completed', device };
    }, true);
  }
}

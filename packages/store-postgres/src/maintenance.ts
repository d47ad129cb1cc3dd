// The PostgreSQL store's operations on retention and the diagnostics counters (see `PostgresStore`, whose methods call these).
import { statsSql } from '@svc/core/sql-rows';
import { type RealmCountRow, type StoreStats, toStoreStats } from '@svc/core/store';
import { type PgContext, PRUNE_BATCH } from './context.js';
import { postgresFault } from './faults.js';
import { changes, first, rows } from './sql.js';

export async function pruneEndedRecords(
  ctx: PgContext,
  input: {
    readonly endedBefore: number;
  },
): Promise<{ readonly sessions: number; readonly pairingIntents: number }> {
  const total = { sessions: 0, pairingIntents: 0 };
  // In batches, each its own short transaction: a first run over a large backlog stays far
  // inside the statement timeout and never holds many row locks for long.
  for (;;) {
    const batch = await ctx.tx(async (c) => {
      // One statement: the retired digests and their sessions go together (the foreign key
      // is checked at the end of the statement).
      const sessions = await changes(
        c,
        `WITH ended AS (
           SELECT id FROM sessions WHERE expires_at <= $1 UNION SELECT id FROM sessions WHERE revoked_at <= $1 LIMIT $2
         ), retired AS (
           DELETE FROM retired_refresh_tokens WHERE session_id IN (SELECT id FROM ended)
         )
         DELETE FROM sessions WHERE id IN (SELECT id FROM ended)`,
        [input.endedBefore, PRUNE_BATCH],
      );
      const pairingIntents = await changes(
        c,
        'DELETE FROM pairing_intents WHERE id IN (SELECT id FROM pairing_intents WHERE expires_at <= $1 LIMIT $2)',
        [input.endedBefore, PRUNE_BATCH],
      );
      return { sessions, pairingIntents };
    });
    total.sessions += batch.sessions;
    total.pairingIntents += batch.pairingIntents;
    if (batch.sessions < PRUNE_BATCH && batch.pairingIntents < PRUNE_BATCH) return total;
  }
}

export async function stats(ctx: PgContext, now: number): Promise<StoreStats> {
  await ctx.sealPending();
  const client = await ctx.pool.connect();
  // As in #tx: a checked-out client needs its own 'error' listener.
  let broken: Error | undefined;
  const onError = (err: Error) => {
    broken ??= err;
  };
  client.on('error', onError);
  try {
    // One snapshot, so the counters describe a single moment.
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const sql = statsSql('$1');
    const devices = await rows<RealmCountRow>(client, sql.devices);
    const activeSessions = await rows<RealmCountRow>(client, sql.sessions, [now]);
    const events = await rows<{ type: string; n: number }>(client, sql.events);
    const head = await first<{ seq: number; hash: string }>(client, 'SELECT seq, hash FROM audit_head');
    await client.query('COMMIT');
    // The head row of an empty trail holds seq 0.
    return toStoreStats({ devices, activeSessions, events, head: head === undefined || head.seq === 0 ? undefined : head });
  } catch (err) {
    if (broken === undefined && postgresFault(err) === null) {
      await client.query('ROLLBACK').catch((rollbackError: Error) => {
        broken = rollbackError;
      });
    } else {
      broken ??= err as Error;
    }
    throw err;
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}

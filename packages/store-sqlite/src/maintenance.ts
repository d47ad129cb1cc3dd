import type Database from 'better-sqlite3';
import type { SqliteContext } from './context.js';

/** Rows of each kind one retention batch deletes. */
const PRUNE_BATCH = 1000;

/** The statements of this module, prepared once per connection. */
function prepare(db: Database.Database) {
  // Each statement declares its parameters and row, so reads need no casts.
  const p = <Params extends unknown[] | object = [], Row = unknown>(sql: string) => db.prepare<Params, Row>(sql);
  return {
    endedSessionIds: p<{ before: number; limit: number }, string>(
      'SELECT id FROM sessions WHERE expires_at <= @before UNION SELECT id FROM sessions WHERE revoked_at <= @before LIMIT @limit',
    ).pluck(true),
    deleteRetiredOf: p<[string]>('DELETE FROM retired_refresh_tokens WHERE session_id = ?'),
    deleteSession: p<[string]>('DELETE FROM sessions WHERE id = ?'),
    pruneEndedIntents: p<{ before: number; limit: number }>(
      'DELETE FROM pairing_intents WHERE id IN (SELECT id FROM pairing_intents WHERE expires_at <= @before LIMIT @limit)',
    ),
  };
}

/** The SQLite store's operations on retention, on the store's connection. */
export class SqliteMaintenance {
  readonly #ctx: SqliteContext;
  readonly #s: ReturnType<typeof prepare>;

  constructor(ctx: SqliteContext) {
    this.#ctx = ctx;
    this.#s = prepare(ctx.db);
  }

  async pruneEndedRecords(input: {
    readonly endedBefore: number;
  }): Promise<{ readonly sessions: number; readonly pairingIntents: number }> {
    const before = input.endedBefore;
    const total = { sessions: 0, pairingIntents: 0 };
    // In batches, each its own write: a first run over a large backlog never holds the write
    // lock (nor, SQLite being synchronous, the event loop) for long.
    for (;;) {
      const batch = await this.#ctx.writes.run(() => {
        const ids = this.#s.endedSessionIds.all({ before, limit: PRUNE_BATCH });
        for (const id of ids) {
          this.#s.deleteRetiredOf.run(id);
          this.#s.deleteSession.run(id);
          this.#ctx.cache.drop(id);
        }
        return { sessions: ids.length, pairingIntents: this.#s.pruneEndedIntents.run({ before, limit: PRUNE_BATCH }).changes };
      });
      total.sessions += batch.sessions;
      total.pairingIntents += batch.pairingIntents;
      if (batch.sessions < PRUNE_BATCH && batch.pairingIntents < PRUNE_BATCH) return total;
    }
  }
}

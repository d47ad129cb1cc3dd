// The SQLite store's operations on the cluster's assertion key set (see `SqliteStore`, whose methods call these).
import type { AuditEventDraft } from '@svc/core';
import type { AssertionKeysRecord, AssertionKeysSave } from '@svc/core/store';
import type Database from 'better-sqlite3';
import type { SqliteContext } from './context.js';

interface AssertionKeysRow {
  readonly version: number;
  readonly key_set: string;
  readonly updated_at: number;
}

const toRecord = (row: AssertionKeysRow | undefined): AssertionKeysRecord | null =>
  row === undefined ? null : { version: row.version, keySet: row.key_set, updatedAt: row.updated_at };

/** The statements of this module, prepared once per connection. */
function prepare(db: Database.Database) {
  const p = <Params extends unknown[] | object = [], Row = unknown>(sql: string) => db.prepare<Params, Row>(sql);
  return {
    get: p<[], AssertionKeysRow>('SELECT version, key_set, updated_at FROM assertion_keys WHERE singleton = 1'),
    insert: p<[string, number]>(
      'INSERT INTO assertion_keys (singleton, version, key_set, updated_at) VALUES (1, 1, ?, ?) ON CONFLICT (singleton) DO NOTHING',
    ),
    update: p<[string, number, number]>(
      'UPDATE assertion_keys SET version = version + 1, key_set = ?, updated_at = ? WHERE singleton = 1 AND version = ?',
    ),
  };
}

/** The SQLite store's operations on the assertion key set, on the store's connection. */
export class SqliteAssertionKeys {
  readonly #ctx: SqliteContext;
  readonly #s: ReturnType<typeof prepare>;

  constructor(ctx: SqliteContext) {
    this.#ctx = ctx;
    this.#s = prepare(ctx.db);
  }

  async getAssertionKeys(): Promise<AssertionKeysRecord | null> {
    return toRecord(this.#s.get.get());
  }

  async saveAssertionKeys(
    input: { readonly expectedVersion: number; readonly keySet: string; readonly now: number },
    events: readonly AuditEventDraft[],
  ): Promise<AssertionKeysSave> {
    return this.#ctx.writes.run((): AssertionKeysSave => {
      // Inside BEGIN IMMEDIATE: no other process writes between the conditional write and the read.
      const changed =
        input.expectedVersion === 0
          ? this.#s.insert.run(input.keySet, input.now).changes
          : this.#s.update.run(input.keySet, input.now, input.expectedVersion).changes;
      const stored = toRecord(this.#s.get.get());
      if (changed === 0 || stored === null) return { saved: false, current: stored };
      for (const event of events) this.#ctx.append(event);
      return { saved: true, record: stored };
    }, true);
  }
}

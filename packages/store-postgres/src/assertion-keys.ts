// The PostgreSQL store's operations on the cluster's assertion key set (see `PostgresStore`).
import type { AuditEventDraft } from '@svc/core';
import type { AssertionKeysRecord, AssertionKeysSave } from '@svc/core/store';
import type { PgContext } from './context.js';
import { changes, first, type Queryable } from './sql.js';

interface AssertionKeysRow {
  readonly version: string | number;
  readonly key_set: string;
  readonly updated_at: string | number;
}

const GET = { name: 'svc_assertion_keys_get', text: 'SELECT version, key_set, updated_at FROM assertion_keys WHERE singleton = 1' };

async function read(db: Queryable): Promise<AssertionKeysRecord | null> {
  const row = await first<AssertionKeysRow>(db, GET);
  return row === undefined ? null : { version: Number(row.version), keySet: row.key_set, updatedAt: Number(row.updated_at) };
}

export function getAssertionKeys(ctx: PgContext): Promise<AssertionKeysRecord | null> {
  return read(ctx.pool);
}

export async function saveAssertionKeys(
  ctx: PgContext,
  input: { readonly expectedVersion: number; readonly keySet: string; readonly now: number },
  events: readonly AuditEventDraft[],
): Promise<AssertionKeysSave> {
  return ctx.tx(async (c): Promise<AssertionKeysSave> => {
    // Compare-and-set under READ COMMITTED: a concurrent UPDATE from the same version waits for
    // the first to commit, then finds the version moved on and changes nothing; a concurrent
    // first INSERT meets the primary key and does nothing.
    const changed =
      input.expectedVersion === 0
        ? await changes(
            c,
            'INSERT INTO assertion_keys (singleton, version, key_set, updated_at) VALUES (1, 1, $1, $2) ON CONFLICT (singleton) DO NOTHING',
            [input.keySet, input.now],
          )
        : await changes(
            c,
            'UPDATE assertion_keys SET version = version + 1, key_set = $1, updated_at = $2 WHERE singleton = 1 AND version = $3',
            [input.keySet, input.now, input.expectedVersion],
          );
    const stored = await read(c);
    if (changed === 0 || stored === null) return { saved: false, current: stored };
    for (const event of events) await ctx.append(c, event);
    return { saved: true, record: stored };
  });
}

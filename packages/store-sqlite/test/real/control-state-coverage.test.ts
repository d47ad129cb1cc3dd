import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { uncoveredSchema } from '@svc/core/store';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/index.js';
import { ownerOnlyTempDir } from '../temp-dir.js';

// A migration that adds a table or a column must add it to core's CONTROL_STATE_TABLES (or say in
// NOT_COPIED why it is not state): otherwise moving a project between stores would drop it.
test('every table and column of the migrated SQLite schema is in the control-state list (a move drops nothing)', async () => {
  const tmp = await ownerOnlyTempDir();
  try {
    const file = join(tmp.dir, 'control.db');
    await (await openSqliteStore({ file })).close();
    const db = new Database(file, { readonly: true });
    try {
      const tables = db
        // A view the export reads and the import writes (dpop_proofs, over the replay log) counts as a table.
        .prepare<[], { name: string }>("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'")
        .all();
      const schema = new Map(
        tables.map(({ name }) => [
          name,
          db
            .prepare<[], { name: string }>(`PRAGMA table_info(${name})`)
            .all()
            .map((c) => c.name),
        ]),
      );
      assert.ok(schema.size >= 15, `read ${schema.size} tables`);
      assert.deepEqual(uncoveredSchema(schema), []);
    } finally {
      db.close();
    }
  } finally {
    await tmp.remove();
  }
});

test('the coverage check finds a column the list does not name', () => {
  const problems = uncoveredSchema(
    new Map([['devices', ['id', 'public_key', 'realm', 'subject', 'name', 'created_at', 'removed_at', 'colour']]]),
  );
  assert.ok(problems.some((p) => p.startsWith('devices.colour ')));
  assert.ok(uncoveredSchema(new Map([['webhooks', ['id']]])).some((p) => p.startsWith('table webhooks ')));
});

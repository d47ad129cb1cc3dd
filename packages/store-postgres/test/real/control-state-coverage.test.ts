import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { uncoveredSchema } from '@svc/core/store';
import { createTestEnv } from '../pg-test-env.js';

const env = createTestEnv();
after(() => env.dispose());

// A migration that adds a table or a column must add it to core's CONTROL_STATE_TABLES (or say in
// NOT_COPIED why it is not state): otherwise moving a project between stores would drop it.
test('every table and column of the migrated PostgreSQL schema is in the control-state list (a move drops nothing)', async () => {
  const schema = env.schema();
  await (await env.open(schema)).close();
  const { rows } = await env.admin.query<{ table_name: string; column_name: string }>(
    `SELECT c.table_name, c.column_name FROM information_schema.columns c
       JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
      WHERE c.table_schema = $1 AND t.table_type = 'BASE TABLE'`,
    [schema],
  );
  const columns = new Map<string, string[]>();
  for (const r of rows) columns.set(r.table_name, [...(columns.get(r.table_name) ?? []), r.column_name]);
  assert.ok(columns.size >= 15, `read ${columns.size} tables`);
  assert.deepEqual(uncoveredSchema(columns), []);
});

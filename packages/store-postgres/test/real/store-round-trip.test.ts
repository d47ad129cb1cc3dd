import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { verifyAuditChain } from '@svc/core';
import type { Store } from '@svc/core/store';
import { collectState, createFakeClock, createMemoryStore, makeDeps, populateControlState, rowsOf } from '@svc/store-testkit';
import pg from 'pg';
import { openSqliteStore } from 'svc-store-sqlite';
import { openPostgresStore } from '../../src/index.js';

const PG_URL = process.env.SVC_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const dir = mkdtempSync(join(tmpdir(), 'svc-round-trip-'));
const schema = `svc_rt_${process.pid}_${Date.now().toString(36)}`;
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await admin.end();
  }
});

async function copy(from: Store, to: Store): Promise<void> {
  const outcome = await to.importState(await from.exportState({ sessions: true }));
  assert.equal(outcome.kind, 'imported');
}

test('memory -> SQLite -> PostgreSQL -> SQLite gives the identical control state and an intact audit chain', async () => {
  const clock = createFakeClock();
  const memory = createMemoryStore();
  await populateControlState(makeDeps(memory, clock), clock);
  const expected = await collectState(memory, { sessions: true });
  const first = await openSqliteStore({ file: join(dir, 'first.db') });
  const postgres = await openPostgresStore({ connectionString: PG_URL, schema, max: 2, allowUnauthenticated: true });
  const last = await openSqliteStore({ file: join(dir, 'last.db') });
  try {
    await copy(memory, first);
    await copy(first, postgres);
    await copy(postgres, last);
    for (const store of [first, postgres, last]) assert.deepEqual(await collectState(store, { sessions: true }), expected);
    assert.ok(verifyAuditChain(await last.listAuditEvents({ afterSeq: 0, limit: 100_000 })).ok);
    // Every store refuses a second import: none of them is empty now.
    assert.equal((await postgres.importState(rowsOf(expected))).kind, 'not_empty');
  } finally {
    await first.close();
    await postgres.close();
    await last.close();
  }
});

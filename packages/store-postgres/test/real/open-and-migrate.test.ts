import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type AuditEvent, verifyAuditChain } from '@svc/core';
import { STORE_OPERATIONS } from '@svc/core/store';
import { openPostgresStore, POSTGRES_STORE_OPERATIONS, PostgresStore, StoreOpenError } from '../../src/index.js';
import { loadMigrations } from '../../src/migrations.js';
import { createTestEnv, PG_URL } from '../pg-test-env.js';

const env = createTestEnv();
after(() => env.dispose());

const T0 = Date.UTC(2026, 10, 22, 10, 0, 0, 0);
const PASSWORD = 'pw-Zq8#not-for-logs';

async function migrationRows(schema: string): Promise<{ version: number; name: string }[]> {
  const result = await env.admin.query<{ version: number; name: string }>(
    `SELECT version, name FROM ${schema}.schema_migrations ORDER BY version`,
  );
  return result.rows;
}

function expectedMigrations(): { version: number; name: string }[] {
  return loadMigrations().map((m) => ({ version: m.version, name: m.name }));
}

test('the operation set equals core STORE_OPERATIONS and each is a method of PostgresStore', () => {
  assert.deepEqual([...POSTGRES_STORE_OPERATIONS].sort(), [...STORE_OPERATIONS].sort());
  for (const op of POSTGRES_STORE_OPERATIONS) {
    assert.equal(typeof (PostgresStore.prototype as unknown as Record<string, unknown>)[op], 'function', op);
  }
});

test('opening a fresh schema creates it, applies every migration once and answers', async () => {
  const schema = env.schema();
  const store = await env.open(schema);
  try {
    await store.ping();
    assert.equal(store.schema, schema);
    assert.deepEqual(await migrationRows(schema), expectedMigrations());
    assert.equal(await store.auditHead(), null);
  } finally {
    await store.close();
  }
});

test('nodes opening one fresh schema at once migrate it exactly once without error', async () => {
  const schema = env.schema();
  const stores = await Promise.all(Array.from({ length: 6 }, () => env.open(schema)));
  try {
    assert.deepEqual(await migrationRows(schema), expectedMigrations());
    await Promise.all(stores.map((s) => s.ping()));
  } finally {
    await Promise.all(stores.map((s) => s.close()));
  }
});

test('two processes opening one fresh schema at once both succeed and migrate it once', async () => {
  const schema = env.schema();
  const entry = fileURLToPath(new URL('../../src/index.ts', import.meta.url));
  const script = `
    const { openPostgresStore } = await import(${JSON.stringify(entry)});
    const store = await openPostgresStore({ connectionString: process.env.PG_URL, schema: process.env.SCHEMA, max: 2, allowUnauthenticated: true });
    await store.ping();
    await store.close();
    console.log('opened');
  `;
  const run = () =>
    promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      env: { ...process.env, PG_URL, SCHEMA: schema },
      timeout: 60_000,
    });
  const results = await Promise.all([run(), run()]);
  for (const r of results) assert.equal(r.stdout.trim(), 'opened');
  assert.deepEqual(await migrationRows(schema), expectedMigrations());
});

test('reopening a schema keeps its data and its audit chain', async () => {
  const schema = env.schema();
  const first = await env.open(schema);
  let event: AuditEvent;
  try {
    await first.initProject({ projectId: 'prj_01KAQ0000000PERS1STENCE000', createdAt: T0 });
    event = await first.appendAuditEvent({
      id: 'evt_01KAQ0000000PERS1STENCE000',
      at: T0,
      type: 'signin.failed',
      realm: 'management',
      subject: null,
      deviceId: null,
      sessionId: null,
      data: { reason: 'bad_signature', attempt: 3, retried: false, note: null },
    });
  } finally {
    await first.close();
  }
  const second = await env.open(schema);
  try {
    assert.deepEqual(await second.getProject(), { projectId: 'prj_01KAQ0000000PERS1STENCE000', createdAt: T0 });
    const events = await second.listAuditEvents({ afterSeq: 0, limit: 10 });
    assert.deepEqual(events, [event]);
    assert.equal(verifyAuditChain(events).ok, true);
    assert.deepEqual(await migrationRows(schema), expectedMigrations());
  } finally {
    await second.close();
  }
});

test('audit data round-trips exactly, strings JSONB would refuse included, so the chain verifies', async () => {
  const schema = env.schema();
  const store = await env.open(schema);
  try {
    const data = { nul: 'a\u0000b', emoji: '🔑', quote: '"\\', big: Number.MAX_SAFE_INTEGER, neg: -1, yes: true, none: null };
    const event = await store.appendAuditEvent({
      id: 'evt_01KAQ0000000R0UNDTR1P00000',
      at: T0,
      type: 'pairing.failed',
      realm: null,
      subject: null,
      deviceId: null,
      sessionId: null,
      data,
    });
    const [read] = await store.listAuditEvents({ afterSeq: 0, limit: 1 });
    assert.deepEqual(read, event);
    assert.deepEqual(read?.data, data);
    assert.equal(verifyAuditChain([read as typeof event]).ok, true);
  } finally {
    await store.close();
  }
});

test("migration 3 keeps a version 2 schema's sessions and retired digests and drops every digest index", async () => {
  const schema = env.schema();
  const migrations = loadMigrations();
  // A schema as version 2 left it, with a session and a retired refresh digest.
  await env.admin.query(`CREATE SCHEMA ${schema}`);
  await env.admin.query(
    `CREATE TABLE ${schema}.schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`,
  );
  for (const m of migrations.filter((m) => m.version <= 2)) {
    // SET LOCAL: the pooled admin connection keeps no search_path afterwards.
    await env.admin.query(`BEGIN; SET LOCAL search_path TO ${schema}; ${m.sql}; COMMIT;`);
    await env.admin.query(`INSERT INTO ${schema}.schema_migrations (version, name, applied_at) VALUES ($1, $2, 0)`, [m.version, m.name]);
  }
  await env.admin.query(
    `INSERT INTO ${schema}.devices (id, public_key, realm, subject, name, created_at) VALUES ('dev_01KAQ00000000000000000000D', $1, 'management', 'sub_x', 'old', 1)`,
    ['ab'.repeat(32)],
  );
  await env.admin.query(
    `INSERT INTO ${schema}.sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at,
       refresh_digest, refresh_expires_at, generation)
     VALUES ('ses_01KAQ00000000000000000000S', 'management', 'sub_x', 'dev_01KAQ00000000000000000000D', 1, 9e12, $1, 9e12, $2, 9e12, 2)`,
    ['a1'.repeat(32), 'b1'.repeat(32)],
  );
  await env.admin.query(
    `INSERT INTO ${schema}.retired_refresh_tokens (digest, session_id, retired_at) VALUES ($1, 'ses_01KAQ00000000000000000000S', 3)`,
    ['d1'.repeat(32)],
  );

  const store = await env.open(schema);
  try {
    assert.deepEqual(await migrationRows(schema), expectedMigrations());
    assert.equal((await store.getSession('ses_01KAQ00000000000000000000S'))?.generation, 2);
    assert.equal((await store.findSessionByAccessDigest('ses_01KAQ00000000000000000000S', 'a1'.repeat(32)))?.generation, 2);
    const retired = await env.admin.query(`SELECT session_id, digest, retired_at FROM ${schema}.retired_refresh_tokens`);
    assert.deepEqual(retired.rows, [{ session_id: 'ses_01KAQ00000000000000000000S', digest: 'd1'.repeat(32), retired_at: '3' }]);
    // The index definitions are filtered here, not in SQL: a WHERE on `indexdef` may run
    // pg_get_indexdef on another schema's index, and one that a parallel test file drops
    // meanwhile fails the query ("could not open relation with OID ...", seen once in a run).
    const indexes = await env.admin.query<{ indexname: string; indexdef: string }>(
      `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'sessions'`,
      [schema],
    );
    assert.deepEqual(
      indexes.rows.filter((r) => r.indexdef.includes('digest')),
      [],
    );
  } finally {
    await store.close();
  }
});

test("migration 9 keeps a version 8 schema's sessions (amr ed25519); a session must still name a device or a link, whoever writes it", async () => {
  const schema = env.schema();
  await env.admin.query(`CREATE SCHEMA ${schema}`);
  await env.admin.query(
    `CREATE TABLE ${schema}.schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`,
  );
  for (const m of loadMigrations().filter((m) => m.version <= 8)) {
    await env.admin.query(`BEGIN; SET LOCAL search_path TO ${schema}; ${m.sql}; COMMIT;`);
    await env.admin.query(`INSERT INTO ${schema}.schema_migrations (version, name, applied_at) VALUES ($1, $2, 0)`, [m.version, m.name]);
  }
  await env.admin.query(
    `INSERT INTO ${schema}.devices (id, public_key, realm, subject, name, created_at) VALUES ('dev_01KAQ00000000000000000000D', $1, 'management', 'sub_x', 'old', 1)`,
    ['ab'.repeat(32)],
  );
  await env.admin.query(
    `INSERT INTO ${schema}.sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at,
       refresh_digest, refresh_expires_at, generation)
     VALUES ('ses_01KAQ00000000000000000000S', 'management', 'sub_x', 'dev_01KAQ00000000000000000000D', 1, 9e12, $1, 9e12, $2, 9e12, 2)`,
    ['a1'.repeat(32), 'b1'.repeat(32)],
  );

  const store = await env.open(schema);
  try {
    assert.deepEqual(await migrationRows(schema), expectedMigrations());
    const session = await store.getSession('ses_01KAQ00000000000000000000S');
    assert.equal(session?.generation, 2);
    assert.deepEqual(session?.amr, ['ed25519']);
    // The admin connection has no search_path to the schema: the trigger still finds its tables.
    const insert = (id: string, device: string) =>
      env.admin.query(
        `INSERT INTO ${schema}.sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at,
           refresh_digest, refresh_expires_at) VALUES ($1, 'application', 'sub_y', $2, 1, 9e12, 'x', 9e12, 'y', 9e12)`,
        [id, device],
      );
    await assert.rejects(insert('ses_01KAQ0000000000000000000S2', 'lnk_01KAQ0000000000000000000L1'), /names no device or link/);
    await env.admin.query(
      `INSERT INTO ${schema}.links (id, realm, subject, provider, issuer, external_subject, name, created_at)
       VALUES ('lnk_01KAQ0000000000000000000L1', 'application', 'sub_y', 'corp', 'https://i', 'ann', 'ann', 1)`,
    );
    await insert('ses_01KAQ0000000000000000000S2', 'lnk_01KAQ0000000000000000000L1');
    assert.deepEqual((await store.getSession('ses_01KAQ0000000000000000000S2'))?.deviceId, 'lnk_01KAQ0000000000000000000L1');
  } finally {
    await store.close();
  }
});

test('a schema newer than this package is refused with StoreOpenError', async () => {
  const schema = env.schema();
  const store = await env.open(schema);
  await store.close();
  await env.admin.query(`INSERT INTO ${schema}.schema_migrations (version, name, applied_at) VALUES (999, 'from_the_future', 0)`);
  await assert.rejects(env.open(schema), (err: unknown) => {
    assert.ok(err instanceof StoreOpenError);
    assert.match(err.message, /newer/);
    assert.doesNotMatch(err.message, /\n/);
    return true;
  });
});

test('a schema pre-created by another role (squatting on the store schema) is refused, and nothing is created in it', async () => {
  const schema = env.schema();
  const intruder = `svc_intruder_${schema.slice(-12)}`;
  await env.admin.query(`CREATE ROLE ${intruder} NOLOGIN`);
  try {
    await env.admin.query(`CREATE SCHEMA ${schema} AUTHORIZATION ${intruder}`);
    await assert.rejects(env.open(schema), (err: unknown) => {
      assert.ok(err instanceof StoreOpenError);
      assert.match(err.message, new RegExp(`owned by the role ${intruder}`));
      assert.doesNotMatch(err.message, /\n/);
      return true;
    });
    const tables = await env.admin.query('SELECT 1 FROM pg_tables WHERE schemaname = $1', [schema]);
    assert.equal(tables.rowCount, 0, 'no table was created in the squatted schema');
  } finally {
    await env.drop(schema);
    await env.admin.query(`DROP ROLE ${intruder}`);
  }
});

test('a table planted by another role in the store schema is refused', async () => {
  const schema = env.schema();
  const intruder = `svc_intruder_${schema.slice(-12)}`;
  const store = await env.open(schema);
  await store.close();
  await env.admin.query(`CREATE ROLE ${intruder} NOLOGIN`);
  try {
    await env.admin.query(`ALTER TABLE ${schema}.audit_events OWNER TO ${intruder}`);
    await assert.rejects(
      env.open(schema),
      (err: unknown) => err instanceof StoreOpenError && /audit_events is owned by the role/.test(err.message),
    );
  } finally {
    await env.drop(schema);
    await env.admin.query(`DROP ROLE ${intruder}`);
  }
});

test('an unreachable server is a one-line StoreOpenError that never shows the password', async () => {
  const attempts = [
    { host: '127.0.0.1', port: 1, user: 'svc', database: 'test', password: PASSWORD, schema: env.schema() },
    { connectionString: `postgres://svc:${encodeURIComponent(PASSWORD)}@127.0.0.1:1/test`, schema: env.schema() },
  ];
  for (const options of attempts) {
    await assert.rejects(openPostgresStore(options), (err: unknown) => {
      assert.ok(err instanceof StoreOpenError, String(err));
      assert.equal(err.code, 'store_open_failed');
      assert.equal(err.driverCode, 'ECONNREFUSED');
      assert.match(err.message, /127\.0\.0\.1:1/);
      for (const text of [err.message, err.target, String(err.stack)]) {
        assert.ok(!text.includes(PASSWORD) && !text.includes(encodeURIComponent(PASSWORD)), 'the password leaked');
      }
      assert.doesNotMatch(err.message, /\n/);
      return true;
    });
  }
});

test('credentials the server refuses are a StoreOpenError that never shows the password', async () => {
  const url = new URL(PG_URL);
  url.username = 'svc_no_such_role';
  url.password = PASSWORD;
  await assert.rejects(openPostgresStore({ connectionString: url.href, schema: env.schema() }), (err: unknown) => {
    assert.ok(err instanceof StoreOpenError, String(err));
    assert.equal(err.code, 'store_open_failed');
    assert.ok(err.driverCode === '28000' || err.driverCode === '28P01', `driver code ${err.driverCode}`);
    assert.ok(!err.message.includes(PASSWORD) && !err.message.includes(encodeURIComponent(PASSWORD)), 'the password leaked');
    return true;
  });
});

test('a connection string whose own options replace the search_path is refused before anything is created', async () => {
  const schema = env.schema();
  const url = new URL(PG_URL);
  url.searchParams.set('options', '-c search_path=public');
  await assert.rejects(openPostgresStore({ connectionString: url.href, schema, allowUnauthenticated: true }), StoreOpenError);
  const created = await env.admin.query('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [schema]);
  assert.equal(created.rowCount, 0);
  const leaked = await env.admin.query(
    "SELECT 1 FROM information_schema.tables WHERE table_schema = 'public' AND table_name = 'audit_head'",
  );
  assert.equal(leaked.rowCount, 0);
});

test('a schema name that is not a plain lowercase identifier is a TypeError before any connection', async () => {
  for (const schema of ['Svc', 'svc; DROP SCHEMA public', '1svc', '', 'a'.repeat(64)]) {
    await assert.rejects(openPostgresStore({ connectionString: PG_URL, schema }), TypeError);
  }
});

test('an operation whose statements fail on the server rejects with that error, never a made-up answer', async () => {
  const schema = env.schema();
  const store = await env.open(schema);
  try {
    // A dropped schema makes every statement fail on the server: the error must surface.
    await env.drop(schema);
    await assert.rejects(
      store.appendAuditEvent({
        id: 'evt_01KAQ0000000G0NEAWAY000000',
        at: T0,
        type: 'signin.failed',
        realm: null,
        subject: null,
        deviceId: null,
        sessionId: null,
        data: {},
      }),
    );
    await assert.rejects(store.findSessionByAccessDigest('ses_01KAQ00000000000000000000Z', '00'.repeat(32)));
  } finally {
    await store.close();
  }
});

test('a least-privilege role that owns only its schema, without CREATE on the database, opens, migrates and writes it (docs/deployment.md)', async () => {
  const schema = env.schema();
  const role = `svc_least_${schema.slice(-12)}`;
  await env.admin.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`);
  try {
    const database = new URL(PG_URL).pathname.slice(1);
    const may = await env.admin.query<{ create: boolean }>(`SELECT has_database_privilege($1, $2, 'CREATE') AS create`, [role, database]);
    assert.equal(may.rows[0]?.create, false, 'the role has no CREATE on the database');
    await env.admin.query(`CREATE SCHEMA ${schema} AUTHORIZATION ${role}`);
    const url = new URL(PG_URL);
    url.username = role;
    const store = await openPostgresStore({ connectionString: url.href, schema, max: 2, allowUnauthenticated: true });
    try {
      assert.deepEqual(await migrationRows(schema), expectedMigrations());
      await store.initProject({ projectId: 'prj_01KAQ0000000LEASTPRIVILEGE', createdAt: T0 });
      assert.equal((await store.getProject())?.projectId, 'prj_01KAQ0000000LEASTPRIVILEGE');
    } finally {
      await store.close();
    }
  } finally {
    await env.drop(schema);
    await env.admin.query(`DROP ROLE ${role}`);
  }
});

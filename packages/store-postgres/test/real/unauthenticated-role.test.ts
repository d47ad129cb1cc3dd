import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { openPostgresStore, StoreOpenError, UNAUTHENTICATED_STORE_EVENT } from '../../src/index.js';
import { createTestEnv, PG_URL } from '../pg-test-env.js';
import { type PrivatePostgres, startPrivatePostgres } from '../private-postgres.js';

// #24.7: with PostgreSQL trusting local connections (as the repository's own test server
// does), any process on the host, a signed provider's confined child included (Node's
// permission model does not confine the network), could connect as the store's role and
// write a management device. The store now refuses such a server unless the operator accepts it.

const env = createTestEnv();
after(() => env.dispose());

/** What a hostile process on the host does: connect as the store's role with no password it knows, and write. */
async function writeWithoutPassword(url: string, schema: string): Promise<'wrote' | string> {
  const target = new URL(url);
  target.password = `guess-${randomBytes(8).toString('hex')}`;
  const client = new pg.Client({ connectionString: target.href });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query(`CREATE TABLE IF NOT EXISTS ${schema}.intruder (note text)`);
    return 'wrote';
  } catch (err) {
    return String((err as { code?: unknown }).code);
  } finally {
    await client.end().catch(() => undefined);
  }
}

test('a process on the host that connects as the store role without a password (trust auth) could write the control store: the store refuses to open', async () => {
  const schema = env.schema();
  // The attack works on this server: that is what the store must notice.
  assert.equal(await writeWithoutPassword(PG_URL, 'public'), 'wrote');
  await env.admin.query('DROP TABLE IF EXISTS public.intruder');
  await assert.rejects(openPostgresStore({ connectionString: PG_URL, schema, max: 2 }), (err: unknown) => {
    assert.ok(err instanceof StoreOpenError, String(err));
    assert.equal(err.code, 'store_open_failed');
    assert.equal(err.refusal, 'unauthenticated');
    assert.doesNotMatch(err.message, /\n/);
    return true;
  });
  const created = await env.admin.query('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [schema]);
  assert.equal(created.rowCount, 0, 'nothing is created on a refused server');
});

test('an operator who accepts an unauthenticated role gets the store, and a warning on every open', async () => {
  const schema = env.schema();
  const warnings: { event: string; message: string }[] = [];
  const warn = (event: string, message: string) => warnings.push({ event, message });
  for (let open = 1; open <= 2; open += 1) {
    const store = await openPostgresStore({ connectionString: PG_URL, schema, max: 2, allowUnauthenticated: true, warn });
    await store.ping();
    await store.close();
    assert.equal(warnings.length, open, `one warning per open (open ${open})`);
  }
  for (const w of warnings) {
    assert.equal(w.event, UNAUTHENTICATED_STORE_EVENT);
    assert.doesNotMatch(w.message, /\n/);
  }
});

describe('a server that authenticates the role (scram-sha-256, a private cluster)', () => {
  const password = `pw-${randomBytes(12).toString('hex')}`;
  let server: PrivatePostgres;
  before(async () => {
    server = await startPrivatePostgres({ password });
  });
  after(async () => {
    await server?.dispose();
  });

  test('opens without any acceptance and gives no warning, while a process without the password cannot write', async () => {
    const warnings: string[] = [];
    const store = await openPostgresStore({
      connectionString: server.url,
      password,
      schema: 'svc_auth',
      max: 2,
      warn: (event) => warnings.push(event),
    });
    try {
      await store.ping();
    } finally {
      await store.close();
    }
    assert.deepEqual(warnings, []);
    assert.equal(await writeWithoutPassword(server.url, 'svc_auth'), '28P01');
  });

  test('a password in the connection string is not mistaken for a server that lets anyone in', async () => {
    const url = new URL(server.url);
    url.password = password;
    const store = await openPostgresStore({ connectionString: url.href, schema: 'svc_auth_url', max: 2 });
    await store.close();
  });
});

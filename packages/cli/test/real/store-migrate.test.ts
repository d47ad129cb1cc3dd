import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { cleanEnv, type ServerProcess, startServer, svc, tempDir } from '../helpers.js';
import { enrolledProjectInProcess as enrolledProject, svcOkInProcess as svcOk } from '../in-process.js';
import { auditEvents, bundledSha256, createSchemas, loginOverHttp, me, PG_URL } from '../support/store-projects.js';

/** Adds a store module `alias` to the project's :svc/modules (project.edn as `svc auth init` writes it). */
function addStoreModule(dir: string, alias: string, module: string): void {
  const file = join(dir, 'project.edn');
  const text = readFileSync(file, 'utf8');
  writeFileSync(file, text.replace(':svc/modules  {', `:svc/modules  {:${alias} ${module}\n                `));
}

/** Points :auth/store at `alias`: the one change the migrate command tells the operator to make. */
function switchStore(dir: string, from: string, to: string): void {
  const file = join(dir, 'project.edn');
  const text = readFileSync(file, 'utf8');
  assert.ok(text.includes(`:auth/store :${from}`));
  writeFileSync(file, text.replace(`:auth/store :${from}`, `:auth/store :${to}`));
}

const pgModule = (schema: string) =>
  `{:package "svc-store-postgres" :activate [:svc/store] :config {:store/url ${JSON.stringify(PG_URL)} :store/schema ${JSON.stringify(schema)} :store/pool-size 2 :store/allow-unauthenticated true}}`;

describe('svc auth store migrate moves a project between SQLite and PostgreSQL without losing anyone', () => {
  const tmp = tempDir('svc-store-migrate-');
  const schemas = createSchemas();
  const servers: ServerProcess[] = [];
  after(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    try {
      await schemas.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  test('SQLite to PostgreSQL with --sessions and back: the signed-in session stays valid, the device signs in, the chain verifies with store.migrated; refusals say why', async () => {
    const root = join(tmp.dir, 'move');
    const env = cleanEnv({ HOME: root });
    const p = await enrolledProject(root, { env });
    await svcOk(['auth', 'scim', 'token', 'create', '--name', 'entra', p.dir], { env });
    const pg = schemas.fresh();
    addStoreModule(p.dir, 'pg', pgModule(pg));
    await svcOk(['package', 'install', 'svc-store-postgres', '--sha256', bundledSha256('svc-store-postgres'), p.dir], { env });

    // A live session made on SQLite; the service is running, so a move is refused.
    let server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', p.dir], { env });
    servers.push(server);
    const session = await loginOverHttp(server.url, p.keyFile, p.publicKey);
    const running = await svc(['auth', 'store', 'migrate', p.dir, '--to', 'pg', '--sessions'], { env });
    assert.equal(running.code, 1, running.stderr);
    assert.match(running.stderr, /in use \(is `svc serve` running/);
    assert.equal(running.stderr.trim().split('\n').length, 1, running.stderr);
    await server.stop('SIGTERM');

    const moved = await svc(['auth', 'store', 'migrate', p.dir, '--to', 'pg', '--sessions'], { env });
    assert.equal(moved.code, 0, moved.stderr);
    assert.match(
      moved.stdout,
      /copied the control state from :store \(svc-store-sqlite\) to :pg \(svc-store-postgres\): 1 users, 1 devices, 0 links, 1 SCIM tokens, 1 sessions/,
    );
    assert.match(moved.stdout, /change :auth\/store :store -> :auth\/store :pg/);

    // The target is no longer empty: a second move is refused, and says so.
    const again = await svc(['auth', 'store', 'migrate', p.dir, '--to', 'pg'], { env });
    assert.equal(again.code, 1, again.stderr);
    assert.match(again.stderr, /already holds control state \(table project\); migrate only into an empty store/);

    switchStore(p.dir, 'store', 'pg');
    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', p.dir], { env });
    servers.push(server);
    assert.equal((await me(server.url, session.access_token)).status, 200, 'the session made on SQLite is still signed in');
    const fresh = await loginOverHttp(server.url, p.keyFile, p.publicKey);
    assert.equal((await me(server.url, fresh.access_token)).status, 200, 'the device signs in by challenge on PostgreSQL');
    // A node serving on the PostgreSQL source: moving away from it is refused (running-service).
    addStoreModule(p.dir, 'back', '{:package "svc-store-sqlite" :activate [:svc/store] :config {:store/file "control-back.db"}}');
    const busy = await svc(['auth', 'store', 'migrate', p.dir, '--to', 'back'], { env });
    assert.equal(busy.code, 1, busy.stderr);
    assert.match(busy.stderr, /other svc connection\(s\) use the PostgreSQL schema .* stop every node first/);
    await server.stop('SIGTERM');
    const verify = await svc(['auth', 'audit', 'verify', p.dir], { env });
    assert.equal(verify.code, 0, verify.stderr);
    const onPg = (await auditEvents(p.dir, env)).map((e) => e.type);
    assert.ok(onPg.includes('store.migrated'));
    assert.equal(onPg.at(-1) === 'store.migrated' || onPg.at(-2) === 'store.migrated', true);

    // And back: PostgreSQL to a new SQLite file, without sessions (they are not copied, and it says so).
    const back = await svc(['auth', 'store', 'migrate', p.dir, '--to', 'back'], { env });
    assert.equal(back.code, 0, back.stderr);
    assert.match(back.stdout, /live sessions were not copied \(\d+ live\)/);
    switchStore(p.dir, 'pg', 'back');
    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', p.dir], { env });
    servers.push(server);
    assert.equal((await me(server.url, fresh.access_token)).status, 401, 'without --sessions nobody stays signed in');
    const third = await loginOverHttp(server.url, p.keyFile, p.publicKey);
    assert.equal((await me(server.url, third.access_token)).status, 200, 'the device signs in on SQLite again');
    await server.stop('SIGTERM');
    const types = (await auditEvents(p.dir, env)).map((e) => e.type);
    assert.equal(types.filter((t) => t === 'store.migrated').length, 2);
    assert.equal((await svc(['auth', 'audit', 'verify', p.dir], { env })).code, 0);
  });

  test('a tampered source audit chain is refused before anything is copied (tampered-source-chain)', async () => {
    const root = join(tmp.dir, 'tampered');
    const env = cleanEnv({ HOME: root });
    const p = await enrolledProject(root, { env });
    const pg = schemas.fresh();
    addStoreModule(p.dir, 'pg', pgModule(pg));
    await svcOk(['package', 'install', 'svc-store-postgres', '--sha256', bundledSha256('svc-store-postgres'), p.dir], { env });
    const db = new Database(join(p.dir, '.svc', 'control', 'control.db'));
    db.prepare('UPDATE audit_events SET data = \'{"via":"forged"}\' WHERE seq = 1').run();
    db.close();
    const r = await svc(['auth', 'store', 'migrate', p.dir, '--to', 'pg'], { env });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /audit chain of the source is broken at event #1/);
    // Nothing reached the target: the chain is checked before the target is even opened.
    const { default: pgLib } = await import('pg');
    const client = new pgLib.Client({ connectionString: PG_URL });
    await client.connect();
    try {
      const found = await client.query(`SELECT to_regclass('${pg}.project') AS t`);
      if (found.rows[0]?.t !== null) assert.equal((await client.query(`SELECT COUNT(*)::int AS n FROM ${pg}.project`)).rows[0]?.n, 0);
    } finally {
      await client.end();
    }
  });
});

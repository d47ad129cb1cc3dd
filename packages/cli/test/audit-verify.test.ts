import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { cleanEnv, enrolledProject, startServer, svc, svcOk, tempDir } from './helpers.js';

describe('audit verify', () => {
  const tmp = tempDir();
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  let dir = '';
  let db = '';

  before(async () => {
    const p = await enrolledProject(tmp.dir, { env });
    dir = p.dir;
    db = join(dir, '.svc', 'control', 'control.db');
    const server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
    try {
      await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.url], { env });
      await svcOk(['auth', 'refresh'], { env });
      await svcOk(['auth', 'logout'], { env });
    } finally {
      await server.stop();
    }
  });
  after(() => tmp.cleanup());

  /** Runs `fn` on the database, then `audit verify`, then restores the database. */
  async function tampered(fn: (sql: Database.Database) => void): Promise<{ code: number; seq: number }> {
    const sql = new Database(db);
    const snapshot = sql.prepare('SELECT * FROM audit_events ORDER BY seq').all() as Record<string, unknown>[];
    try {
      sql.transaction(() => fn(sql))();
      const r = await svc(['auth', 'audit', 'verify', dir, '--json'], { env });
      const verdict = JSON.parse(r.stdout) as { ok: boolean; seq: number };
      assert.equal(verdict.ok, false);
      return { code: r.code, seq: verdict.seq };
    } finally {
      sql.transaction(() => {
        sql.prepare('DELETE FROM audit_events').run();
        const cols = Object.keys(snapshot[0] ?? {});
        const insert = sql.prepare(`INSERT INTO audit_events (${cols.join(',')}) VALUES (${cols.map((c) => `@${c}`).join(',')})`);
        for (const row of snapshot) insert.run(row);
      })();
      sql.close();
    }
  }

  test('an intact chain verifies with exit 0', async () => {
    const r = await svcOk(['auth', 'audit', 'verify', dir], { env });
    assert.match(r.stdout, /^audit chain ok: 5 events, head [0-9a-f]{64}\n$/);
  });

  test('an edited event is found: exit 1 naming its seq', async () => {
    const r = await tampered((sql) => sql.prepare('UPDATE audit_events SET data = \'{"reason":"forged"}\' WHERE seq = 3').run());
    assert.equal(r.code, 1);
    assert.equal(r.seq, 3);
  });

  test('a removed event is found: exit 1 naming the event after the gap', async () => {
    const r = await tampered((sql) => sql.prepare('DELETE FROM audit_events WHERE seq = 2').run());
    assert.equal(r.code, 1);
    assert.equal(r.seq, 3);
  });

  test('reordered events (seq values swapped) are found: exit 1', async () => {
    const r = await tampered((sql) => {
      sql.prepare('UPDATE audit_events SET seq = -4 WHERE seq = 4').run();
      sql.prepare('UPDATE audit_events SET seq = 4 WHERE seq = 5').run();
      sql.prepare('UPDATE audit_events SET seq = 5 WHERE seq = -4').run();
    });
    assert.equal(r.code, 1);
    assert.equal(r.seq, 4);
  });

  test('after the tampering is undone the chain verifies again', async () => {
    assert.equal((await svc(['auth', 'audit', 'verify', dir], { env })).code, 0);
  });
});

import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { GENESIS_HASH, publicKeyHexOf, sealAuditEvent, signAuditCheckpoint } from '@svc/core';
import { type EventRow, toEvent } from '@svc/core/store';
import Database from 'better-sqlite3';
import { cleanEnv, startServer, tempDir } from '../helpers.js';
// The service is the installed `svc`, spawned; the operator's commands, whose process boundary
// is not the subject here, run in process (svcInProcess).
import { enrolledProjectInProcess as enrolledProject, svcInProcess as svc, svcOkInProcess as svcOk } from '../in-process.js';

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

describe('audit verify against exported checkpoints: truncation and re-sealing', () => {
  const tmp = tempDir();
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  let dir = '';
  let db = '';
  // Outside the control directory: where the database writers cannot write (here: just elsewhere).
  const checkpoints = join(tmp.dir, 'exported', 'checkpoints.jsonl');

  before(async () => {
    const p = await enrolledProject(join(tmp.dir, 'p'), { env });
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
    mkdirSync(join(tmp.dir, 'exported'), { mode: 0o700 });
    await svcOk(['auth', 'audit', 'verify', dir, '--export', checkpoints], { env });
  });
  after(() => tmp.cleanup());

  /** Runs `fn` on the database, then `audit verify` without and with the checkpoints, then restores it. */
  async function tampered(fn: (sql: Database.Database) => void): Promise<{ plain: number; checked: { code: number; stderr: string } }> {
    const sql = new Database(db);
    const snapshot = sql.prepare('SELECT * FROM audit_events ORDER BY seq').all() as Record<string, unknown>[];
    try {
      sql.transaction(() => fn(sql))();
      const plain = await svc(['auth', 'audit', 'verify', dir], { env });
      const checked = await svc(['auth', 'audit', 'verify', dir, '--checkpoints', checkpoints], { env });
      return { plain: plain.code, checked: { code: checked.code, stderr: checked.stderr } };
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

  test('the exported checkpoint is one signed line outside the control directory, and the intact chain holds against it', async () => {
    const lines = readFileSync(checkpoints, 'utf8').trim().split('\n');
    assert.equal(lines.length, 1);
    const cp = JSON.parse(lines[0] as string);
    assert.equal(cp.payload.type, 'svc-audit-checkpoint');
    assert.equal(cp.payload.length, 5);
    assert.match(cp.signature, /^[0-9a-f]{128}$/);
    assert.equal(statSync(checkpoints).mode & 0o777, 0o600);
    const r = await svcOk(['auth', 'audit', 'verify', dir, '--checkpoints', checkpoints], { env });
    assert.match(r.stdout, /1 exported checkpoints hold/);
  });

  test('dropping the tail of the chain passes the hash chain but is found against the exported checkpoint (truncated)', async () => {
    const r = await tampered((sql) => sql.prepare('DELETE FROM audit_events WHERE seq > 3').run());
    assert.equal(r.plain, 0, 'the hash chain alone cannot see a dropped tail');
    assert.equal(r.checked.code, 1);
    assert.match(r.checked.stderr, /truncated/);
  });

  test("deleting an event and re-sealing the chain with svc's own code is found against the exported checkpoint (rewritten)", async () => {
    const r = await tampered((sql) => {
      const rows = sql.prepare('SELECT * FROM audit_events ORDER BY seq').all() as EventRow[];
      sql.prepare('DELETE FROM audit_events').run();
      const insert = sql.prepare(
        'INSERT INTO audit_events (seq, id, at, type, realm, subject, device_id, session_id, data, prev_hash, hash) VALUES (@seq, @id, @at, @type, @realm, @subject, @device_id, @session_id, @data, @prev_hash, @hash)',
      );
      let prev = { seq: 0, hash: GENESIS_HASH };
      for (const row of rows.filter((r) => r.seq !== 2)) {
        const event = toEvent(row);
        const sealed = sealAuditEvent(
          {
            id: event.id,
            at: event.at,
            type: event.type,
            realm: event.realm,
            subject: event.subject,
            deviceId: event.deviceId,
            sessionId: event.sessionId,
            data: event.data,
          },
          prev.seq,
          prev.hash,
        );
        insert.run({ ...row, seq: sealed.seq, prev_hash: sealed.prevHash, hash: sealed.hash });
        prev = sealed;
      }
      // Pad the chain back to its old length with a re-sealed copy of the last event, as a careful attacker would.
      const last = toEvent(rows.at(-1) as EventRow);
      // A new id: the last one with its final character changed (never to itself, or the insert would collide).
      const pad = sealAuditEvent({ ...last, id: `${last.id.slice(0, -1)}${last.id.endsWith('Z') ? 'Y' : 'Z'}` }, prev.seq, prev.hash);
      insert.run({ ...(rows.at(-1) as EventRow), id: pad.id, seq: pad.seq, prev_hash: pad.prevHash, hash: pad.hash });
    });
    assert.equal(r.plain, 0, 'a re-sealed chain passes the hash chain alone');
    assert.equal(r.checked.code, 1);
    assert.match(r.checked.stderr, /rewritten/);
  });

  test('a checkpoint forged with another key is refused (other_key)', async () => {
    const forged = join(tmp.dir, 'exported', 'forged.jsonl');
    const key = generateKeyPairSync('ed25519');
    const cp = JSON.parse(readFileSync(checkpoints, 'utf8').trim()) as { payload: Record<string, unknown> };
    const signed = signAuditCheckpoint(
      { project: cp.payload.project as string, head: { seq: 5, hash: cp.payload.head as string }, now: Date.now() },
      { publicKeyHex: publicKeyHexOf(key.publicKey), sign: (m) => sign(null, m, key.privateKey) },
    );
    writeFileSync(forged, `${JSON.stringify(signed)}\n`);
    const r = await svc(['auth', 'audit', 'verify', dir, '--checkpoints', forged], { env });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /other_key/);
  });
});

describe('a running service exports signed audit checkpoints', () => {
  const tmp = tempDir();
  const exported = join(tmp.dir, 'exported', 'checkpoints.jsonl');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json'), SVC_AUDIT_CHECKPOINT_FILE: exported });
  after(() => tmp.cleanup());

  test('a tail dropped after the service ran is found against the checkpoints it exported at start and stop (truncated)', async () => {
    const p = await enrolledProject(join(tmp.dir, 'p'), { env });
    mkdirSync(join(tmp.dir, 'exported'), { mode: 0o700 });
    const server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', p.dir], { env });
    try {
      await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.url], { env });
      await svcOk(['auth', 'logout'], { env });
    } finally {
      await server.stop();
    }
    const lines = readFileSync(exported, 'utf8').trim().split('\n');
    assert.equal(lines.length, 2, 'one checkpoint at start, one at stop (the head moved)');
    const last = JSON.parse(lines[1] as string) as { payload: { length: number } };
    assert.equal(last.payload.length, 4, 'bootstrap issued, device enrolled, session created, session revoked');
    await svcOk(['auth', 'audit', 'verify', p.dir, '--checkpoints', exported], { env });

    const sql = new Database(join(p.dir, '.svc', 'control', 'control.db'));
    try {
      sql.prepare('DELETE FROM audit_events WHERE seq > 1').run();
    } finally {
      sql.close();
    }
    assert.equal((await svc(['auth', 'audit', 'verify', p.dir], { env })).code, 0, 'the chain alone still verifies');
    const r = await svc(['auth', 'audit', 'verify', p.dir, '--checkpoints', exported], { env });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /truncated/);
  });
});

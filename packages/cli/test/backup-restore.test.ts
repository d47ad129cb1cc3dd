import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import {
  bash,
  cleanEnv,
  enrolledProject,
  problemCode,
  type RunResult,
  type ServerProcess,
  SVC_BIN,
  startServer,
  svc,
  svcOk,
  tempDir,
} from './helpers.js';
import { loginOverHttp, me, revoke } from './support/store-projects.js';

function mode(path: string): number {
  return statSync(path).mode & 0o777;
}

function digest(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** A digest of every row of every table: the content, whatever SQLite did to the file's pages or journal mode. */
function contentDigest(file: string): string {
  const db = new Database(file, { fileMustExist: true });
  try {
    const hash = createHash('sha256');
    const tables = db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").all() as { name: string }[];
    for (const { name } of tables) {
      hash.update(name);
      for (const row of db.prepare(`SELECT * FROM "${name}" ORDER BY 1`).all()) hash.update(JSON.stringify(row));
    }
    return hash.digest('hex');
  } finally {
    db.close();
  }
}

/** A refusal as the contract wants it: exit 1 and one line on stderr. */
function assertRefused(r: RunResult, pattern: RegExp): void {
  assert.equal(r.code, 1, `exit code 1, got ${r.code}: ${r.stderr}`);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line on stderr, got:\n${r.stderr}`);
  assert.match(lines[0] as string, pattern);
}

describe('svc auth backup and svc auth restore (embedded SQLite store)', () => {
  const tmp = tempDir('svc-backup-');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  const servers: ServerProcess[] = [];
  const serve = async (dir: string): Promise<ServerProcess> => {
    const s = await startServer(['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', dir], { env });
    servers.push(s);
    return s;
  };
  const backupUnderUmask002 = (dir: string, file: string) =>
    bash(`umask 002; exec "${process.execPath}" "${SVC_BIN}" auth backup "${dir}" "${file}"`, { env });

  after(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    tmp.cleanup();
  });

  test('a backup taken while serving under sign-ins restores the sessions and audit chain as at backup time', async () => {
    const root = join(tmp.dir, 'flow');
    const { dir, keyFile, publicKey } = await enrolledProject(root, { env });
    const controlDb = join(dir, '.svc', 'control', 'control.db');
    let server = await serve(dir);
    const kept = await loginOverHttp(server.url, keyFile, publicKey);
    const revokedLater = await loginOverHttp(server.url, keyFile, publicKey);

    // Sign-ins keep committing while the backup runs.
    let loading = true;
    const load = (async () => {
      let n = 0;
      while (loading) {
        await loginOverHttp(server.url, keyFile, publicKey);
        n += 1;
      }
      return n;
    })();
    const file = join(root, 'backup.db');
    const backup = await backupUnderUmask002(dir, file);
    loading = false;
    const signInsDuringBackup = await load;
    assert.equal(backup.code, 0, backup.stderr);
    assert.match(backup.stdout, /^backed up project prj_\S+ \(schema \d+\) to /);
    assert.equal(mode(file), 0o600, 'the backup is owner-only under umask 002');
    assert.ok(signInsDuringBackup >= 1, 'sign-ins ran during the backup');
    const eventsAtBackup = JSON.parse((await svcOk(['auth', 'audit', 'verify', dir, '--json'], { env })).stdout) as { events: number };

    // After the backup: one session is revoked, one is new.
    assert.equal((await revoke(server.url, revokedLater.access_token)).status, 200);
    const newer = await loginOverHttp(server.url, keyFile, publicKey);
    assert.equal(await server.stop('SIGTERM'), 0);

    const restored = await svcOk(['auth', 'restore', dir, file, '--json'], { env });
    const r = JSON.parse(restored.stdout) as { pre_restore: string; audit_events: number; node_key_created: boolean };
    assert.equal(r.node_key_created, false);
    assert.ok(r.audit_events <= eventsAtBackup.events && r.audit_events > 0);
    assert.equal(mode(r.pre_restore), 0o600, 'the replaced control database is kept owner-only');
    assert.equal(mode(controlDb), 0o600);
    assert.deepEqual(
      readdirSync(join(dir, '.svc', 'control')).filter((f) => f.includes('.restore-')),
      [],
      'no staging file is left behind',
    );

    server = await serve(dir);
    assert.equal((await me(server.url, kept.access_token)).status, 200, 'a session live at backup time is live');
    assert.equal((await me(server.url, revokedLater.access_token)).status, 200, 'a session revoked after the backup is live again');
    const gone = await me(server.url, newer.access_token);
    assert.equal(gone.status, 401, 'a session created after the backup does not exist');
    assert.equal(await problemCode(gone), 'invalid_token');
    const again = await loginOverHttp(server.url, keyFile, publicKey);
    assert.equal((await me(server.url, again.access_token)).status, 200, 'the enrolled device signs in after restore');
    await svcOk(['auth', 'login', '--key', keyFile, '--url', server.url], { env });
    assert.equal((await svcOk(['auth', 'whoami'], { env })).code, 0);
    const verify = await svcOk(['auth', 'audit', 'verify', dir], { env });
    assert.match(verify.stdout, /^audit chain ok: \d+ events/);
    await server.stop('SIGTERM');
  });

  test('a project that lost its whole control directory is recovered from a backup (new node key, old device signs in)', async () => {
    const root = join(tmp.dir, 'disaster');
    const { dir, keyFile, publicKey } = await enrolledProject(root, { env });
    const file = join(root, 'backup.db');
    await svcOk(['auth', 'backup', dir, file], { env });
    rmSync(join(dir, '.svc'), { recursive: true, force: true });

    const restored = await svcOk(['auth', 'restore', dir, file], { env });
    assert.match(restored.stdout, /^restored project prj_\S+ \(schema \d+, audit chain ok: \d+ events\)/);
    assert.match(restored.stdout, /created a new one at .*node-key\.pem/);
    assert.equal(mode(join(dir, '.svc', 'control', 'node-key.pem')), 0o600);
    assert.equal(mode(join(dir, '.svc', 'control')), 0o700);

    const server = await serve(dir);
    const pair = await loginOverHttp(server.url, keyFile, publicKey);
    assert.equal((await me(server.url, pair.access_token)).status, 200);
    await server.stop('SIGTERM');
    assert.match((await svcOk(['auth', 'audit', 'verify', dir], { env })).stdout, /^audit chain ok/);
  });

  describe('refusals (exit 1, one line, the control database untouched)', () => {
    const root = join(tmp.dir, 'refusals');
    const p = { dir: '', controlDb: '', backup: '' };
    const fresh = async () => {
      if (p.dir !== '') return p;
      const e = await enrolledProject(root, { env });
      p.dir = e.dir;
      p.controlDb = join(e.dir, '.svc', 'control', 'control.db');
      p.backup = join(root, 'good.db');
      await svcOk(['auth', 'backup', e.dir, p.backup], { env });
      return p;
    };
    const derived = (name: string, edit: (db: Database.Database) => void): string => {
      const file = join(root, name);
      copyFileSync(p.backup, file);
      const db = new Database(file);
      try {
        edit(db);
      } finally {
        db.close();
      }
      return file;
    };

    test("restoring another project's backup is refused", async () => {
      await fresh();
      const other = await enrolledProject(join(tmp.dir, 'other'), { env });
      const otherBackup = join(tmp.dir, 'other', 'other.db');
      await svcOk(['auth', 'backup', other.dir, otherBackup], { env });
      const before = contentDigest(p.controlDb);
      assertRefused(
        await svc(['auth', 'restore', p.dir, otherBackup], { env }),
        /^svc auth restore: restore refused: .* is a backup of project prj_\S+, but this project's control database belongs to prj_/,
      );
      assert.equal(contentDigest(p.controlDb), before);
    });

    test('restoring a backup with a newer schema than this build is refused', async () => {
      await fresh();
      const file = derived('newer.db', (db) =>
        db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)").run(),
      );
      const before = contentDigest(p.controlDb);
      assertRefused(
        await svc(['auth', 'restore', p.dir, file], { env }),
        /restore refused: .* has schema version 999, newer than this svc's store supports/,
      );
      assert.equal(contentDigest(p.controlDb), before);
    });

    test('restoring while the service is running on the project is refused', async () => {
      await fresh();
      const server = await serve(p.dir);
      try {
        assertRefused(await svc(['auth', 'restore', p.dir, p.backup], { env }), /restore refused: the control database .* is in use/);
      } finally {
        await server.stop('SIGTERM');
      }
    });

    test('restoring a tampered backup whose audit chain fails is refused', async () => {
      await fresh();
      const file = derived('tampered.db', (db) =>
        db.prepare("UPDATE audit_events SET subject = 'mallory' WHERE seq = (SELECT MIN(seq) FROM audit_events)").run(),
      );
      const before = contentDigest(p.controlDb);
      assertRefused(await svc(['auth', 'restore', p.dir, file], { env }), /restore refused: the audit chain of .* is broken at event #\d+/);
      assert.equal(contentDigest(p.controlDb), before);
    });

    test('restoring over a corrupted control database is refused until it is moved away, then recovers', async () => {
      const e = await enrolledProject(join(tmp.dir, 'corrupt'), { env });
      const backup = join(tmp.dir, 'corrupt', 'backup.db');
      await svcOk(['auth', 'backup', e.dir, backup], { env });
      const controlDb = join(e.dir, '.svc', 'control', 'control.db');
      writeFileSync(controlDb, Buffer.alloc(8192, 0x5a));
      assertRefused(
        await svc(['auth', 'restore', e.dir, backup], { env }),
        /restore refused: the current control database .* cannot be read .*; move it away/,
      );
      renameSync(controlDb, `${controlDb}.broken`);
      await svcOk(['auth', 'restore', e.dir, backup], { env });
      assert.match((await svcOk(['auth', 'audit', 'verify', e.dir], { env })).stdout, /^audit chain ok/);
    });

    test('a backup never overwrites an existing file', async () => {
      await fresh();
      const before = digest(p.backup);
      assertRefused(await svc(['auth', 'backup', p.dir, p.backup], { env }), /backup refused: .* exists/);
      assert.equal(digest(p.backup), before);
      assert.ok(!existsSync(`${p.backup}.partial-${process.pid}`));
    });
  });
});

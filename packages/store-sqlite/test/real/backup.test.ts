import assert from 'node:assert/strict';
import { closeSync, constants, existsSync, openSync, statSync, writeFileSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { createChallenge, enrollWithBootstrapToken, issueBootstrapToken, newId } from '@svc/core';
import { createFakeClock, makeDeps, newDeviceKey, TEST_PROJECT_ID } from '@svc/store-testkit';
import Database from 'better-sqlite3';
import {
  backupSqliteStore,
  lockSqliteStore,
  openSqliteStore,
  readSqliteAccountedState,
  readSqliteBackupInfo,
  type SqliteStore,
  StoreBackupError,
  type StoreBackupProblem,
  verifySqliteBackup,
} from 'svc-store-sqlite';
import { loadMigrations } from '../../src/migrations.js';
import { ownerOnlyTempDir } from '../temp-dir.js';

const temp = await ownerOnlyTempDir('svc-store-sqlite-backup-');
after(() => temp.remove());
let n = 0;
const freshFile = (): string => `${temp.dir}/store-${++n}.db`;

/** Creates `path` empty and owner-only, as the caller of backupSqliteStore does. */
function emptyOwnerOnly(path: string): string {
  closeSync(openSync(path, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600));
  return path;
}

/** A store with a project, an admin device, and a challenge still open (transient state). */
async function seeded(): Promise<{ readonly file: string; readonly store: SqliteStore }> {
  const file = freshFile();
  const store = await openSqliteStore({ file });
  const clock = createFakeClock();
  const deps = makeDeps(store, clock);
  await store.initProject({ projectId: TEST_PROJECT_ID, createdAt: clock.now() });
  const key = newDeviceKey();
  const bootstrap = await issueBootstrapToken(deps, { recovery: false });
  await enrollWithBootstrapToken(deps, { bootstrapToken: bootstrap.token, publicKey: key.publicKey });
  await createChallenge(deps, { publicKey: key.publicKey, realm: 'management' });
  return { file, store };
}

function refused(fn: () => unknown, problem: StoreBackupProblem, names: string): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof StoreBackupError, `expected a StoreBackupError, got ${String(error)}`);
    assert.equal(error.code, 'store_backup_refused');
    assert.equal(error.problem, problem);
    assert.ok(error.message.includes(names), `the message names ${names}: ${error.message}`);
    return true;
  });
}

describe('backupSqliteStore', () => {
  test('copies a serving store into one owner-only, self-contained file without transient state', async () => {
    const { file, store } = await seeded();
    try {
      const copy = emptyOwnerOnly(`${temp.dir}/backup-${++n}.db`);
      const info = backupSqliteStore(file, copy);
      assert.deepEqual(info, { projectId: TEST_PROJECT_ID, schemaVersion: loadMigrations().at(-1)?.version });
      assert.equal(statSync(copy).mode & 0o777, 0o600);
      for (const side of ['-wal', '-shm', '-journal']) assert.equal(existsSync(copy + side), false, `no ${side} beside the copy`);
      const db = new Database(copy, { readonly: true });
      try {
        assert.equal(db.pragma('journal_mode', { simple: true }), 'delete');
        assert.equal((db.prepare('SELECT COUNT(*) AS n FROM challenges').get() as { n: number }).n, 0, 'no open challenge');
        assert.equal((db.prepare('SELECT COUNT(*) AS n FROM devices').get() as { n: number }).n, 1, 'the device is kept');
      } finally {
        db.close();
      }
      // The source is untouched: the copy dropped transient state from itself only.
      assert.equal(readSqliteAccountedState(file).devices.length, 1);
    } finally {
      await store.close();
    }
  });

  test('refuses a source that is not an initialised control database', async () => {
    const empty = freshFile();
    const store = await openSqliteStore({ file: empty });
    await store.close();
    refused(() => backupSqliteStore(empty, emptyOwnerOnly(`${temp.dir}/backup-${++n}.db`)), 'no_project', empty);
  });
});

describe('readSqliteBackupInfo', () => {
  test('refuses a file that is not SQLite, another application database, and a store never initialised', async () => {
    const text = freshFile();
    writeFileSync(text, 'not a database, just text that is long enough to be read as a header '.repeat(10), { mode: 0o600 });
    refused(
      () => readSqliteBackupInfo(text, `restore refused: ${text}`),
      'not_sqlite',
      `restore refused: ${text} is not a SQLite database`,
    );
    const foreign = freshFile();
    const db = new Database(foreign);
    db.exec('CREATE TABLE t (x)');
    db.close();
    refused(() => readSqliteBackupInfo(foreign), 'not_control_store', `${foreign} is not a svc auth control database`);
    const empty = freshFile();
    await (await openSqliteStore({ file: empty })).close();
    refused(() => readSqliteBackupInfo(empty), 'no_project', 'svc auth init');
  });
});

describe('lockSqliteStore', () => {
  test('is refused while a store has the file open, and holds it alone once the store is closed', async () => {
    const { file, store } = await seeded();
    try {
      refused(() => lockSqliteStore(file), 'in_use', file);
    } finally {
      await store.close();
    }
    const lock = lockSqliteStore(file);
    try {
      assert.equal(lock.projectId, TEST_PROJECT_ID);
      // Another connection cannot read it meanwhile (no wait: timeout 0).
      const other = new Database(file, { fileMustExist: true, timeout: 0 });
      try {
        assert.throws(() => other.prepare('SELECT COUNT(*) FROM devices').get(), /locked|busy/i);
      } finally {
        other.close();
      }
    } finally {
      lock.release();
      lock.release();
    }
    assert.equal(readSqliteBackupInfo(file).projectId, TEST_PROJECT_ID, 'readable again once released');
  });

  test('names a file that cannot be read as unreadable, with the reason as cause', () => {
    const text = freshFile();
    writeFileSync(text, 'x'.repeat(4096), { mode: 0o600 });
    assert.throws(
      () => lockSqliteStore(text),
      (error: unknown) => error instanceof StoreBackupError && error.problem === 'unreadable' && error.cause instanceof Error,
    );
  });
});

describe('verifySqliteBackup', () => {
  async function copyOf(): Promise<string> {
    const { file, store } = await seeded();
    await store.close();
    const copy = emptyOwnerOnly(`${temp.dir}/backup-${++n}.db`);
    backupSqliteStore(file, copy);
    return copy;
  }

  async function verdictOf(copy: string) {
    const store = await openSqliteStore({ file: copy });
    try {
      return await verifySqliteBackup(copy, store);
    } finally {
      await store.close();
    }
  }

  test('accepts an intact copy and counts its audit events', async () => {
    const verdict = await verdictOf(await copyOf());
    assert.equal(verdict.ok, true);
    assert.ok(verdict.ok && verdict.auditEvents >= 2, 'the bootstrap token and the enrollment are recorded');
  });

  test('finds an altered audit event', async () => {
    const copy = await copyOf();
    const db = new Database(copy);
    db.prepare("UPDATE audit_events SET subject = 'someone else' WHERE seq = (SELECT MAX(seq) FROM audit_events)").run();
    db.close();
    const verdict = await verdictOf(copy);
    assert.equal(verdict.ok, false);
    assert.ok(!verdict.ok && verdict.problem === 'audit_chain', `got ${JSON.stringify(verdict)}`);
  });

  test('finds a device the audit trail never recorded', async () => {
    const copy = await copyOf();
    const db = new Database(copy);
    const clock = createFakeClock();
    db.prepare(
      "INSERT INTO devices (id, public_key, realm, subject, name, created_at, removed_at) VALUES (?, ?, 'management', ?, 'planted', ?, NULL)",
    ).run(
      newId('device', clock, (k) => Buffer.alloc(k, 7)),
      newDeviceKey().publicKey,
      'sub_planted',
      clock.now(),
    );
    db.close();
    const verdict = await verdictOf(copy);
    assert.equal(verdict.ok, false);
    assert.ok(!verdict.ok && verdict.problem === 'unaccounted' && verdict.unaccounted.length === 1, `got ${JSON.stringify(verdict)}`);
  });
});

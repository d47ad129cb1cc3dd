import assert from 'node:assert/strict';
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { appendFileSync, copyFileSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { digestToken, publicKeyHexOf, signBackup } from '@svc/core';
import { loadProject, restoreProject } from '@svc/runtime';
import Database from 'better-sqlite3';
import { bash, cleanEnv, problemCode, type RunResult, type ServerProcess, SVC_BIN, startServer, tempDir } from '../helpers.js';
// The service is the installed `svc`, spawned, and so is the backup taken under the shell's
// umask (the umask is the process's); the operator's other commands, whose process boundary is
// not the subject here, run in process (svcInProcess).
import {
  enrolledProjectInProcess as enrolledProject,
  keygenInProcess as keygen,
  svcInProcess as svc,
  svcOkInProcess as svcOk,
} from '../in-process.js';
import { loginOverHttp, me, revoke } from '../support/store-projects.js';

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

/** Writes `<file>.sig` as `svc auth backup` would, signed by `key`: a re-signed or forged backup. */
function signAs(file: string, key: KeyObject, now = Date.now()): void {
  const db = new Database(file, { fileMustExist: true, readonly: true });
  let project: string;
  let schemaVersion: number;
  try {
    project = (db.prepare('SELECT project_id FROM project').get() as { project_id: string }).project_id;
    schemaVersion = (db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number }).v;
  } finally {
    db.close();
  }
  const signer = { publicKeyHex: publicKeyHexOf(createPublicKey(key)), sign: (m: Uint8Array) => sign(null, m, key) };
  const signed = signBackup({ project, sha256: digest(file), schemaVersion, now }, signer);
  writeFileSync(`${file}.sig`, `${JSON.stringify(signed)}\n`);
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
    const made = JSON.parse((await svcOk(['auth', 'backup', dir, file, '--json'], { env })).stdout) as { node_public_key: string };
    rmSync(join(dir, '.svc'), { recursive: true, force: true });

    // The node key and its history went with the control directory: nothing vouches for the backup.
    assertRefused(
      await svc(['auth', 'restore', dir, file], { env }),
      /^svc auth restore: restore refused: .* is signed by the key [0-9a-f]{64} .*which is neither this project's node key/,
    );
    assert.ok(!existsSync(join(dir, '.svc', 'control', 'control.db')), 'no control database was put in place');

    // The operator names the node's public key, kept apart from the backup.
    const restored = await svcOk(['auth', 'restore', dir, file, '--trusted-key', made.node_public_key], { env });
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

  test('a backup leaves out transient flow state: provider flows (state, nonce, PKCE verifier), challenges, open pairing attempts and sealed grace pairs', async () => {
    const root = join(tmp.dir, 'transient');
    const { dir, keyFile, publicKey } = await enrolledProject(root, { env });
    const controlDb = join(dir, '.svc', 'control', 'control.db');
    const server = await serve(dir);
    const signedIn = await loginOverHttp(server.url, keyFile, publicKey);
    assert.equal(await server.stop('SIGTERM'), 0);
    const later = Date.now() + 3_600_000;
    const marker = 'Zq7vFlowSecretMarker';
    const live = new Database(controlDb, { fileMustExist: true });
    try {
      // Stands for the pair a rotation sealed for the previous refresh token (opaque here).
      live.prepare('UPDATE sessions SET prev_successor = ? WHERE id = ?').run(`${marker}-grace-pair`, signedIn.session_id);
      live
        .prepare(
          "INSERT INTO flows (id, provider, realm, intent, subject, pairing_intent_id, state, created_at, expires_at) VALUES ('flw_01JDTRANSIENT0000000000000', 'corp', 'application', 'signin', NULL, NULL, ?, 1, ?)",
        )
        .run(JSON.stringify({ state: `${marker}-state`, nonce: `${marker}-nonce`, code_verifier: `${marker}-verifier` }), later);
      live
        .prepare(
          "INSERT INTO challenges (id, public_key, realm, challenge, created_at, expires_at) VALUES ('chl_01JDTRANSIENT0000000000000', ?, 'management', ?, 1, ?)",
        )
        .run('a'.repeat(64), `svc-auth-v1 challenge ${marker}`, later);
      live
        .prepare(
          "INSERT INTO pairing_intents (id, realm, subject, name, code_digest, created_at, expires_at, created_by) VALUES ('pai_01JDTRANSIENT0000000000000', 'management', 'admin', ?, ?, 1, ?, 'admin')",
        )
        .run(`${marker}-pairing`, digestToken(marker), later);
    } finally {
      live.close();
    }
    const file = join(root, 'backup.db');
    await svcOk(['auth', 'backup', dir, file], { env });
    const copy = new Database(file, { fileMustExist: true, readonly: true });
    try {
      for (const table of ['flows', 'challenges', 'pairing_intents']) {
        assert.equal((copy.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n, 0, `no ${table} row in the backup`);
      }
      assert.equal(
        (copy.prepare('SELECT COUNT(*) AS n FROM sessions WHERE prev_successor IS NOT NULL').get() as { n: number }).n,
        0,
        'no sealed grace pair in the backup',
      );
      assert.equal((copy.prepare('SELECT COUNT(*) AS n FROM sessions').get() as { n: number }).n, 1, 'the session itself is kept');
    } finally {
      copy.close();
    }
    assert.equal(readFileSync(file).includes(marker), false, 'no byte of the flow state is left in the file (free pages included)');
    assert.match(
      (await svcOk(['auth', 'restore', dir, file], { env })).stdout,
      /^restored project prj_\S+ \(schema \d+, audit chain ok: \d+ events/,
    );
  });

  test('a backup signed by the node key before a key rotation restores with --trusted-key naming that key, and is refused without it', async () => {
    const root = join(tmp.dir, 'rotated');
    const { dir } = await enrolledProject(root, { env });
    const file = join(root, 'backup.db');
    const made = JSON.parse((await svcOk(['auth', 'backup', dir, file, '--json'], { env })).stdout) as { node_public_key: string };
    assert.match(made.node_public_key, /^[0-9a-f]{64}$/, 'the backup names the node key that signed it');
    await svcOk(['node', 'rotate-key', dir], { env });
    const now = createPublicKey(createPrivateKey(readFileSync(join(dir, '.svc', 'control', 'node-key.pem'), 'utf8')));
    assert.notEqual(publicKeyHexOf(now), made.node_public_key, 'the node key was rotated');
    const refused = await svc(['auth', 'restore', dir, file], { env });
    assert.equal(refused.code, 1, refused.stderr);
    assert.ok(
      refused.stderr.includes(`retired node key ${made.node_public_key}`) &&
        refused.stderr.includes(`--trusted-key ${made.node_public_key}`),
      `the refusal names the retired key and how to accept it: ${refused.stderr}`,
    );
    const restored = JSON.parse(
      (await svcOk(['auth', 'restore', dir, file, '--trusted-key', made.node_public_key, '--json'], { env })).stdout,
    ) as { signed_by: string };
    assert.equal(restored.signed_by, made.node_public_key);
  });

  test('backup-backdated-by-leaked-retired-key: a file signed by a retired node key with `at` inside its window is refused without --trusted-key', async () => {
    const root = join(tmp.dir, 'backdated');
    const { dir } = await enrolledProject(root, { env });
    const keyFile = join(dir, '.svc', 'control', 'node-key.pem');
    const leaked = createPrivateKey(readFileSync(keyFile, 'utf8'));
    const file = join(root, 'backup.db');
    await svcOk(['auth', 'backup', dir, file], { env });
    const signedAt = Date.parse((JSON.parse(readFileSync(`${file}.sig`, 'utf8')) as { payload: { at: string } }).payload.at);
    await svcOk(['node', 'rotate-key', dir], { env });
    const controlDb = join(dir, '.svc', 'control', 'control.db');
    const before = contentDigest(controlDb);
    // After the rotation, the holder of the leaked old key makes another file and dates it inside the key's window.
    const forged = join(root, 'forged.db');
    copyFileSync(file, forged);
    const db = new Database(forged);
    try {
      db.prepare("UPDATE devices SET name = 'mallory'").run();
    } finally {
      db.close();
    }
    signAs(forged, leaked, signedAt);
    const r = await svc(['auth', 'restore', dir, forged], { env });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /^svc auth restore: restore refused: .* is signed by the retired node key [0-9a-f]{64} /);
    assert.equal(contentDigest(controlDb), before, 'the control database is untouched');
  });

  test('a restore refused by a damaged store install names the project directory in its reinstall hint, not <PROJECT>', async () => {
    const root = join(tmp.dir, 'hint');
    const { dir } = await enrolledProject(root, { env });
    const file = join(root, 'backup.db');
    await svcOk(['auth', 'backup', dir, file], { env });
    const packages = join(dir, '.svc', 'packages');
    const archive = readdirSync(packages).find((f) => f.startsWith('svc-store-sqlite-') && f.endsWith('.tgz'));
    assert.ok(archive !== undefined, `the store archive is kept in ${packages}`);
    appendFileSync(join(packages, archive), 'x');
    const r = await svc(['auth', 'restore', dir, file], { env });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /svc package install \S+ --sha256 [0-9a-f]{64} \S*hint\/project`/);
    assert.doesNotMatch(r.stderr, /<PROJECT>/);
  });

  test('two restores within one second keep both replaced control databases (no clash of pre-restore names)', async () => {
    const root = join(tmp.dir, 'twice');
    const { dir } = await enrolledProject(root, { env });
    const file = join(root, 'backup.db');
    await svcOk(['auth', 'backup', dir, file], { env });
    const project = loadProject(dir, { profile: null, env });
    const at = new Date('2026-11-27T10:00:00.250Z');
    const first = await restoreProject(project, file, { now: at });
    const second = await restoreProject(project, file, { now: new Date(at.getTime() + 500) });
    assert.ok(first.preRestore !== null && second.preRestore !== null);
    assert.notEqual(first.preRestore, second.preRestore);
    assert.ok(existsSync(first.preRestore) && existsSync(second.preRestore), 'both replaced control databases are kept');
    assert.equal(mode(second.preRestore), 0o600);
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
    const nodeKey = () => createPrivateKey(readFileSync(join(p.dir, '.svc', 'control', 'node-key.pem'), 'utf8'));
    /**
     * A copy of the good backup changed by `edit`, with a signature: the original one kept
     * (`keep`: the attacker cannot sign), none (`strip`), one by the project's own node key
     * (`node`: what only a holder of the node key could do; the checks after the signature's
     * are reached) or one by a key of the attacker's (`forged`).
     */
    const derived = (
      name: string,
      edit: (db: Database.Database) => void,
      signature: 'keep' | 'strip' | 'node' | 'forged' = 'node',
    ): string => {
      const file = join(root, name);
      copyFileSync(p.backup, file);
      const db = new Database(file);
      try {
        edit(db);
      } finally {
        db.close();
      }
      if (signature === 'keep') copyFileSync(`${p.backup}.sig`, `${file}.sig`);
      else if (signature === 'node') signAs(file, nodeKey());
      else if (signature === 'forged') signAs(file, generateKeyPairSync('ed25519').privateKey);
      return file;
    };
    /** Restoring `file` is refused with one line matching `pattern`, and the control database is as it was. */
    const refusedUntouched = async (file: string, pattern: RegExp): Promise<void> => {
      const before = contentDigest(p.controlDb);
      assertRefused(await svc(['auth', 'restore', p.dir, file], { env }), pattern);
      assert.equal(contentDigest(p.controlDb), before, 'the control database is untouched');
    };
    const attackerKey = publicKeyHexOf(createPublicKey(generateKeyPairSync('ed25519').privateKey));
    const replaceAdminKey = (db: Database.Database) => db.prepare('UPDATE devices SET public_key = ?').run(attackerKey);
    const insertDevice = (db: Database.Database) =>
      db
        .prepare(
          "INSERT INTO devices (id, public_key, realm, subject, name, created_at) VALUES ('dev_01JDMALLORY00000000000000', ?, 'management', 'mallory', 'evil', 1)",
        )
        .run(attackerKey);
    const insertSession = (db: Database.Database) => {
      const device = db.prepare('SELECT id, subject FROM devices LIMIT 1').get() as { id: string; subject: string };
      const far = Date.now() + 86_400_000;
      db.prepare(
        `INSERT INTO sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at, refresh_digest, refresh_expires_at)
         VALUES ('ses_01JDMALLORY00000000000000', 'management', ?, ?, 1, ?, ?, ?, ?, ?)`,
      ).run(device.subject, device.id, far, digestToken('svca_mallory'), far, digestToken('svcr_mallory'), far);
    };

    test('a backup whose management device key was replaced by an attacker key is refused', async () => {
      await fresh();
      await refusedUntouched(
        derived('key-swapped.db', replaceAdminKey, 'keep'),
        /^svc auth restore: restore refused: the signature of .* does not hold: the file is not the one that was signed/,
      );
    });

    test('a backup with an inserted management device is refused', async () => {
      await fresh();
      await refusedUntouched(
        derived('device-inserted.db', insertDevice, 'keep'),
        /^svc auth restore: restore refused: the signature of .* does not hold/,
      );
    });

    test('a backup with an inserted session is refused', async () => {
      await fresh();
      await refusedUntouched(
        derived('session-inserted.db', insertSession, 'keep'),
        /^svc auth restore: restore refused: the signature of .* does not hold/,
      );
    });

    test('a backup whose signature was stripped is refused', async () => {
      await fresh();
      await refusedUntouched(
        derived('stripped.db', () => {}, 'strip'),
        /^svc auth restore: restore refused: .* is not signed: no .*\.sig beside it/,
      );
    });

    test('a tampered backup re-signed by a key the project does not trust (a forged signature) is refused', async () => {
      await fresh();
      await refusedUntouched(
        derived('forged.db', insertDevice, 'forged'),
        /^svc auth restore: restore refused: .* is signed by the key [0-9a-f]{64} .*which is neither this project's node key/,
      );
    });

    test('a backup whose signature was edited to name another file is refused', async () => {
      await fresh();
      const file = derived('edited-sig.db', insertDevice, 'keep');
      const sig = JSON.parse(readFileSync(`${file}.sig`, 'utf8')) as { payload: { sha256: string } };
      sig.payload.sha256 = digest(file);
      writeFileSync(`${file}.sig`, JSON.stringify(sig));
      await refusedUntouched(file, /^svc auth restore: restore refused: the signature of .* does not hold: the signature does not verify/);
    });

    test('a backup signed with the node key but holding a device its audit trail never enrolled is refused', async () => {
      await fresh();
      await refusedUntouched(
        derived('resigned-device.db', insertDevice),
        /^svc auth restore: restore refused: .* holds state its audit trail does not account for: device dev_01JDMALLORY/,
      );
    });

    test('a backup signed with the node key but whose admin device key was replaced is refused', async () => {
      await fresh();
      await refusedUntouched(
        derived('resigned-key.db', replaceAdminKey),
        /^svc auth restore: restore refused: .* holds state its audit trail does not account for: device dev_/,
      );
    });

    test('a backup signed with the node key but holding a session its audit trail never created is refused', async () => {
      await fresh();
      await refusedUntouched(
        derived('resigned-session.db', insertSession),
        /^svc auth restore: restore refused: .* holds state its audit trail does not account for: session ses_01JDMALLORY/,
      );
    });

    test('a backup signed with the node key but holding a bootstrap token its audit trail never issued is refused (it would enrol an admin after the restore)', async () => {
      await fresh();
      const token = `svcb_${randomBytes(32).toString('base64url')}`;
      const planted = derived('resigned-bootstrap.db', (db) =>
        db
          .prepare('INSERT INTO bootstrap_tokens (id, digest, created_at, expires_at) VALUES (?, ?, ?, ?)')
          .run('bt_01JDMALLORY00000000000000', digestToken(token), Date.now(), Date.now() + 86_400_000),
      );
      await refusedUntouched(
        planted,
        /^svc auth restore: restore refused: .* holds state its audit trail does not account for: bootstrap token bt_01JDMALLORY/,
      );
    });

    test('a backup signed with the node key but holding an open pairing intent its audit trail never prepared is refused', async () => {
      await fresh();
      const planted = derived('resigned-intent.db', (db) =>
        db
          .prepare(
            `INSERT INTO pairing_intents (id, realm, subject, code_digest, created_at, expires_at, created_by)
             VALUES ('int_01JDMALLORY00000000000000', 'management', 'mallory', ?, 1, ?, 'mallory')`,
          )
          .run('ab'.repeat(32), Date.now() + 86_400_000),
      );
      await refusedUntouched(
        planted,
        /^svc auth restore: restore refused: .* holds state its audit trail does not account for: pairing intent int_01JDMALLORY/,
      );
    });

    test('a backup signed with the node key but with a removed device made active again is refused', async () => {
      const e = await enrolledProject(join(tmp.dir, 'unremove'), { env });
      const second = await keygen(join(tmp.dir, 'unremove', 'second.pem'), { env });
      const boot = JSON.parse((await svcOk(['auth', 'init', e.dir, '--recover', '--json'], { env })).stdout) as { bootstrap_token: string };
      const enrolled = JSON.parse((await svcOk(['auth', 'enroll', boot.bootstrap_token, second, e.dir, '--json'], { env })).stdout) as {
        device: { id: string };
      };
      await svcOk(['auth', 'devices', 'remove', enrolled.device.id, e.dir], { env });
      const file = join(tmp.dir, 'unremove', 'backup.db');
      await svcOk(['auth', 'backup', e.dir, file], { env });
      const db = new Database(file);
      try {
        db.prepare('UPDATE devices SET removed_at = NULL WHERE id = ?').run(enrolled.device.id);
      } finally {
        db.close();
      }
      signAs(file, createPrivateKey(readFileSync(join(e.dir, '.svc', 'control', 'node-key.pem'), 'utf8')));
      const controlDb = join(e.dir, '.svc', 'control', 'control.db');
      const before = contentDigest(controlDb);
      assertRefused(
        await svc(['auth', 'restore', e.dir, file], { env }),
        new RegExp(`holds state its audit trail does not account for: device ${enrolled.device.id} was removed but is active`),
      );
      assert.equal(contentDigest(controlDb), before);
    });

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

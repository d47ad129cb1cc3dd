import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  appendFileSync,
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cleanEnv, run, SVC_BIN, tempDir } from '../helpers.js';
// Verification is the CLI's own check before it opens the store: those `svc` runs are in
// process (svcInProcess). The umask test keeps a spawned `svc`, as the umask it inherits is the
// subject.
import { enrolledProjectInProcess as enrolledProject, svcInProcess as svc } from '../in-process.js';

const ADDON = 'svc-store-sqlite@0.1.0';

/** What the refusal line names, e.g. `installed_files`; undefined when it is not a refusal line. */
function refusedCheck(stderr: string): string | undefined {
  return /^svc [a-z ]+: store addon svc-store-sqlite@0\.1\.0 failed verification \(([a-z_]+)\): .+ \(the control database was not opened\)$/.exec(
    stderr.trim(),
  )?.[1];
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Every byte and timestamp of the control database and its WAL/SHM files (null when absent). */
function dbState(dir: string): Record<string, { size: number; mtimeMs: number; sha256: string } | null> {
  const state: Record<string, { size: number; mtimeMs: number; sha256: string } | null> = {};
  for (const suffix of ['', '-wal', '-shm', '-journal']) {
    const file = join(dir, '.svc', 'control', `control.db${suffix}`);
    if (!existsSync(file)) state[suffix || 'db'] = null;
    else {
      const st = statSync(file);
      state[suffix || 'db'] = { size: st.size, mtimeMs: st.mtimeMs, sha256: sha256(readFileSync(file)) };
    }
  }
  return state;
}

// Split from addon-verification.test.ts so each file stays well within the per-file test timeout on a loaded machine.
describe('tampering with what an addon loads from outside its archive stops every command before the control database is opened', () => {
  const tmp = tempDir('svc-addon-tamper-');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  after(() => tmp.cleanup());

  let n = 0;
  /** A project initialised with the bundled SQLite addon and an enrolled admin (so the database holds state). */
  async function project(): Promise<string> {
    const p = await enrolledProject(join(tmp.dir, `p${++n}`), { env });
    assert.ok(existsSync(join(p.dir, '.svc', 'control', 'control.db')));
    return p.dir;
  }

  const installDir = (dir: string) => join(dir, '.svc', 'packages', ADDON);

  /**
   * `svc auth serve` and `svc auth devices` on `dir` both exit 1 with the one refusal line
   * naming `check`, and leave the control database byte for byte, timestamp for timestamp,
   * as it was.
   */
  async function assertRefused(dir: string, check: string): Promise<void> {
    const before = dbState(dir);
    assert.notEqual(before.db, null);
    for (const args of [
      ['auth', 'serve', '--listen', '127.0.0.1:0', dir],
      ['auth', 'devices', dir],
    ]) {
      const r = await svc(args, { env });
      assert.equal(r.code, 1, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.stdout, '');
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.equal(refusedCheck(r.stderr), check, r.stderr);
    }
    assert.deepEqual(dbState(dir), before, 'the control database and its WAL are untouched');
  }

  test('a node_modules link retargeted at a modified better-sqlite3 is refused before the attacker code runs (dependencies)', async () => {
    const dir = await project();
    const marker = join(tmp.dir, `evil-sqlite-ran-${n}`);
    // The attacker's dependencies: every package of the real ones, linked, except a copy of
    // better-sqlite3 whose entry leaves a trace when it is loaded.
    const real = dirname(realpathSync(join(installDir(dir), 'node_modules', 'better-sqlite3')));
    const evil = join(tmp.dir, `evil-node_modules-${n}`);
    mkdirSync(evil);
    for (const name of readdirSync(real)) {
      if (name === 'better-sqlite3') cpSync(join(real, name), join(evil, name), { recursive: true, dereference: true });
      else symlinkSync(join(real, name), join(evil, name));
    }
    appendFileSync(
      join(evil, 'better-sqlite3', 'lib', 'index.js'),
      `\nrequire('node:fs').writeFileSync(${JSON.stringify(marker)}, 'ran');\n`,
    );
    rmSync(join(installDir(dir), 'node_modules'));
    symlinkSync(evil, join(installDir(dir), 'node_modules'));
    await assertRefused(dir, 'dependencies');
    assert.equal(existsSync(marker), false, 'the modified better-sqlite3 was never loaded');
  });

  test('permissions: a group-writable packages directory (umask 002) is refused before anything is loaded', async () => {
    const dir = await project();
    chmodSync(join(dir, '.svc', 'packages'), 0o770);
    await assertRefused(dir, 'permissions');
  });

  test('a project created under umask 002 is owner-only: project.edn, .svc and every installed file', async () => {
    const target = join(tmp.dir, `umask-${++n}`);
    const r = await run('sh', ['-c', `umask 002 && exec "$0" "$@"`, process.execPath, SVC_BIN, 'auth', 'init', target], { env });
    assert.equal(r.code, 0, r.stderr);
    const groupOrWorldWritable: string[] = [];
    for (const rel of ['', 'project.edn', ...readdirSync(target, { recursive: true }).map(String)]) {
      const st = lstatSync(join(target, rel));
      if (!st.isSymbolicLink() && (st.mode & 0o022) !== 0) groupOrWorldWritable.push(`${rel || '.'} ${(st.mode & 0o777).toString(8)}`);
    }
    assert.deepEqual(groupOrWorldWritable, []);
    assert.equal(statSync(join(target, 'project.edn')).mode & 0o777, 0o600);
    assert.equal(statSync(join(target, '.svc', 'packages')).mode & 0o777, 0o700);
  });
});

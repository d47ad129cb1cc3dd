import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  accessSync,
  constants,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { REPO_ROOT } from '../repo.js';

const REPO = REPO_ROOT.replace(/\/$/, '');
/** An install of the whole tree on a loaded 2-core machine. */
const INSTALL_TIMEOUT_MS = 15 * 60_000;

/** The environment of a user's shell: none of npm's per-script variables, none of ours. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('npm_') || k.startsWith('SVC_') || k === 'NODE_OPTIONS' || k === 'INIT_CWD') continue;
    env[k] = v;
  }
  return { ...env, npm_config_fund: 'false', npm_config_audit: 'false', npm_config_update_notifier: 'false', ...extra };
}

function sh(cmd: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv = userEnv()): { code: number; out: string } {
  const r = spawnSync(cmd, [...args], { cwd, env, encoding: 'utf8', timeout: INSTALL_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 });
  if (r.error !== undefined) throw r.error;
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

/**
 * A clone of this repository as it is now, alone in an empty folder: `git clone`, then the
 * working tree's uncommitted changes and new files on top (on CI, a clean checkout, there
 * are none), so the test judges the code under test and not the last commit.
 */
function freshClone(): { root: string; dir: string } {
  const root = mkdtempSync(join(tmpdir(), 'svc-fresh-clone-'));
  const dir = join(root, 'svc-auth');
  execFileSync('git', ['clone', '--quiet', REPO, dir]);
  const patch = execFileSync('git', ['-C', REPO, 'diff', 'HEAD', '--binary'], { maxBuffer: 256 * 1024 * 1024 });
  if (patch.length > 0) {
    writeFileSync(join(root, 'work.patch'), patch);
    execFileSync('git', ['-C', dir, 'apply', '--whitespace=nowarn', join(root, 'work.patch')]);
    rmSync(join(root, 'work.patch'));
  }
  const untracked = execFileSync('git', ['-C', REPO, 'ls-files', '--others', '--exclude-standard', '-z'], { encoding: 'utf8' })
    .split('\0')
    .filter((f) => f !== '');
  for (const f of untracked) {
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    copyFileSync(join(REPO, f), join(dir, f));
  }
  return { root, dir };
}

/**
 * better-sqlite3's install script (prebuild-install) unpacks a prebuilt binary when it finds one
 * and compiles SQLite from source only when it finds none. A user's `npm ci` downloads that
 * binary from the package's releases; this machine reaches no network beyond the registries, so
 * the clone compiled SQLite for minutes. The binary this checkout's own install holds (the same
 * locked version, for this Node) is packed the way those releases are and offered to the clone's
 * install as a local prebuild (prebuild-install's `local-prebuilds` setting): the clone's
 * `npm ci` runs every install script as a user's does; the compile is left to `.ci/run`'s own
 * `npm ci`.
 */
function offerLocalBetterSqlitePrebuild(root: string, clone: string): void {
  const pkgDir = join(REPO, 'node_modules', 'better-sqlite3');
  const { version } = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as { version: string };
  const lock = JSON.parse(readFileSync(join(clone, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version?: string }>;
  };
  assert.equal(lock.packages['node_modules/better-sqlite3']?.version, version, 'the clone locks the better-sqlite3 this checkout has');
  const binary = join('build', 'Release', 'better_sqlite3.node');
  assert.ok(existsSync(join(pkgDir, binary)), `${join(pkgDir, binary)} is missing: run npm ci in this checkout first`);
  const dir = join(root, 'prebuilds');
  mkdirSync(dir);
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  execFileSync('tar', ['-czf', join(dir, name), '-C', pkgDir, binary]);
  // prebuild-install reads its settings from a .prebuild-installrc in any folder above the
  // package (rc): this one is in the clone's parent, outside the repository, and no other
  // install reads it. (An npm_config_ variable npm itself warns about as an unknown config; a
  // prebuild-install_ variable does not survive the sh that runs install scripts.)
  writeFileSync(join(root, '.prebuild-installrc'), `local-prebuilds=${dir}\n`);
}

function assertSvcLinked(dir: string, after: string): void {
  const link = join(dir, 'node_modules', '.bin', 'svc');
  assert.ok(
    existsSync(link),
    `after ${after}, node_modules/.bin/svc does not exist: \`npx svc\` would ask the registry for a stranger's package`,
  );
  assert.equal(readlinkSync(link), '../@svc/cli/bin/svc.js', `after ${after}, svc links somewhere else`);
  accessSync(link, constants.X_OK);
}

describe('the README on a fresh clone', { timeout: 40 * 60_000 }, () => {
  let clone: { root: string; dir: string };
  /** `git status` of the clone before anything ran: the code under test, nothing else. */
  let baseline: string;
  const status = (): string =>
    execFileSync('git', ['-C', clone.dir, 'status', '--porcelain', '--untracked-files=all'], { encoding: 'utf8' });
  before(() => {
    clone = freshClone();
    baseline = status();
  });
  after(() => rmSync(clone.root, { recursive: true, force: true }));

  // Three installs of the whole tree: far over the runner's default per-test limit on a loaded machine.
  test('npm ci, npm install and a second npm ci each link this repository’s svc, and npx svc never reaches the registry', {
    timeout: 30 * 60_000,
  }, () => {
    // Linking does not depend on install scripts; these two runs skip them to save the compile.
    let r = sh('npm', ['ci', '--ignore-scripts', '--prefer-offline'], clone.dir);
    assert.equal(r.code, 0, r.out);
    assertSvcLinked(clone.dir, 'npm ci');
    r = sh('npm', ['install', '--ignore-scripts', '--prefer-offline'], clone.dir);
    assert.equal(r.code, 0, r.out);
    assertSvcLinked(clone.dir, 'npm install');
    // The README's own command, scripts and all: it builds, and installs with no engine warning.
    offerLocalBetterSqlitePrebuild(clone.root, clone.dir);
    r = sh('npm', ['ci', '--prefer-offline'], clone.dir);
    assert.ok(
      !existsSync(join(clone.dir, 'node_modules', 'better-sqlite3', 'build', 'Makefile')),
      'better-sqlite3 was compiled: its install did not take the local prebuild',
    );
    assert.equal(r.code, 0, r.out);
    assertSvcLinked(clone.dir, 'a second npm ci');
    assert.doesNotMatch(r.out, /EBADENGINE/, 'npm ci warns about an engine');
    // With a registry nothing answers on, npx can only run the linked svc.
    r = sh('npx', ['svc', '--version'], clone.dir, userEnv({ npm_config_registry: 'http://127.0.0.1:9/' }));
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /^0\.\d+\.\d+$/m);
  });

  test('the README walkthrough, run command by command on the clone, prints what README.md shows', { timeout: 10 * 60_000 }, () => {
    assert.ok(existsSync(join(clone.dir, 'node_modules', '.bin', 'svc')), 'the install test must run first');
    const r = sh(process.execPath, [join(clone.dir, 'scripts', 'walkthrough.mjs'), '--check'], clone.dir);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /all \d+ steps match a real run/);
  });

  test('nothing the install or the walkthrough wrote is left for git or a container build to pick up', () => {
    // Keys and credentials went to the scratch home, ./demo was removed, builds are ignored.
    assert.equal(status(), baseline);
  });
});

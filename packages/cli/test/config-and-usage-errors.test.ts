import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { svc, tempDir } from './helpers.js';
import { bundledSha256 } from './support/store-projects.js';

// Pinned by the bundled archive's real digest, as `svc auth init` would write it.
const GOOD = `{:svc/project "demo"
 :svc/packages {"svc-store-sqlite" {:version "0.1.0" :sha256 "${bundledSha256('svc-store-sqlite')}"}}
 :svc/modules {:store {:package "svc-store-sqlite" :activate [:svc/store]}
               :auth {:module :svc/auth :config {:auth/store :store}}}}`;

describe('configuration errors are refused at load with the file and the key (exit 1)', () => {
  const tmp = tempDir();
  after(() => tmp.cleanup());

  async function initWith(name: string, edn: string, extraArgs: string[] = []) {
    const dir = join(tmp.dir, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'project.edn'), edn);
    return { dir, r: await svc(['auth', 'init', dir, ...extraArgs]) };
  }

  const cases: [string, string, string][] = [
    ['unknown-key', GOOD.replace('{:svc/project "demo"', '{:svc/project "demo" :svc/colour "blue"'), ':svc/colour'],
    [
      'wrong-type',
      GOOD.replace(':auth/store :store}', ':auth/store :store :auth/access-token-ttl-seconds "900"}'),
      ':auth/access-token-ttl-seconds',
    ],
    ['dangling-alias', GOOD.replace(':auth/store :store}', ':auth/store :db}'), ':auth/store'],
    ['weakening-key', GOOD.replace(':auth/store :store}', ':auth/store :store :auth/dev-mode true}'), ':auth/dev-mode'],
    ['project-not-a-string', GOOD.replace('{:svc/project "demo"', '{:svc/project 42'), ':svc/project'],
    ['truncated', GOOD.slice(0, -3), '(top level)'],
    ['unpinned-store-package', GOOD.replace(':store {:package "svc-store-sqlite"', ':store {:package "svc-store-other"'), ':package'],
  ];
  for (const [name, edn, key] of cases) {
    test(`${name}: exit 1, the file and ${key} named, nothing created`, async () => {
      const { dir, r } = await initWith(name, edn);
      assert.equal(r.code, 1);
      assert.equal(r.stdout, '');
      assert.ok(r.stderr.includes(join(dir, 'project.edn')), r.stderr);
      assert.ok(r.stderr.includes(key), r.stderr);
      assert.equal((await svc(['auth', 'audit', 'verify', dir])).code, 1, 'no control database was created');
    });
  }

  test('every problem is reported at once', async () => {
    const edn = GOOD.replace('{:svc/project "demo"', '{:svc/project "demo" :a 1 :b 2');
    const { r } = await initWith('many', edn);
    assert.equal(r.code, 1);
    assert.ok(r.stderr.includes(':a:') && r.stderr.includes(':b:'), r.stderr);
  });

  test('an unknown --profile is refused; a defined profile applies', async () => {
    const edn = GOOD.replace('{:svc/project "demo"', '{:svc/project "demo" :svc/profiles {:dev {:svc/control-dir "dev-control"}}');
    const bad = await initWith('profile-bad', edn, ['--profile', 'nope']);
    assert.equal(bad.r.code, 1);
    const ok = await initWith('profile-ok', edn, ['--profile', 'dev', '--json']);
    assert.equal(ok.r.code, 0, ok.r.stderr);
    assert.equal(JSON.parse(ok.r.stdout).control_db, join(ok.dir, 'dev-control', 'control.db'));
  });
});

describe('usage errors exit 2', () => {
  // `svc` alone is a request for help (exit 0); `svc auth login` and `svc auth pubkey` use the
  // default device key now, so without one they are refusals (exit 1), tested where keys are.
  const cases: string[][] = [
    ['frobnicate'],
    ['auth', 'frobnicate'],
    ['auth', 'init'],
    ['auth', 'init', 'a', 'b'],
    ['auth', 'init', 'demo', '--bogus'],
    ['auth', 'enroll', 'svcb_x', 'a', 'b', 'c'],
    ['auth', 'serve', '--listen'],
    ['auth', 'login', 'extra'],
    ['auth', 'pubkey', '--key'],
    ['auth', 'devices', 'demo', '--realm', 'nope'],
  ];
  for (const args of cases) {
    test(`svc ${args.join(' ') || '(nothing)'} exits 2`, async () => {
      const r = await svc(args);
      assert.equal(r.code, 2, r.stderr);
    });
  }

  test('--help works on every command and exits 0', async () => {
    const commands = [
      ['auth', 'init'],
      ['auth', 'enroll'],
      ['auth', 'serve'],
      ['serve'],
      ['auth', 'keygen'],
      ['auth', 'pubkey'],
      ['auth', 'login'],
      ['auth', 'whoami'],
      ['auth', 'refresh'],
      ['auth', 'logout'],
      ['auth', 'devices'],
      ['auth', 'devices', 'remove'],
      ['auth', 'sessions'],
      ['auth', 'sessions', 'revoke'],
      ['auth', 'audit'],
      ['auth', 'audit', 'verify'],
    ];
    for (const c of commands) {
      const r = await svc([...c, '--help']);
      assert.equal(r.code, 0, c.join(' '));
      assert.ok(r.stdout.includes(`svc ${c.join(' ')}`), c.join(' '));
    }
    assert.equal((await svc(['--help'])).code, 0);
  });
});

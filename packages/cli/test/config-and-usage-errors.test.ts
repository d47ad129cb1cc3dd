import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cleanEnv, tempDir } from './helpers.js';
// In process: configuration and usage errors are what `main` prints and returns before any
// listener exists; the process boundary is not the subject.
import { svcInProcess as svc } from './in-process.js';
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
    ['truncated', GOOD.slice(0, -3), 'project.edn:4:22: the map opened here is never closed'],
    [
      'bad-require-group',
      GOOD.replace('{:svc/project "demo"', '{:svc/project "demo" :svc/app-require {"/ops/*" {:groups ["Tour Guides"]}}'),
      ':svc/app-require "/ops/*" :groups: expected a non-empty vector of group names',
    ],
    [
      'bad-require-email-domain',
      GOOD.replace('{:svc/project "demo"', '{:svc/project "demo" :svc/app-require {"/staff/*" {:email-domains ["@example.com"]}}'),
      ':svc/app-require "/staff/*" :email-domains: expected a non-empty vector of email domains (e.g. "example.com"), found string "@example.com"',
    ],
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

describe('serving a bad project.edn is refused before anything listens: one line per problem, exit 1', () => {
  const tmp = tempDir();
  after(() => tmp.cleanup());

  function projectWith(name: string, edn: string): string {
    const dir = join(tmp.dir, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'project.edn'), edn, { mode: 0o600 });
    return dir;
  }
  const withModule = (module: string) => GOOD.replace(':auth {:module :svc/auth', `${module}\n               :auth {:module :svc/auth`);
  const withProfiles = (profiles: string) => GOOD.replace('{:svc/project "demo"', `{:svc/project "demo" :svc/profiles ${profiles}`);

  /** Runs `args` on the project and checks the refusal: exit 1, nothing on stdout, exactly `lines` lines naming the file. */
  async function refused(args: string[], dir: string, lines: number) {
    const r = await svc([...args, dir], { env: cleanEnv({ SVC_NODE_LISTEN: 'off' }) });
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout, '');
    const out = r.stderr.trimEnd().split('\n');
    assert.equal(out.length, lines, r.stderr);
    for (const line of out.slice(0, lines === 1 ? 1 : -1)) assert.ok(line.includes(join(dir, 'project.edn')), line);
    return r.stderr;
  }

  test('a module activating :svc/auth-provider with no trusted publisher, from the control store package, is refused by svc serve', async () => {
    const dir = projectWith('provider', withModule(':idp {:package "svc-store-sqlite" :activate [:svc/auth-provider]}'));
    const stderr = await refused(['serve'], dir, 3);
    assert.match(
      stderr,
      /:svc\/modules :idp :activate: package "svc-store-sqlite" may not activate the privileged export :svc\/auth-provider: provider packages must be signed/,
    );
    assert.match(stderr, /:svc\/modules :idp :package: package "svc-store-sqlite" holds the control store/);
  });

  test('a module carrying a literal secret is refused by svc auth serve; a secret reference is not', async () => {
    const pinned = (config: string) =>
      withModule(`:idp {:package "acme-idp" :config {:idp/client-secret ${config}}}`).replace(
        ':svc/packages {',
        ':svc/packages {"acme-idp" {:version "1.0.0"} ',
      );
    const stderr = await refused(['auth', 'serve', '--listen', '127.0.0.1:0'], projectWith('literal-secret', pinned('"hunter2"')), 1);
    assert.match(stderr, /:svc\/modules :idp :config :idp\/client-secret: secrets are never written in project\.edn/);
    // With the reference the file loads: what refuses it next is the missing control database.
    const r = await svc(['auth', 'serve', '--listen', '127.0.0.1:0', projectWith('secret-ref', pinned('#svc/secret "env:IDP_SECRET"'))]);
    assert.equal(r.code, 1);
    assert.doesNotMatch(r.stderr, /:idp/, r.stderr);
  });

  test('an :svc/app-brand logo that is missing, or an accent too light for white text, is refused at load naming the file and key', async () => {
    const withBrand = (brand: string) => GOOD.replace('{:svc/project "demo"', `{:svc/project "demo" :svc/app-brand ${brand}`);
    const dir = projectWith('brand', withBrand('{:name "Acme" :logo "brand/logo.png" :accent "#fde047"}'));
    const stderr = await refused(['serve'], dir, 3);
    assert.match(stderr, /:svc\/app-brand :logo: cannot read "brand\/logo\.png": .*brand\/logo\.png does not exist/);
    assert.match(stderr, /:svc\/app-brand :accent: #fde047 is too light for the white text on it/);
    // With the file in place (relative to the project directory) and a dark accent, it loads.
    mkdirSync(join(dir, 'brand'));
    writeFileSync(join(dir, 'brand', 'logo.png'), Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'));
    writeFileSync(join(dir, 'project.edn'), withBrand('{:name "Acme" :logo "brand/logo.png" :accent "#0f766e"}'));
    const r = await svc(['auth', 'serve', '--listen', '127.0.0.1:0', dir]);
    assert.doesNotMatch(r.stderr, /app-brand/, r.stderr);
  });

  test('an unselected profile with a bad value is refused at load by svc serve', async () => {
    const dir = projectWith('bad-profile', withProfiles('{:prod {:svc/node-listen 9091}}'));
    const stderr = await refused(['serve'], dir, 1);
    assert.match(stderr, /:svc\/profiles :prod :svc\/node-listen: expected "host:port", found number 9091/);
  });

  test("an unselected profile's store configuration is checked at load, not when that profile first opens the store", async () => {
    const dir = projectWith('bad-store-profile', withProfiles('{:prod {:svc/modules {:store {:config {:store/synchronous "fast"}}}}}'));
    const stderr = await refused(['auth', 'serve', '--listen', '127.0.0.1:0'], dir, 1);
    assert.match(stderr, /:svc\/profiles :prod :svc\/modules :store :config :store\/synchronous: expected one of "normal", "full"/);
  });

  test('the problems of every profile and of the base are reported at once', async () => {
    const edn = withProfiles('{:a {:svc/control-dir 1} :b {:svc/metrics-listen true}}').replace(
      ':activate [:svc/store]}',
      ':activate [:svc/store :svc/bogus]}',
    );
    const stderr = await refused(['serve'], projectWith('many-profiles', edn), 4);
    assert.match(stderr, /:svc\/modules :store :activate: unknown capability :svc\/bogus/);
    assert.match(stderr, /:svc\/profiles :a :svc\/control-dir:/);
    assert.match(stderr, /:svc\/profiles :b :svc\/metrics-listen:/);
    assert.match(stderr, /\(3 problems\)/);
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

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { installAddon } from '@svc/addons';
import { type PackedAddon, packAddon } from '@svc/addons/build';
import { silentLogger } from '@svc/core';
import { buildGatewayApp, ModuleHostError, moduleHostAttach, startModuleHost } from '@svc/server';
import { cleanEnv, initProject, startUntilReady, svc, tempDir } from '../../../cli/test/helpers.js';
import { loadAppModules } from '../../src/app-modules.js';
import { bundledSqliteAddon } from '../../src/bundled-addons.js';
import { dependenciesDir, makeDeps, openControlStore, packagesDirOf } from '../../src/control.js';
import { RuntimeError } from '../../src/errors.js';
import { loadProject } from '../../src/project.js';

// Application modules go through the same verified path as the store addon: pinned by the
// SHA-256 of their archive, installed files, dependencies and manifest checked before any of
// their code is imported; a privileged export is refused naming the package and the export.

const FIXTURES = fileURLToPath(new URL('../../../server/test/fixtures/app-modules/', import.meta.url));

interface Pinned {
  readonly name: string;
  readonly version: string;
  readonly sha256: string;
}

/** project.edn with the bundled store, the auth module and the given application modules. */
function writeProjectEdn(
  dir: string,
  apps: readonly (Pinned & { readonly alias: string; readonly activate?: string; readonly config?: string })[],
): void {
  const sqlite = bundledSqliteAddon();
  const pins = apps.map((a) => `"${a.name}" {:version "${a.version}" :sha256 "${a.sha256}"}`).join('\n                ');
  const modules = apps
    .map(
      (a) =>
        `:${a.alias} {:package "${a.name}" :activate [${a.activate ?? ':svc/app'}]${a.config === undefined ? '' : ` :config ${a.config}`}}`,
    )
    .join('\n                ');
  writeFileSync(
    join(dir, 'project.edn'),
    `{:svc/project "demo"
 :svc/app-public ["/public/*"]
 :svc/packages {"svc-store-sqlite" {:version "${sqlite.version}" :sha256 "${sqlite.sha256}"}
                ${pins}}
 :svc/modules  {:store {:package "svc-store-sqlite" :activate [:svc/store]}
                :auth  {:module :svc/auth :config {:auth/store :store}}
                ${modules}}}
`,
    { mode: 0o600 },
  );
}

const load = (dir: string) => loadProject(dir, { profile: null, env: {} });

/** stderr without the service's JSON log lines (a serve command logs its connection plan first): what the operator reads. */
const withoutLogLines = (stderr: string): string =>
  stderr
    .split(/(?<=\n)/)
    .filter((line) => !line.startsWith('{"level":'))
    .join('');

describe('application modules load only through the verified path', () => {
  const tmp = tempDir('svc-app-modules-');
  const dir = join(tmp.dir, 'project');
  const packed: Record<string, PackedAddon> = {};

  before(async () => {
    await initProject(dir);
    for (const name of ['good-app', 'hostile-app', 'skip-override-app']) {
      packed[name] = await packAddon(join(FIXTURES, name), join(tmp.dir, 'packed'));
    }
  });
  after(() => tmp.cleanup());

  async function install(name: string): Promise<Pinned> {
    const p = packed[name] as PackedAddon;
    await installAddon({
      source: p.archive,
      sha256: p.sha256,
      packagesDir: join(dir, '.svc', 'packages'),
      dependenciesDir: dependenciesDir(),
    });
    return { name: p.name, version: p.version, sha256: p.sha256 };
  }

  test('a pinned application package is verified, loaded and served after identity over real HTTP', async () => {
    const good = await install('good-app');
    writeProjectEdn(dir, [{ ...good, alias: 'web', config: '{:web/title "Hello"}' }]);
    const project = load(dir);
    const modules = await loadAppModules(project);
    assert.deepEqual(
      modules.map((m) => m.name),
      ['good-app@1.0.0 (:web)'],
    );
    const store = await openControlStore(project, { create: false });
    const host = await startModuleHost({ modules, sharedDependencies: dependenciesDir() });
    const app = await buildGatewayApp({
      deps: await makeDeps(project, store, silentLogger),
      logger: false,
      policy: { publicPaths: ['/public/*'], identityHeaders: [], requirements: [] },
      trustedProxies: [],
      attach: moduleHostAttach(host),
    });
    try {
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      assert.ok(address !== null && typeof address === 'object');
      const base = `http://127.0.0.1:${address.port}`;
      const pub = await fetch(`${base}/public/hello`, { headers: { 'svc-subject': 'forged-admin' } });
      assert.equal(pub.status, 200);
      assert.deepEqual(await pub.json(), { principal: null });
      assert.deepEqual(await (await fetch(`${base}/public/title`)).json(), { title: 'Hello' });
      const anonymous = await fetch(`${base}/hello`, { headers: { 'svc-subject': 'forged-admin' } });
      assert.equal(anonymous.status, 401);
      assert.equal(anonymous.headers.get('www-authenticate'), 'Bearer realm="application"');
    } finally {
      await app.close();
      await host.close();
      await store.close();
    }
  });

  test('svc package install pins an application package and says how to serve it', async () => {
    const p = packed['good-app'] as PackedAddon;
    const r = await svc(['package', 'install', p.archive, '--sha256', p.sha256, dir]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /serve it behind the application gateway with \{:package "good-app" :activate \[:svc\/app\]\}/);
    assert.match(readFileSync(join(dir, 'project.edn'), 'utf8'), new RegExp(`"good-app" \\{:version "1\\.0\\.0" :sha256 "${p.sha256}"\\}`));
  });

  test('svc app serve serves an installed application module after identity; a tampered one stops it in one line', async () => {
    const good = await install('good-app');
    writeProjectEdn(dir, [{ ...good, alias: 'web' }]);
    const s = await startUntilReady(
      ['app', 'serve', '--app-listen', '127.0.0.1:0', dir],
      (out) => /svc app: application gateway listening on (http:\/\/\S+)\n/.exec(out)?.[1] ?? null,
      { env: cleanEnv() },
    );
    try {
      const pub = await fetch(`${s.ready}/public/hello`, { headers: { 'svc-subject': 'forged-admin' } });
      assert.equal(pub.status, 200);
      assert.deepEqual(await pub.json(), { principal: null });
      assert.equal((await fetch(`${s.ready}/hello`, { headers: { 'svc-subject': 'forged-admin' } })).status, 401);
    } finally {
      assert.equal(await s.stop('SIGTERM'), 0);
    }
    const entry = join(dir, '.svc', 'packages', 'good-app@1.0.0', 'index.js');
    writeFileSync(entry, `${readFileSync(entry, 'utf8')}\n// edited\n`);
    const r = await svc(['app', 'serve', '--app-listen', '127.0.0.1:0', dir], { env: cleanEnv() });
    assert.equal(r.code, 1);
    assert.match(
      withoutLogLines(r.stderr),
      /^svc app serve: application package good-app@1\.0\.0 failed verification \(installed_files\): index\.js was edited since install; .*\(no application module was loaded\)\n$/,
    );
  });

  test('svc app serve with a module that fails to load stops in one line naming the module, exit 1', async () => {
    const src = join(tmp.dir, 'broken-app');
    cpSync(join(FIXTURES, 'good-app'), src, { recursive: true });
    for (const file of ['package.json', 'svc-addon.json']) {
      const path = join(src, file);
      writeFileSync(path, readFileSync(path, 'utf8').replaceAll('good-app', 'broken-app'));
    }
    writeFileSync(join(src, 'index.js'), "export async function svcApp() {\n  throw new Error('no database configured');\n}\n");
    const packed = await packAddon(src, join(tmp.dir, 'packed-broken'));
    await installAddon({
      source: packed.archive,
      sha256: packed.sha256,
      packagesDir: join(dir, '.svc', 'packages'),
      dependenciesDir: dependenciesDir(),
    });
    writeProjectEdn(dir, [{ name: packed.name, version: packed.version, sha256: packed.sha256, alias: 'web' }]);
    const r = await svc(['app', 'serve', '--app-listen', '127.0.0.1:0', dir], { env: cleanEnv() });
    assert.equal(r.code, 1);
    assert.equal(
      withoutLogLines(r.stderr),
      'svc app serve: application module broken-app@1.0.0 (:web) failed to load: no database configured (no application module was loaded)\n',
    );
    assert.equal(r.stdout, '');
  });

  test('an installed application file edited after install is refused before any of its code runs', async () => {
    const good = await install('good-app');
    writeProjectEdn(dir, [{ ...good, alias: 'web' }]);
    const project = load(dir);
    const entry = join(packagesDirOf(project), 'good-app@1.0.0', 'index.js');
    writeFileSync(entry, `globalThis.__svcTamperedAppRan = true;\n${readFileSync(entry, 'utf8')}`);
    await assert.rejects(loadAppModules(project), (err: Error) => {
      assert.ok(err instanceof RuntimeError);
      assert.match(
        err.message,
        /^application package good-app@1\.0\.0 failed verification \(installed_files\): index\.js was edited since install; .* \(no application module was loaded\)$/,
      );
      return true;
    });
    assert.equal((globalThis as { __svcTamperedAppRan?: boolean }).__svcTamperedAppRan, undefined);
  });

  test('an application package pinned with another digest is refused (archive_digest)', async () => {
    const good = await install('good-app');
    writeProjectEdn(dir, [{ ...good, sha256: 'c'.repeat(64), alias: 'web' }]);
    await assert.rejects(loadAppModules(load(dir)), /application package good-app@1\.0\.0 failed verification \(archive_digest\): /);
  });

  test('an application package whose export is marked skip-override is refused at start, naming the package', async () => {
    const skip = await install('skip-override-app');
    writeProjectEdn(dir, [{ ...skip, alias: 'web' }]);
    // Verification never imports it; its confined process refuses it before serving anything.
    const modules = await loadAppModules(load(dir));
    const outcome = await startModuleHost({ modules, sharedDependencies: dependenciesDir() }).then(
      async (host) => {
        await host.close();
        return 'started';
      },
      (err: unknown) => err,
    );
    assert.ok(outcome instanceof ModuleHostError, String(outcome));
    assert.match(
      outcome.message,
      /^application module skip-override-app@1\.0\.0 \(:web\): its :svc\/app export "svcApp" is marked skip-override/,
    );
  });

  test('the hostile package loads (its attacks are refused at run time, see the server tests)', async () => {
    const hostile = await install('hostile-app');
    writeProjectEdn(dir, [{ ...hostile, alias: 'evil' }]);
    const modules = await loadAppModules(load(dir));
    assert.deepEqual(
      modules.map((m) => m.name),
      ['hostile-app@1.0.0 (:evil)'],
    );
  });

  test('an application package activating :svc/auth in project.edn is refused at load in one line naming the package and the export', async () => {
    const hostile = await install('hostile-app');
    writeProjectEdn(dir, [{ ...hostile, alias: 'evil', activate: ':svc/app :svc/auth' }]);
    assert.throws(
      () => load(dir),
      (err: Error) =>
        err instanceof RuntimeError &&
        /^.*project\.edn: :svc\/modules :evil :activate: package "hostile-app" may not activate the privileged export :svc\/auth: [^\n]+$/.test(
          err.message,
        ),
    );
  });

  test('an application package activating :svc/auth-provider in project.edn is refused at load naming the package and the export', async () => {
    const hostile = await install('hostile-app');
    writeProjectEdn(dir, [{ ...hostile, alias: 'evil', activate: ':svc/app :svc/auth-provider' }]);
    assert.throws(
      () => load(dir),
      (err: Error) => {
        assert.ok(err instanceof RuntimeError);
        assert.match(err.message, /package "hostile-app" may not activate the privileged export :svc\/auth-provider/);
        return true;
      },
    );
  });

  test('a package whose manifest declares the privileged export svc/auth is refused at install, naming the package and the export', async () => {
    const src = join(tmp.dir, 'evil-auth-app');
    cpSync(join(FIXTURES, 'good-app'), src, { recursive: true });
    for (const file of ['package.json', 'svc-addon.json']) {
      const path = join(src, file);
      writeFileSync(path, readFileSync(path, 'utf8').replaceAll('good-app', 'evil-auth-app'));
    }
    const manifest = JSON.parse(readFileSync(join(src, 'svc-addon.json'), 'utf8'));
    manifest.exports['svc/auth'] = { entry: './index.js', export: 'svcApp' };
    writeFileSync(join(src, 'svc-addon.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    // npm pack itself: packAddon would refuse the manifest before there is an archive to install.
    const out = join(tmp.dir, 'packed-evil');
    mkdirSync(out);
    execFileSync('npm', ['pack', '--silent', '--pack-destination', out], { cwd: src, stdio: 'ignore' });
    const archive = join(out, 'evil-auth-app-1.0.0.tgz');
    const sha256 = createHash('sha256').update(readFileSync(archive)).digest('hex');
    await assert.rejects(
      installAddon({ source: archive, sha256, packagesDir: join(dir, '.svc', 'packages'), dependenciesDir: dependenciesDir() }),
      /evil-auth-app-1\.0\.0\.tgz failed verification \(manifest\): .*it declares the privileged export "svc\/auth", which no package may provide/,
    );
  });
});

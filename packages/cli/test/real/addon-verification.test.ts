import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { appendFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cleanEnv, run, tempDir } from '../helpers.js';
// Verification is the CLI's own check before it opens the store, not anything about the
// process: every `svc` here runs in process (svcInProcess). A refused `auth serve` never gets
// as far as listening, so it is no server either.
import { enrolledProjectInProcess as enrolledProject, svcInProcess as svc, svcOkInProcess as svcOk } from '../in-process.js';
import { bundledSha256 } from '../support/store-projects.js';

const SQLITE_PACKAGE = fileURLToPath(new URL('../../../store-sqlite/', import.meta.url));
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

describe('a store addon that fails verification stops every command before the control database is opened', () => {
  const tmp = tempDir('svc-addon-verify-');
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
  const keptArchive = (dir: string) => join(dir, '.svc', 'packages', 'svc-store-sqlite-0.1.0.tgz');

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

  /**
   * An honest npm-pack of a copy of packages/store-sqlite whose svc-addon.json `mutate`
   * changed (same name and version), with its real SHA-256.
   */
  async function repackedSqliteAddon(
    label: string,
    mutate: (manifest: Record<string, unknown>) => void,
  ): Promise<{ tgz: string; sha: string }> {
    const src = join(tmp.dir, `pkg-${label}`);
    const dest = join(tmp.dir, `out-${label}`);
    mkdirSync(dest, { recursive: true });
    for (const entry of ['package.json', 'dist', 'migrations', 'svc-addon.json']) {
      cpSync(join(SQLITE_PACKAGE, entry), join(src, entry), { recursive: true });
    }
    const manifestFile = join(src, 'svc-addon.json');
    const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Record<string, unknown>;
    mutate(manifest);
    writeFileSync(manifestFile, `${JSON.stringify(manifest, null, 2)}\n`);
    const packed = await run('npm', ['pack', '--ignore-scripts', '--pack-destination', dest], {
      cwd: src,
      env: cleanEnv({ npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' }),
    });
    assert.equal(packed.code, 0, packed.stderr);
    const tgz = join(dest, 'svc-store-sqlite-0.1.0.tgz');
    return { tgz, sha: sha256(readFileSync(tgz)) };
  }

  /** Installs `tgz` over the project's sqlite addon with `svc package install` and checks the new pin. */
  async function installOver(dir: string, addon: { tgz: string; sha: string }): Promise<void> {
    const r = await svcOk(['package', 'install', addon.tgz, '--sha256', addon.sha, dir, '--json'], { env });
    const installed = JSON.parse(r.stdout) as { name: string; version: string; sha256: string };
    assert.deepEqual([installed.name, installed.version, installed.sha256], ['svc-store-sqlite', '0.1.0', addon.sha]);
    assert.ok(readFileSync(join(dir, 'project.edn'), 'utf8').includes(`:sha256 "${addon.sha}"`), 'the pin now names the new archive');
    assert.equal(sha256(readFileSync(keptArchive(dir))), addon.sha);
  }

  test('archive_digest: a byte appended to the kept archive is refused and the database is untouched', async () => {
    const dir = await project();
    appendFileSync(keptArchive(dir), Buffer.from([0]));
    await assertRefused(dir, 'archive_digest');
  });

  test('installed_files: an edited installed file is refused before its code runs, and the database is untouched', async () => {
    const dir = await project();
    const marker = join(tmp.dir, `tampered-code-ran-${n}`);
    // Code that would leave a trace if the tampered module were ever imported.
    appendFileSync(
      join(installDir(dir), 'dist', 'index.js'),
      `\nawait import('node:fs').then((fs) => fs.writeFileSync(${JSON.stringify(marker)}, 'ran'));\n`,
    );
    await assertRefused(dir, 'installed_files');
    assert.equal(existsSync(marker), false, 'the tampered entry file was never imported');
  });

  test('installed_files: a file added to the install is refused and the database is untouched', async () => {
    const dir = await project();
    writeFileSync(join(installDir(dir), 'dist', 'extra.js'), 'export const planted = true;\n');
    await assertRefused(dir, 'installed_files');
  });

  test('installed_files: a file removed from the install is refused and the database is untouched', async () => {
    const dir = await project();
    rmSync(join(installDir(dir), 'migrations', '001_initial.sql'));
    await assertRefused(dir, 'installed_files');
  });

  test('an honestly repacked, unchanged copy of the addon installs with its digest and passes verification (control for the manifest checks)', async () => {
    const dir = await project();
    const addon = await repackedSqliteAddon('unchanged', () => undefined);
    await installOver(dir, addon);
    const devices = JSON.parse((await svcOk(['auth', 'devices', dir, '--json'], { env })).stdout) as { devices: unknown[] };
    assert.equal(devices.devices.length, 1, 'the database opened through the reinstalled addon still holds the admin');
  });

  test('operation_set: an addon whose manifest drops an operation installs (honest digest) but is refused and the database is untouched', async () => {
    const dir = await project();
    const addon = await repackedSqliteAddon('ops', (m) => {
      m.operations = (m.operations as string[]).filter((op) => op !== 'revokeSession');
    });
    await installOver(dir, addon);
    await assertRefused(dir, 'operation_set');
  });

  test('native_module: an addon declaring another native module name installs but is refused and the database is untouched', async () => {
    const dir = await project();
    const addon = await repackedSqliteAddon('native', (m) => {
      m.native = { package: 'better-sqlite3', module: 'evil_binding' };
    });
    await installOver(dir, addon);
    await assertRefused(dir, 'native_module');
  });

  test('abi: an addon built for another Node module ABI installs but is refused and the database is untouched', async () => {
    const dir = await project();
    const addon = await repackedSqliteAddon('abi-node', (m) => {
      m.abi = { ...(m.abi as Record<string, unknown>), node_module_version: '1' };
    });
    await installOver(dir, addon);
    await assertRefused(dir, 'abi');
  });

  test('abi: an addon built for another store contract installs but is refused and the database is untouched', async () => {
    const dir = await project();
    const addon = await repackedSqliteAddon('abi-contract', (m) => {
      m.abi = { ...(m.abi as Record<string, unknown>), store_contract: 999 };
    });
    await installOver(dir, addon);
    await assertRefused(dir, 'abi');
  });

  test('a reinstall of the pinned bundled archive repairs a tampered install', async () => {
    const dir = await project();
    rmSync(join(installDir(dir), 'svc-addon.json'));
    await assertRefused(dir, 'installed_files');
    await svcOk(['package', 'install', 'svc-store-sqlite', '--sha256', bundledSha256('svc-store-sqlite'), dir], { env });
    await svcOk(['auth', 'devices', dir], { env });
  });

  test('package install with a wrong --sha256 is refused (archive_digest): nothing is unpacked, kept or pinned', async () => {
    const dir = await project();
    const addon = await repackedSqliteAddon('wrong-sha', (m) => {
      m.operations = (m.operations as string[]).slice(1);
    });
    const edn = readFileSync(join(dir, 'project.edn'));
    const packagesDir = join(dir, '.svc', 'packages');
    const listing = readdirSync(packagesDir, { recursive: true }).map(String).sort();
    const archiveBefore = readFileSync(keptArchive(dir));
    const wrong = addon.sha.replace(/^./, (c) => (c === '0' ? '1' : '0'));
    const r = await svc(['package', 'install', addon.tgz, '--sha256', wrong, dir], { env });
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /failed verification \(archive_digest\)/);
    assert.deepEqual(readFileSync(join(dir, 'project.edn')), edn, 'project.edn is unchanged');
    assert.deepEqual(readdirSync(packagesDir, { recursive: true }).map(String).sort(), listing, 'nothing was unpacked or staged');
    assert.deepEqual(readFileSync(keptArchive(dir)), archiveBefore, 'the kept archive is the old one');
    // The bundled install is still the verified one.
    await svcOk(['auth', 'devices', dir], { env });
  });

  test('a module referencing a package not pinned in :svc/packages is refused at load naming the key (exit 1)', async () => {
    const dir = join(tmp.dir, 'unpinned');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'project.edn'),
      `{:svc/project "unpinned"
 :svc/modules {:pg {:package "svc-store-postgres" :activate [:svc/store] :config {:store/schema "never_created"}}
               :auth {:module :svc/auth :config {:auth/store :pg}}}}
`,
    );
    for (const args of [
      ['auth', 'init', dir],
      ['auth', 'devices', dir],
    ]) {
      const r = await svc(args, { env });
      assert.equal(r.code, 1, r.stderr);
      assert.ok(r.stderr.includes(':svc/modules :pg :package'), r.stderr);
      assert.ok(r.stderr.includes(join(dir, 'project.edn')), r.stderr);
    }
    assert.equal(existsSync(join(dir, '.svc', 'packages')), false, 'nothing was installed');
    assert.equal(existsSync(join(dir, '.svc', 'control', 'control.db')), false, 'no control database was created');
  });

  test('archive_digest: a pin without :sha256 is refused and the database is untouched', async () => {
    const dir = await project();
    const file = join(dir, 'project.edn');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/ :sha256 "[0-9a-f]{64}"/, ''));
    await assertRefused(dir, 'archive_digest');
  });
});

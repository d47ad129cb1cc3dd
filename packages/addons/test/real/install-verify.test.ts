import assert from 'node:assert/strict';
import { appendFile, chmod, cp, lstat, mkdir, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { before, test } from 'node:test';
import { STORE_CONTRACT_VERSION, STORE_OPERATIONS } from '@svc/core/store';
import type { PackedAddon } from '../../src/build.js';
import { type AddonCheck, AddonVerificationError, installAddon, loadStoreAddon, verifyAddon } from '../../src/index.js';
import { DEPENDENCIES_DIR, type FixtureOptions, packFixtureAddon, tempDir } from '../fixture.js';

const NAME = 'svc-store-fixture';
let good: PackedAddon;

before(async () => {
  good = await packFixtureAddon();
});

async function install(packed: PackedAddon) {
  const packagesDir = join(await tempDir('svc-project-'), '.svc', 'packages');
  const installed = await installAddon({ source: packed.archive, sha256: packed.sha256, packagesDir, dependenciesDir: DEPENDENCIES_DIR });
  return { packagesDir, installed };
}

function verify(packagesDir: string, packed: { name: string; version: string; sha256: string | null }) {
  return verifyAddon({
    packagesDir,
    name: packed.name,
    pin: { version: packed.version, sha256: packed.sha256 },
    exportName: 'svc/store',
    dependenciesDir: DEPENDENCIES_DIR,
  });
}

/** Asserts that `promise` is refused by addon verification with `check`. */
async function refusedBy(promise: Promise<unknown>, check: AddonCheck): Promise<AddonVerificationError> {
  const error = await promise.then(
    () => assert.fail(`expected a refusal by ${check}`),
    (e: unknown) => e,
  );
  assert.ok(error instanceof AddonVerificationError, `expected an AddonVerificationError, got ${String(error)}`);
  assert.equal(error.check, check, error.message);
  return error;
}

/** Packs a fixture with `opts`, installs it pinned by its true digest, and verifies it. */
async function installAndVerify(opts: FixtureOptions) {
  const packed = await packFixtureAddon(opts);
  const { packagesDir } = await install(packed);
  return verify(packagesDir, packed);
}

test('a digest mismatch is refused before anything is unpacked', async () => {
  const packagesDir = await tempDir('svc-packages-');
  const wrong = (good.sha256[0] === '0' ? '1' : '0') + good.sha256.slice(1);
  const error = await refusedBy(
    installAddon({ source: good.archive, sha256: wrong, packagesDir, dependenciesDir: DEPENDENCIES_DIR }),
    'archive_digest',
  );
  assert.match(error.message, /nothing was installed/);
  assert.deepEqual(await readdir(packagesDir), []);
});

test('install keeps the archive, extracts the files and links node_modules', async () => {
  const { packagesDir, installed } = await install(good);
  assert.deepEqual(
    { name: installed.name, version: installed.version, sha256: installed.sha256 },
    { name: NAME, version: '0.1.0', sha256: good.sha256 },
  );
  assert.equal(installed.archive, join(packagesDir, `${NAME}-0.1.0.tgz`));
  assert.equal(installed.dir, join(packagesDir, `${NAME}@0.1.0`));
  assert.deepEqual(await readFile(installed.archive), await readFile(good.archive));
  assert.deepEqual((await readdir(packagesDir)).sort(), [`${NAME}-0.1.0.lock.json`, `${NAME}-0.1.0.tgz`, `${NAME}@0.1.0`]);
  assert.deepEqual((await readdir(installed.dir)).sort(), ['dist', 'node_modules', 'package.json', 'svc-addon.json']);
  assert.match(await readFile(join(installed.dir, 'dist', 'index.js'), 'utf8'), /export const svcStore/);
  assert.ok((await lstat(join(installed.dir, 'node_modules'))).isSymbolicLink());
  assert.equal(await readlink(join(installed.dir, 'node_modules')), resolve(DEPENDENCIES_DIR));
});

test('verify passes on an untouched install and the export loads', async () => {
  const { packagesDir, installed } = await install(good);
  const verified = await verify(packagesDir, good);
  assert.equal(verified.dir, installed.dir);
  assert.equal(verified.entry, join(installed.dir, 'dist', 'index.js'));
  assert.equal(verified.exportKey, 'svc/store');
  assert.deepEqual(verified.manifest.operations, [...STORE_OPERATIONS]);
  const storeExport = await loadStoreAddon(verified);
  assert.equal(storeExport.contractVersion, STORE_CONTRACT_VERSION);
  assert.deepEqual([...storeExport.operations], [...STORE_OPERATIONS]);
  assert.equal(typeof storeExport.open, 'function');
});

test('reinstall is idempotent', async () => {
  const { packagesDir, installed } = await install(good);
  const again = await installAddon({ source: good.archive, sha256: good.sha256, packagesDir, dependenciesDir: DEPENDENCIES_DIR });
  assert.deepEqual(again, installed);
  assert.deepEqual((await readdir(packagesDir)).sort(), [`${NAME}-0.1.0.lock.json`, `${NAME}-0.1.0.tgz`, `${NAME}@0.1.0`]);
  await verify(packagesDir, good);
});

test('reinstall repairs a tampered install', async () => {
  const { packagesDir, installed } = await install(good);
  await appendFile(join(installed.dir, 'dist', 'index.js'), '\n// tampered\n');
  await writeFile(join(installed.dir, 'dist', 'extra.js'), 'export {};\n');
  await refusedBy(verify(packagesDir, good), 'installed_files');
  await installAddon({ source: installed.archive, sha256: good.sha256, packagesDir, dependenciesDir: DEPENDENCIES_DIR });
  await verify(packagesDir, good);
});

test('a native addon whose binding resolves through the dependency link passes', async () => {
  const verified = await installAndVerify({ native: { package: 'better-sqlite3', module: 'better_sqlite3' } });
  assert.deepEqual(verified.manifest.native, { package: 'better-sqlite3', module: 'better_sqlite3' });
  assert.equal(verified.manifest.abi.node_module_version, process.versions.modules);
});

test('an edited installed file is refused (installed_files)', async () => {
  const { packagesDir, installed } = await install(good);
  await appendFile(join(installed.dir, 'dist', 'index.js'), '\nglobalThis.stolen = true;\n');
  const error = await refusedBy(verify(packagesDir, good), 'installed_files');
  assert.match(error.message, /dist\/index\.js was edited since install/);
  assert.match(error.message, /svc package install/);
});

test('an added file is refused (installed_files)', async () => {
  const { packagesDir, installed } = await install(good);
  await writeFile(join(installed.dir, 'dist', 'preload.js'), 'export {};\n');
  const error = await refusedBy(verify(packagesDir, good), 'installed_files');
  assert.match(error.message, /dist\/preload\.js was added since install/);
});

test('an added directory is refused (installed_files)', async () => {
  const { packagesDir, installed } = await install(good);
  await mkdir(join(installed.dir, 'hooks'));
  await refusedBy(verify(packagesDir, good), 'installed_files');
});

test('a removed file is refused (installed_files)', async () => {
  const { packagesDir, installed } = await install(good);
  await rm(join(installed.dir, 'dist', 'helper.js'));
  const error = await refusedBy(verify(packagesDir, good), 'installed_files');
  assert.match(error.message, /dist\/helper\.js was removed since install/);
});

test('a file replaced by a symlink is refused (installed_files)', async () => {
  const { packagesDir, installed } = await install(good);
  const target = join(installed.dir, 'dist', 'helper.js');
  const elsewhere = join(await tempDir(), 'helper.js');
  await writeFile(elsewhere, await readFile(target));
  await rm(target);
  await symlink(elsewhere, target);
  await refusedBy(verify(packagesDir, good), 'installed_files');
});

test('a node_modules that is no longer a symlink is refused (installed_files)', async () => {
  const { packagesDir, installed } = await install(good);
  await rm(join(installed.dir, 'node_modules'));
  await mkdir(join(installed.dir, 'node_modules'));
  await refusedBy(verify(packagesDir, good), 'installed_files');
});

test('a kept archive edited after install is refused (archive_digest)', async () => {
  const { packagesDir, installed } = await install(good);
  await appendFile(installed.archive, Buffer.from([0]));
  const error = await refusedBy(verify(packagesDir, good), 'archive_digest');
  assert.match(error.message, new RegExp(`project.edn pins ${good.sha256}`));
});

test('a pin that is not the installed archive is refused (archive_digest)', async () => {
  const { packagesDir } = await install(good);
  await refusedBy(verify(packagesDir, { ...good, sha256: 'a'.repeat(64) }), 'archive_digest');
});

test('an unpinned package is refused (archive_digest)', async () => {
  const { packagesDir } = await install(good);
  const error = await refusedBy(verify(packagesDir, { ...good, sha256: null }), 'archive_digest');
  assert.match(error.message, /pin it with `svc package install/);
});

test('a package that is not installed is refused (not_installed)', async () => {
  const packagesDir = await tempDir('svc-packages-');
  await refusedBy(verify(packagesDir, good), 'not_installed');
});

test('a manifest declaring a wrong operation set is refused (operation_set)', async () => {
  const operations = [...STORE_OPERATIONS.filter((op) => op !== 'rotateRefreshToken'), 'dumpAllTokens'];
  const error = await refusedBy(installAndVerify({ operations }), 'operation_set');
  assert.match(error.message, /missing rotateRefreshToken/);
  assert.match(error.message, /unknown dumpAllTokens/);
});

test('a wrong native module name is refused (native_module)', async () => {
  const error = await refusedBy(installAndVerify({ native: { package: 'better-sqlite3', module: 'evil_binding' } }), 'native_module');
  assert.match(error.message, /evil_binding/);
});

test('an untrusted native package is refused (native_module)', async () => {
  await refusedBy(installAndVerify({ native: { package: 'evil-native', module: 'evil' } }), 'native_module');
});

test('a wrong store contract ABI is refused (abi)', async () => {
  const error = await refusedBy(installAndVerify({ abi: { store_contract: 999 } }), 'abi');
  assert.match(error.message, /store contract 999/);
});

test('a wrong Node module ABI is refused (abi)', async () => {
  const native = { package: 'better-sqlite3', module: 'better_sqlite3' };
  const error = await refusedBy(installAndVerify({ native, abi: { node_module_version: '1' } }), 'abi');
  assert.match(error.message, /Node module ABI 1/);
});

test('packing refuses a package whose archive would lack svc-addon.json', async () => {
  const error = await packFixtureAddon({ noManifest: true }).then(
    () => assert.fail('expected packAddon to refuse'),
    (e: unknown) => e as Error,
  );
  assert.match(error.message, /svc-addon\.json/);
});

/**
 * A dependencies directory of our own: every package of the repository's node_modules linked,
 * except a real copy of better-sqlite3 (binding included) that a test may tamper with.
 */
async function ownDependencies(): Promise<string> {
  const dir = join(await tempDir('svc-deps-'), 'node_modules');
  await mkdir(dir);
  for (const name of await readdir(DEPENDENCIES_DIR)) {
    if (name === 'better-sqlite3') await cp(join(DEPENDENCIES_DIR, name), join(dir, name), { recursive: true, dereference: true });
    else await symlink(join(DEPENDENCIES_DIR, name), join(dir, name));
  }
  return dir;
}

async function installNative(): Promise<{ packagesDir: string; deps: string; packed: PackedAddon }> {
  const deps = await ownDependencies();
  const packed = await packFixtureAddon({ native: { package: 'better-sqlite3', module: 'better_sqlite3' } });
  const packagesDir = join(await tempDir('svc-project-'), '.svc', 'packages');
  await installAddon({ source: packed.archive, sha256: packed.sha256, packagesDir, dependenciesDir: deps });
  return { packagesDir, deps, packed };
}

function verifyWith(packagesDir: string, packed: PackedAddon, dependenciesDir: string) {
  return verifyAddon({
    packagesDir,
    name: packed.name,
    pin: { version: packed.version, sha256: packed.sha256 },
    exportName: 'svc/store',
    dependenciesDir,
  });
}

test('a swapped native binding (same path, other bytes) is refused by its digest before it is loaded (dependencies)', async () => {
  const { packagesDir, deps, packed } = await installNative();
  await verifyWith(packagesDir, packed, deps);
  await appendFile(join(deps, 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node'), Buffer.from([0]));
  const error = await refusedBy(verifyWith(packagesDir, packed, deps), 'dependencies');
  assert.match(error.message, /better-sqlite3 changed/);
});

test('an edited file of a dependency is refused by its digest before it is loaded (dependencies)', async () => {
  const { packagesDir, deps, packed } = await installNative();
  await appendFile(join(deps, 'better-sqlite3', 'lib', 'index.js'), '\nglobalThis.tampered = true;\n');
  const error = await refusedBy(verifyWith(packagesDir, packed, deps), 'dependencies');
  assert.match(error.message, /better-sqlite3 changed/);
});

test('an install verified against other dependencies than this svc loads is refused (dependencies)', async () => {
  const { packagesDir, packed } = await installNative();
  await refusedBy(verifyWith(packagesDir, packed, DEPENDENCIES_DIR), 'dependencies');
});

test('install under umask 002 creates every folder and file owner-only', async () => {
  const old = process.umask(0o002);
  try {
    const { packagesDir, installed } = await install(good);
    const paths = [dirname(packagesDir), packagesDir, installed.archive, `${installed.archive.slice(0, -4)}.lock.json`];
    for (const rel of await readdir(installed.dir, { recursive: true })) {
      // node_modules is the link to the shared dependencies, not something install created.
      if (!String(rel).startsWith('node_modules/')) paths.push(join(installed.dir, String(rel)));
    }
    for (const path of paths) {
      const st = await lstat(path);
      if (!st.isSymbolicLink()) assert.equal(st.mode & 0o077, 0, `${path} is ${(st.mode & 0o777).toString(8)}`);
    }
  } finally {
    process.umask(old);
  }
});

test('a group-writable install directory is refused before anything is loaded (permissions)', async () => {
  const { packagesDir } = await install(good);
  await chmod(join(packagesDir, `${NAME}@0.1.0`, 'dist'), 0o770);
  await refusedBy(verify(packagesDir, good), 'permissions');
});

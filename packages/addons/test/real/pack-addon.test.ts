import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { cp, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { test } from 'node:test';
import { STORE_CONTRACT_VERSION, STORE_OPERATIONS } from '@svc/core/store';
import { buildStoreAddons, packAddon, STORE_ADDONS, writeAddonManifest } from '../../src/build.js';
import { parseAddonManifest } from '../../src/index.js';
import { tempDir, writeFixtureAddon } from '../fixture.js';

const REPO = join(import.meta.dirname, '..', '..', '..', '..');

test('packing the same package twice gives the same digest (reproducible)', async () => {
  const dir = await writeFixtureAddon();
  const first = await packAddon(dir, await tempDir());
  const second = await packAddon(dir, await tempDir());
  assert.equal(first.sha256, second.sha256);
  assert.deepEqual(await readFile(first.archive), await readFile(second.archive));
  assert.equal(basename(first.archive), 'svc-store-fixture-0.1.0.tgz');
});

test('writeAddonManifest fills the ABI from the running process and core', async () => {
  const dir = await writeFixtureAddon();
  const manifest = writeAddonManifest(dir, {
    name: 'svc-store-fixture',
    version: '0.1.0',
    exports: { 'svc/store': { entry: './dist/index.js', export: 'svcStore' } },
    operations: [...STORE_OPERATIONS],
    native: { package: 'better-sqlite3', module: 'better_sqlite3' },
  });
  assert.deepEqual(manifest.abi, {
    store_contract: STORE_CONTRACT_VERSION,
    node_module_version: process.versions.modules,
    napi: Number(process.versions.napi),
  });
  assert.deepEqual(parseAddonManifest(await readFile(join(dir, 'svc-addon.json'), 'utf8')).manifest, manifest);
  assert.throws(() => writeAddonManifest(dir, { ...manifest, version: '9.9.9' }), TypeError);
  assert.throws(
    () => writeAddonManifest(dir, { ...manifest, exports: { 'svc/store': { entry: './dist/missing.js', export: 'svcStore' } } }),
    TypeError,
  );
});

test('building the addons twice gives identical digests and SHA256SUMS', async () => {
  const addons = [
    { dir: await writeFixtureAddon({ name: 'svc-store-one' }), native: { package: 'better-sqlite3', module: 'better_sqlite3' } },
    { dir: await writeFixtureAddon({ name: 'svc-store-two' }), native: null },
  ];
  const out1 = await tempDir();
  const out2 = await tempDir();
  const first = await buildStoreAddons(out1, addons);
  const second = await buildStoreAddons(out2, addons);
  assert.deepEqual(
    first.map((p) => p.sha256),
    second.map((p) => p.sha256),
  );
  const sums = await readFile(join(out1, 'SHA256SUMS'), 'utf8');
  assert.equal(sums, await readFile(join(out2, 'SHA256SUMS'), 'utf8'));
  assert.equal(sums, first.map((p) => `${p.sha256}  ${basename(p.archive)}\n`).join(''));
  assert.equal(JSON.parse(await readFile(join(addons[1]?.dir ?? '', 'svc-addon.json'), 'utf8')).native, null);
});

const storesBuilt = STORE_ADDONS.every((a) => existsSync(join(REPO, a.dir, 'dist', 'index.js')));
test('building the repository store addons twice gives identical digests', {
  skip: storesBuilt ? false : 'the store packages are not built yet (npx tsc -b packages/store-sqlite packages/store-postgres)',
}, async () => {
  // Build from a snapshot: the repository's packages stay untouched, and a rebuild of their
  // dist/ while this runs cannot make the two builds differ.
  const addons = await Promise.all(
    STORE_ADDONS.map(async (a) => {
      const dir = join(await tempDir('svc-store-copy-'), basename(a.dir));
      await cp(join(REPO, a.dir), dir, { recursive: true, filter: (src) => basename(src) !== 'node_modules' });
      return { ...a, dir };
    }),
  );
  const first = await buildStoreAddons(await tempDir(), addons);
  const second = await buildStoreAddons(await tempDir(), addons);
  assert.deepEqual(
    first.map((p) => [p.name, p.sha256]),
    second.map((p) => [p.name, p.sha256]),
  );
  assert.deepEqual(
    first.map((p) => p.name),
    ['svc-store-sqlite', 'svc-store-postgres'],
  );
});

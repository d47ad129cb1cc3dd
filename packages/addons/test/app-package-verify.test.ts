import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { ADDON_MANIFEST_FILE } from '@svc/core';
import { packAddon } from '../src/build.js';
import {
  type AddonCheck,
  type AddonManifest,
  AddonVerificationError,
  installAddon,
  serializeAddonManifest,
  verifyAddon,
  verifyAppPackage,
} from '../src/index.js';
import { DEPENDENCIES_DIR, packFixtureAddon, tempDir } from './fixture.js';

// Application packages (`svc/app`) go through the store addon's verification, with the checks
// that make sense for an application: no store operations, no native module, no store export.

/** Writes and packs a small application package; `manifest` overrides fields of its svc-addon.json. */
async function packApp(opts: { manifest?: Partial<AddonManifest>; dependencies?: Record<string, string>; source?: string } = {}) {
  const dir = await tempDir('svc-app-fixture-');
  await writeFile(
    join(dir, 'package.json'),
    JSON.stringify({
      name: 'acme-web',
      version: '1.0.0',
      type: 'module',
      files: ['index.js', ADDON_MANIFEST_FILE],
      dependencies: opts.dependencies ?? {},
    }),
  );
  await writeFile(
    join(dir, 'index.js'),
    opts.source ?? 'export async function svcApp(app) { app.get("/", async () => ({ ok: true })); }\n',
  );
  const manifest: AddonManifest = {
    schema: 1,
    name: 'acme-web',
    version: '1.0.0',
    exports: { 'svc/app': { entry: './index.js', export: 'svcApp' } },
    operations: [],
    native: null,
    abi: { store_contract: 0, node_module_version: null, napi: null },
    ...opts.manifest,
  };
  await writeFile(join(dir, ADDON_MANIFEST_FILE), serializeAddonManifest(manifest));
  const out = await tempDir('svc-app-packed-');
  await mkdir(out, { recursive: true });
  return packAddon(dir, out);
}

async function installed(packed: { archive: string; sha256: string }) {
  const packagesDir = join(await tempDir('svc-app-project-'), '.svc', 'packages');
  await installAddon({ source: packed.archive, sha256: packed.sha256, packagesDir, dependenciesDir: DEPENDENCIES_DIR });
  return packagesDir;
}

function verifyApp(packagesDir: string, packed: { name: string; version: string; sha256: string }) {
  return verifyAddon({
    packagesDir,
    name: packed.name,
    pin: { version: packed.version, sha256: packed.sha256 },
    exportName: 'svc/app',
    dependenciesDir: DEPENDENCIES_DIR,
  });
}

async function refusedBy(promise: Promise<unknown>, check: AddonCheck): Promise<AddonVerificationError> {
  const error = await promise.then(
    () => assert.fail(`expected a refusal by ${check}`),
    (e: unknown) => e,
  );
  assert.ok(error instanceof AddonVerificationError, `expected an AddonVerificationError, got ${String(error)}`);
  assert.equal(error.check, check, error.message);
  return error;
}

test('a pinned application package verifies without its code running, and names its svc/app entry and export', async () => {
  const packed = await packApp({ source: 'globalThis.__svcAppVerifyRan = true;\nexport async function svcApp() {}\n' });
  const packagesDir = await installed(packed);
  const app = await verifyAppPackage({
    packagesDir,
    name: packed.name,
    pin: { version: packed.version, sha256: packed.sha256 },
    dependenciesDir: DEPENDENCIES_DIR,
  });
  assert.equal(app.name, 'acme-web');
  assert.equal(app.version, '1.0.0');
  assert.equal(app.entry, join(app.packageDir, 'index.js'));
  assert.equal(app.exportName, 'svcApp');
  // Verification never imports it: it runs only in the confined module process.
  assert.equal((globalThis as { __svcAppVerifyRan?: boolean }).__svcAppVerifyRan, undefined);
});

test('an application package declaring store operations is refused (operation_set)', async () => {
  const packed = await packApp({ manifest: { operations: ['ping'] } });
  const error = await refusedBy(verifyApp(await installed(packed), packed), 'operation_set');
  assert.match(error.message, /^application package acme-web@1\.0\.0 failed verification \(operation_set\)/);
});

test('an application package declaring a native module is refused (native_module)', async () => {
  const packed = await packApp({
    manifest: { native: { package: 'better-sqlite3', module: 'better_sqlite3' } },
    dependencies: { 'better-sqlite3': '*' },
  });
  const error = await refusedBy(verifyApp(await installed(packed), packed), 'native_module');
  assert.match(error.message, /an application package may not load a native module/);
});

test('an application package depending on the store driver without declaring it is refused (native_module)', async () => {
  const packed = await packApp({ dependencies: { 'better-sqlite3': '*' } });
  await refusedBy(verifyApp(await installed(packed), packed), 'native_module');
});

test('a package exporting both svc/app and the privileged svc/store is refused at install (manifest)', async () => {
  await assert.rejects(
    packApp({
      manifest: {
        exports: { 'svc/app': { entry: './index.js', export: 'svcApp' }, 'svc/store': { entry: './index.js', export: 'svcApp' } },
      },
    }),
    /may not also export the privileged "svc\/store"/,
  );
});

test('a store addon activated as :svc/app is refused before any of its code runs (operation_set: an application has none)', async () => {
  const store = await packFixtureAddon();
  const error = await refusedBy(verifyApp(await installed(store), store), 'operation_set');
  assert.match(error.message, /^application package svc-store-fixture@0\.1\.0 failed verification/);
});

test('an application package whose svc/app entry is not in the archive is refused (export)', async () => {
  const packed = await packApp({ manifest: { exports: { 'svc/app': { entry: './missing.js', export: 'svcApp' } } } });
  await refusedBy(verifyApp(await installed(packed), packed), 'export');
});

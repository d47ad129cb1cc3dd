import assert from 'node:assert/strict';
import { access, readdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { gunzipSync, gzipSync } from 'node:zlib';
import { type AddonCheck, AddonVerificationError, installAddon, sha256Hex, verifyAddon } from '../src/index.js';
import { DEPENDENCIES_DIR, rawAddonArchive, tarEntry, tempDir } from './fixture.js';

/** Writes `archive`, installs it pinned by its true digest, and returns the refusal. */
async function installRefused(archive: Buffer, check: AddonCheck): Promise<{ error: AddonVerificationError; packagesDir: string }> {
  const project = await tempDir('svc-project-');
  const packagesDir = join(project, '.svc', 'packages');
  const file = join(project, 'addon.tgz');
  await writeFile(file, archive);
  const error = await installAddon({ source: file, sha256: sha256Hex(archive), packagesDir, dependenciesDir: DEPENDENCIES_DIR }).then(
    () => assert.fail(`expected install to be refused by ${check}`),
    (e: unknown) => e,
  );
  assert.ok(error instanceof AddonVerificationError, String(error));
  assert.equal(error.check, check, error.message);
  return { error, packagesDir };
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

test('a raw archive with only safe entries installs and verifies', async () => {
  const archive = rawAddonArchive([tarEntry('package/dist/', { type: 'Directory' }), tarEntry('package/README.md', { body: 'hi\n' })]);
  const project = await tempDir('svc-project-');
  const packagesDir = join(project, '.svc', 'packages');
  const file = join(project, 'addon.tgz');
  await writeFile(file, archive);
  const sha256 = sha256Hex(archive);
  await installAddon({ source: file, sha256, packagesDir, dependenciesDir: DEPENDENCIES_DIR });
  await verifyAddon({
    packagesDir,
    name: 'svc-store-raw',
    pin: { version: '0.1.0', sha256 },
    exportName: 'svc/store',
    dependenciesDir: DEPENDENCIES_DIR,
  });
});

test('a path traversal entry (..) is refused and nothing escapes', async () => {
  const { error, packagesDir } = await installRefused(
    rawAddonArchive([tarEntry('package/../../escaped.js', { body: 'pwned' })]),
    'installed_files',
  );
  assert.match(error.message, /climbs out/);
  assert.equal(await exists(join(dirname(packagesDir), 'escaped.js')), false);
  assert.equal(await exists(join(dirname(dirname(packagesDir)), 'escaped.js')), false);
  assert.equal(await exists(packagesDir), false);
});

test('a nested path traversal entry is refused', async () => {
  await installRefused(rawAddonArchive([tarEntry('package/dist/../../../escaped.js', { body: 'pwned' })]), 'installed_files');
});

test('an absolute path entry is refused', async () => {
  const target = join(await tempDir(), 'absolute.js');
  const { error } = await installRefused(rawAddonArchive([tarEntry(target, { body: 'pwned' })]), 'installed_files');
  assert.match(error.message, /absolute path/);
  assert.equal(await exists(target), false);
});

test('a symlink entry is refused', async () => {
  const { error } = await installRefused(
    rawAddonArchive([tarEntry('package/dist/link.js', { type: 'SymbolicLink', linkpath: '/etc/passwd' })]),
    'installed_files',
  );
  assert.match(error.message, /SymbolicLink/);
});

test('a hard link entry is refused', async () => {
  await installRefused(
    rawAddonArchive([tarEntry('package/dist/hard.js', { type: 'Link', linkpath: 'package/package.json' })]),
    'installed_files',
  );
});

test('an entry outside the package folder is refused', async () => {
  await installRefused(rawAddonArchive([tarEntry('other/evil.js', { body: 'pwned' })]), 'installed_files');
});

test('a node_modules entry in the archive is refused', async () => {
  await installRefused(rawAddonArchive([tarEntry('package/node_modules/@svc/core/index.js', { body: 'pwned' })]), 'installed_files');
});

test('a duplicate entry is refused', async () => {
  await installRefused(rawAddonArchive([tarEntry('package/dist/index.js', { body: 'second copy' })]), 'installed_files');
});

test('an archive without svc-addon.json is refused at install (manifest)', async () => {
  const { error, packagesDir } = await installRefused(rawAddonArchive([], { manifest: false }), 'manifest');
  assert.match(error.message, /svc-addon\.json/);
  assert.equal(await exists(packagesDir), false);
});

test('a file that is not a gzip tar archive is refused', async () => {
  await installRefused(Buffer.from('not an archive at all'), 'installed_files');
});

for (const [where, cut] of [
  ['inside a file body', 3100],
  ['inside a header', 4000],
  ['at an entry boundary', 3584],
] as const) {
  test(`an archive truncated ${where} is refused`, async () => {
    const tar = gunzipSync(rawAddonArchive([tarEntry('package/big.js', { body: 'x'.repeat(5000) })]));
    const { error } = await installRefused(gzipSync(tar.subarray(0, cut)), 'installed_files');
    assert.match(error.message, /truncated/i);
  });
}

test('a refused archive leaves the existing install of the package untouched', async () => {
  const project = await tempDir('svc-project-');
  const packagesDir = join(project, '.svc', 'packages');
  const goodArchive = rawAddonArchive([]);
  const badArchive = rawAddonArchive([tarEntry('package/dist/link.js', { type: 'SymbolicLink', linkpath: '/etc/passwd' })]);
  await writeFile(join(project, 'good.tgz'), goodArchive);
  await writeFile(join(project, 'bad.tgz'), badArchive);
  const sha256 = sha256Hex(goodArchive);
  await installAddon({ source: join(project, 'good.tgz'), sha256, packagesDir, dependenciesDir: DEPENDENCIES_DIR });
  const before = (await readdir(packagesDir)).sort();
  await assert.rejects(
    installAddon({ source: join(project, 'bad.tgz'), sha256: sha256Hex(badArchive), packagesDir, dependenciesDir: DEPENDENCIES_DIR }),
    AddonVerificationError,
  );
  assert.deepEqual((await readdir(packagesDir)).sort(), before);
  await verifyAddon({
    packagesDir,
    name: 'svc-store-raw',
    pin: { version: '0.1.0', sha256 },
    exportName: 'svc/store',
    dependenciesDir: DEPENDENCIES_DIR,
  });
});

#!/usr/bin/env node
// Builds the bundled addon archives: `node packages/addons/dist/build-addons.js <outDir>`: the
// store addons, then the provider packages (packages/provider-*) that are built, each with its
// committed signature beside it when that signature covers the archive as built.
import { existsSync } from 'node:fs';
import { appendFile, readdir, rm } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildProviderAddons, providerAddonDirs } from './build-provider-addons.js';
import { buildStoreAddons, STORE_ADDONS } from './build-store-addons.js';

const outDir = process.argv[2];
if (outDir === undefined || process.argv.length > 3) {
  process.stderr.write('usage: node packages/addons/dist/build-addons.js <outDir>\n');
  process.exit(2);
}
// dist/build-addons.js → packages/addons → packages → the repository root.
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
try {
  const packed = await buildStoreAddons(
    outDir,
    STORE_ADDONS.map((a) => ({ ...a, dir: join(root, a.dir) })),
  );
  for (const p of packed) process.stdout.write(`${p.sha256}  ${basename(p.archive)}\n`);
  const providerDirs = providerAddonDirs(root).filter((dir) => {
    if (existsSync(join(dir, 'dist'))) return true;
    process.stderr.write(`build-addons: ${dir} is not built (no dist/); its provider archive is not bundled\n`);
    return false;
  });
  // No signature of an earlier build survives into this one: each is copied again only if it
  // still covers the archive as built.
  for (const f of await readdir(resolve(outDir))) if (f.endsWith('.tgz.sig')) await rm(join(resolve(outDir), f));
  const providers = await buildProviderAddons(root, outDir, providerDirs);
  for (const p of providers) {
    process.stdout.write(`${p.sha256}  ${basename(p.archive)}\n`);
    // Not fatal: the archive is bundled unsigned and install refuses it (`unsigned`) until it is signed again.
    if (p.problem !== null) process.stderr.write(`build-addons: warning: ${p.problem}\n`);
  }
  await appendFile(join(resolve(outDir), 'SHA256SUMS'), providers.map((p) => `${p.sha256}  ${basename(p.archive)}\n`).join(''));
} catch (error) {
  process.stderr.write(`build-addons: ${(error as Error).message}\n`);
  process.exit(1);
}

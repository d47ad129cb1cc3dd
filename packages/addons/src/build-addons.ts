#!/usr/bin/env node
// Builds the store addon archives: `node packages/addons/dist/build-addons.js <outDir>`.
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
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
} catch (error) {
  process.stderr.write(`build-addons: ${(error as Error).message}\n`);
  process.exit(1);
}

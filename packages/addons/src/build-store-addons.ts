import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { STORE_OPERATIONS } from '@svc/core/store';
import type { AddonManifest } from './manifest.js';
import { type PackedAddon, packAddon } from './pack-addon.js';
import { writeAddonManifest } from './write-addon-manifest.js';

/** A store addon package to build: its directory and the native module it loads. */
export interface StoreAddonSource {
  readonly dir: string;
  readonly native: AddonManifest['native'];
}

/** The store addons of this repository, relative to its root. */
export const STORE_ADDONS: readonly StoreAddonSource[] = [
  { dir: 'packages/store-sqlite', native: { package: 'better-sqlite3', module: 'better_sqlite3' } },
  { dir: 'packages/store-postgres', native: null },
];

/**
 * Writes each store addon's `svc-addon.json` (export `:svc/store` → `./dist/index.js`
 * `svcStore`, core's operation set, the given native module) and packs it into `outDir`,
 * then writes `outDir/SHA256SUMS` in `sha256sum` format. The packages must be built first.
 *
 * @example
 * const packed = await buildStoreAddons('dist-addons', STORE_ADDONS.map((a) => ({ ...a, dir: join(root, a.dir) })));
 */
export async function buildStoreAddons(outDir: string, addons: readonly StoreAddonSource[]): Promise<PackedAddon[]> {
  const packed: PackedAddon[] = [];
  for (const addon of addons) {
    const pkg = JSON.parse(readFileSync(join(addon.dir, 'package.json'), 'utf8')) as { name: string; version: string };
    writeAddonManifest(addon.dir, {
      name: pkg.name,
      version: pkg.version,
      exports: { 'svc/store': { entry: './dist/index.js', export: 'svcStore' } },
      operations: [...STORE_OPERATIONS],
      native: addon.native,
    });
    packed.push(await packAddon(addon.dir, outDir));
  }
  const sums = packed.map((p) => `${p.sha256}  ${basename(p.archive)}\n`).join('');
  await writeFile(join(resolve(outDir), 'SHA256SUMS'), sums);
  return packed;
}

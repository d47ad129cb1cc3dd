import { mkdir, readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { readAddonArchive, sha256Hex } from './archive.js';
import { npmPack } from './npm-pack.js';

/** An archive made by {@link packAddon}. */
export interface PackedAddon {
  /** The absolute path of the `.tgz`. */
  readonly archive: string;
  /** Its SHA-256: the pin for `svc package install --sha256`. */
  readonly sha256: string;
  readonly name: string;
  readonly version: string;
}

/**
 * Packs an addon package with `npm pack` into `outDir` and returns the archive's SHA-256.
 * npm's tarballs are reproducible (fixed mtimes, sorted entries, fixed modes), so the same
 * files give the same digest. The archive is read back and refused if it could not be
 * installed, e.g. `svc-addon.json` missing from package.json's `"files"`.
 *
 * @example
 * const { archive, sha256 } = await packAddon('packages/store-sqlite', 'dist-addons');
 */
export async function packAddon(packageDir: string, outDir: string): Promise<PackedAddon> {
  const dest = resolve(outDir);
  await mkdir(dest, { recursive: true });
  const archive = await npmPack({ cwd: resolve(packageDir), dest });
  const data = await readFile(archive);
  const contents = await readAddonArchive(data);
  return { archive, sha256: sha256Hex(data), name: contents.name, version: contents.version };
}

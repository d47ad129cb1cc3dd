import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { addonPaths, installAddon } from '@svc/addons';
import { dependenciesDir, packagesDirOf } from './control.js';
import { RuntimeError } from './errors.js';
import type { Project } from './project.js';

/** A store addon archive shipped with this `svc` (built by `npm run build`). */
export interface BundledAddon {
  readonly name: string;
  readonly version: string;
  readonly archive: string;
  readonly sha256: string;
}

const BUNDLED_DIR = fileURLToPath(new URL('../addons/', import.meta.url));

/**
 * The bundled archive of `name`, from the build's `SHA256SUMS`, or null when this build has none.
 *
 * @example
 * const sqlite = bundledAddon('svc-store-sqlite'); // { version: '0.1.0', sha256: '…', archive: '…/svc-store-sqlite-0.1.0.tgz' }
 */
export function bundledAddon(name: string): BundledAddon | null {
  const sums = join(BUNDLED_DIR, 'SHA256SUMS');
  if (!existsSync(sums)) return null;
  // npm flattens a scoped name in the archive's file name: @svc/provider-oidc → svc-provider-oidc-0.1.0.tgz.
  const flat = name.replace(/^@/, '').replace('/', '-');
  for (const line of readFileSync(sums, 'utf8').split('\n')) {
    const m = /^([0-9a-f]{64}) {2}(.+)-(\d+\.\d+\.\d+[^/]*)\.tgz$/.exec(line.trim());
    if (m?.[2] === flat)
      return { name, version: m[3] as string, archive: join(BUNDLED_DIR, `${flat}-${m[3]}.tgz`), sha256: m[1] as string };
  }
  return null;
}

/** The bundled embedded store, or a clear error when the build did not produce it. */
export function bundledSqliteAddon(): BundledAddon {
  const addon = bundledAddon('svc-store-sqlite');
  if (addon === null) {
    throw new RuntimeError(`the bundled store addon archive is missing from ${BUNDLED_DIR}; run \`npm run build\` (npm ci does it)`);
  }
  return addon;
}

/**
 * Makes sure the project's pinned store addon is installed: when it is the bundled archive
 * (same name, version and digest) and nothing of it is installed yet, installs it. Anything
 * else, a damaged install included, is left to verification, which names what is wrong.
 *
 * @example
 * await installBundledStoreIfPinned(project);
 */
export async function installBundledStoreIfPinned(project: Project): Promise<void> {
  const name = project.config.store.package;
  if (name === null) return;
  const pin = project.config.packages[name];
  const bundled = bundledAddon(name);
  if (pin === undefined || bundled === null || pin.sha256 !== bundled.sha256 || pin.version !== bundled.version) return;
  // Only a missing install is filled in. A damaged one is left for verification to refuse:
  // quietly reinstalling would erase the evidence of tampering.
  const paths = addonPaths(packagesDirOf(project), name, pin.version);
  if (existsSync(paths.dir) || existsSync(paths.archive)) return;
  await installAddon({
    source: bundled.archive,
    sha256: bundled.sha256,
    packagesDir: packagesDirOf(project),
    dependenciesDir: dependenciesDir(),
  });
}

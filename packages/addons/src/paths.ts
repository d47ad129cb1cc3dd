import { join } from 'node:path';

/** Where an installed addon lives under `<project>/.svc/packages`. */
export interface AddonPaths {
  /** The kept archive, `<packagesDir>/<name>-<version>.tgz` (a scope's `@` and `/` flattened like npm's). */
  readonly archive: string;
  /** The unpacked package, `<packagesDir>/<name>@<version>/`. */
  readonly dir: string;
}

/**
 * The kept archive and install directory of `name@version`. Callers check the name and
 * version are safe path components first (`isSafePackageName`, `isSafeVersion`).
 *
 * @example
 * addonPaths('/srv/demo/.svc/packages', 'svc-store-sqlite', '0.1.0').dir; // .../svc-store-sqlite@0.1.0
 */
export function addonPaths(packagesDir: string, name: string, version: string): AddonPaths {
  const flat = name.replace(/^@/, '').replace('/', '-');
  return { archive: join(packagesDir, `${flat}-${version}.tgz`), dir: join(packagesDir, `${name}@${version}`) };
}

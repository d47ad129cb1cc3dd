import { resolve } from 'node:path';
import { AddonVerificationError } from './errors.js';
import { type VerifyAddonOptions, verifyInstalled } from './verify-addon.js';

/** A verified application package: what the confined module process needs to load its `svc/app` plugin. */
export interface VerifiedAppPackage {
  readonly name: string;
  readonly version: string;
  /** The install directory, absolute. */
  readonly packageDir: string;
  /** The absolute path of the `svc/app` entry file. */
  readonly entry: string;
  /** The JavaScript name the entry exports the Fastify plugin under. */
  readonly exportName: string;
  /**
   * The real (absolute) directories of the dependency closure it loads from outside its install:
   * with `packageDir`, everything of its own the confined process needs to read.
   */
  readonly dependencyDirs: readonly string[];
}

/**
 * Verifies an installed application package (`svc/app`) before any of its code runs, and does
 * NOT import it: an application module runs only in the confined module process (the server's
 * `startModuleHost`), never in the service's. The checks are the store addon's (pin, archive,
 * installed files, ownership and permissions, dependencies, manifest: no store operations, no
 * native module, no privileged export); the first failure throws an `AddonVerificationError`
 * whose one-line message names the package and the check. Whether the export is a plain Fastify
 * plugin is checked where it is loaded, in the confined process.
 *
 * @example
 * const app = await verifyAppPackage({ packagesDir, name: 'acme-web', pin, dependenciesDir });
 * const host = await startModuleHost({ modules: [{ name: `${app.name}@${app.version}`, ...app }] });
 */
export async function verifyAppPackage(opts: Omit<VerifyAddonOptions, 'exportName'>): Promise<VerifiedAppPackage> {
  const verified = await verifyInstalled({ ...opts, exportName: 'svc/app', trustedPublishers: null });
  const { manifest } = verified;
  const declared = manifest.exports['svc/app'];
  if (declared === undefined) {
    throw new AddonVerificationError(
      'export',
      `${manifest.name}@${manifest.version}`,
      'it does not export :svc/app',
      'activate :svc/app only for an application package',
      'application package',
    );
  }
  return {
    name: manifest.name,
    version: manifest.version,
    packageDir: resolve(verified.dir),
    entry: resolve(verified.entry),
    exportName: declared.export,
    dependencyDirs: verified.dependencyDirs,
  };
}

import { resolve } from 'node:path';
import { PROVIDER_EXPORT } from './manifest.js';
import type { PackageSigner } from './package-signature.js';
import { verifyInstalled } from './verify-addon.js';

/** What {@link verifyProviderPackage} needs: the install, the pin, and whom `project.edn` trusts. */
export interface VerifyProviderOptions {
  /** `<project>/.svc/packages`. */
  readonly packagesDir: string;
  readonly name: string;
  /** The `:svc/packages` entry (core's `PackagePin`). */
  readonly pin: { readonly version: string; readonly sha256: string | null };
  /** The `node_modules` directory this svc loads its own dependencies from (the one install linked). */
  readonly dependenciesDir: string;
  /** `:svc/trusted-publishers` (core's `ProjectConfig.trustedPublishers`): name → 64 hex Ed25519 public key. */
  readonly trustedPublishers: Readonly<Record<string, string>>;
}

/** A provider package that passed every check. Nothing of it has been imported. */
export interface VerifiedProvider {
  readonly name: string;
  readonly version: string;
  /** The install directory, absolute. */
  readonly packageDir: string;
  /** The absolute path of the `svc/auth-provider` entry file. */
  readonly entry: string;
  /** The JavaScript name the entry exports the `AuthProvider` under. */
  readonly exportName: string;
  /**
   * The real (absolute) directories of the dependency closure it loads from outside its install:
   * with `packageDir`, everything its confined process needs to read.
   */
  readonly dependencyDirs: readonly string[];
  readonly signer: PackageSigner;
}

/**
 * Verifies an installed provider package before any of its code runs, and does not import it
 * (it runs in a confined child process). Checks, in order: the install exists
 * (`not_installed`); the kept archive's SHA-256 equals the pin (`archive_digest`); the
 * signature kept beside it (`<archive>.sig`) is there (`unsigned`), is for this package,
 * version and archive digest and verifies (`bad_signature`), by a key of `trustedPublishers`
 * (`signer_not_trusted`); nothing is group- or world-writable or foreign-owned
 * (`permissions`); the installed files equal the archive's (`installed_files`); the
 * dependencies equal what install recorded (`dependencies`); the manifest names the pinned
 * package (`manifest`) and declares `svc/auth-provider` (`capability_missing`), no store
 * operations (`operation_set`), no native module (`native_module`), and an entry file that is
 * in the archive (`export`). The first failure throws an `AddonVerificationError` whose one-line
 * message names the package and the check.
 *
 * @example
 * const provider = await verifyProviderPackage({
 *   packagesDir: join(project, '.svc/packages'),
 *   name: '@svc/provider-oidc',
 *   pin: config.packages['@svc/provider-oidc'],
 *   dependenciesDir,
 *   trustedPublishers: config.trustedPublishers,
 * });
 * spawnConfined(provider.entry, provider.exportName, [provider.packageDir, ...provider.dependencyDirs]);
 */
export async function verifyProviderPackage(opts: VerifyProviderOptions): Promise<VerifiedProvider> {
  const verified = await verifyInstalled({ ...opts, exportName: PROVIDER_EXPORT });
  const declared = verified.manifest.exports[PROVIDER_EXPORT];
  if (declared === undefined || verified.signer === null) {
    // verifyInstalled refuses both already; a provider is never returned without them.
    throw new TypeError('verifyInstalled returned a provider without its export or signer');
  }
  return {
    name: verified.manifest.name,
    version: verified.manifest.version,
    packageDir: resolve(verified.dir),
    entry: resolve(verified.entry),
    exportName: declared.export,
    dependencyDirs: verified.dependencyDirs,
    signer: verified.signer,
  };
}

import { AddonVerificationError, type VerifiedProvider, verifyProviderPackage } from '@svc/addons';
import type { ProviderModuleConfig } from '@svc/core/config';
import { assertNotWritableByOthers, dependenciesDir, packagesDirOf } from './control.js';
import { RuntimeError } from './errors.js';
import type { Project } from './project.js';

/** A provider module of the project and its verified package (nothing of it imported yet). */
export interface VerifiedProviderModule {
  readonly module: ProviderModuleConfig;
  readonly verified: VerifiedProvider;
}

/**
 * Verifies the package of every provider module of the project (`:activate
 * [:svc/auth-provider]`), in `project.edn` order, before anything of them runs: the pin, the
 * signature kept beside the archive, that its signer is in `:svc/trusted-publishers`, the
 * installed files, the dependencies and the declared capability (`verifyProviderPackage`). Any
 * failure is one line naming the package and the check, and nothing starts. The result is what
 * the confined provider processes are started from.
 *
 * @example
 * const providers = await verifyProviderModules(project);
 */
export async function verifyProviderModules(project: Project): Promise<VerifiedProviderModule[]> {
  const { providers, packages, trustedPublishers } = project.config;
  if (providers.length === 0) return [];
  assertNotWritableByOthers(project.dir, 'the project directory');
  assertNotWritableByOthers(project.file, 'project.edn');
  const out: VerifiedProviderModule[] = [];
  for (const module of providers) {
    const pin = packages[module.package];
    if (pin === undefined)
      throw new RuntimeError(`${project.file}: :svc/modules :${module.alias}: a provider module comes from a pinned package`);
    try {
      const verified = await verifyProviderPackage({
        packagesDir: packagesDirOf(project),
        name: module.package,
        pin,
        dependenciesDir: dependenciesDir(),
        trustedPublishers,
      });
      out.push({ module, verified });
    } catch (error) {
      if (error instanceof AddonVerificationError) {
        throw new RuntimeError(`${error.message} (provider :${module.alias} was not started)`, { cause: error });
      }
      throw error;
    }
  }
  return out;
}

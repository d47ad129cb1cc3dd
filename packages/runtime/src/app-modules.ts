import { AddonVerificationError, verifyAppPackage } from '@svc/addons';
import { APP_CAPABILITY, PRIVILEGED_EXPORTS } from '@svc/core/settings';
import type { AppModule } from '@svc/server';
import { assertNotWritableByOthers, dependenciesDir, packagesDirOf } from './control.js';
import { RuntimeError } from './errors.js';
import type { Project } from './project.js';

/**
 * The application modules of a project (module mode of the gateway), in `project.edn` order:
 * every module that activates `:svc/app`. Each comes from a package pinned by the SHA-256 of its
 * archive and goes through the same verification as the store addon (archive digest against the
 * pin, installed files against the archive, ownership and permissions, the dependency closure
 * against the install's lock, and the manifest: an application package declares `svc/app`, no
 * store operations, no native module, and neither `svc/store` nor a privileged export).
 * Configuration validation has already refused a package activating a privileged export
 * (`:svc/auth`, `:svc/auth-provider`) or claiming the control store; this checks again. Nothing
 * of a module is imported here: the result goes to `startModuleHost`, which loads each plugin in
 * the confined module process, with `{ config }` (its module's `:config` map, EDN keys as
 * written, e.g. `:web/title`) as its options. Any failure is one line naming the package and the
 * check, and nothing is loaded. An empty list means no module mode.
 *
 * @example
 * const host = await startModuleHost({ modules: await loadAppModules(project), sharedDependencies: dependenciesDir() });
 * const app = await buildGatewayApp({ ...opts, attach: moduleHostAttach(host) });
 */
export async function loadAppModules(project: Project): Promise<AppModule[]> {
  const apps = Object.values(project.config.modules).filter((m) => m.activate.includes(APP_CAPABILITY));
  if (apps.length === 0) return [];
  assertNotWritableByOthers(project.dir, 'the project directory');
  assertNotWritableByOthers(project.file, 'project.edn');
  const modules: AppModule[] = [];
  for (const m of apps) {
    const name = m.package;
    const pin = name === null ? undefined : project.config.packages[name];
    if (name === null || pin === undefined) {
      throw new RuntimeError(`${project.file}: :svc/modules :${m.alias}: an application module comes from a pinned package`);
    }
    const privileged = m.activate.find((k) => PRIVILEGED_EXPORTS.some((p) => p.keyword === k) || k === 'svc/store');
    if (privileged !== undefined || name === project.config.store.package) {
      throw new RuntimeError(
        `${project.file}: :svc/modules :${m.alias}: package "${name}" may not activate the privileged export :${privileged ?? 'svc/store'}`,
      );
    }
    try {
      const verified = await verifyAppPackage({ packagesDir: packagesDirOf(project), name, pin, dependenciesDir: dependenciesDir() });
      modules.push({
        name: `${verified.name}@${verified.version} (:${m.alias})`,
        packageDir: verified.packageDir,
        entry: verified.entry,
        exportName: verified.exportName,
        dependencyDirs: verified.dependencyDirs,
        options: { config: m.config },
      });
    } catch (error) {
      if (error instanceof AddonVerificationError) {
        throw new RuntimeError(`${error.message} (no application module was loaded)`, { cause: error });
      }
      throw error;
    }
  }
  return modules;
}

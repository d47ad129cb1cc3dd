import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AddonVerificationError, installAddon, setPackagePin } from '@svc/addons';
import { ADDON_MANIFEST_FILE } from '@svc/core';
import { ConfigError, trustedPublishersOf } from '@svc/core/config';
import { bundledAddon } from './bundled-addons.js';
import { dependenciesDir } from './control.js';
import { formatProblem, parseEdn } from './edn.js';
import { RuntimeError } from './errors.js';
import { projectNameFor } from './project.js';

/**
 * The bundled archive matching `name` or `name@version` and the digest, so no fetch is needed;
 * else `source` as it is (a `name@version` for npm). A bundled name with another digest is
 * refused here, naming the digest as the problem: it is the pin that is wrong, not the name.
 */
function bundledSourceOrRefusal(source: string, sha256: string): string {
  const m = /^(@?[^@]+)(?:@(.+))?$/.exec(source);
  if (m === null) return source;
  const bundled = bundledAddon(m[1] as string);
  if (bundled === null || (m[2] !== undefined && m[2] !== bundled.version)) return source;
  if (bundled.sha256 !== sha256) {
    throw new RuntimeError(
      `the digest is wrong: the bundled ${bundled.name}@${bundled.version} archive's SHA-256 is not ${sha256}; nothing was installed; check the digest you were given for it (or give the archive's path)`,
      { code: 'addon_verification_failed' },
    );
  }
  return bundled.archive;
}

/**
 * The project.edn that `svc package install` starts a new project with (the spec's bootstrap
 * order: install, activate, init, enroll): the name, and a comment showing the activation that
 * is the operator's next step. The pin is added to it like to any project.edn.
 */
function minimalProjectEdn(project: string, pkg: string): string {
  return `;; Written by \`svc package install\`. Next: activate the store and bind the auth module to it,
;; by adding to the map below (then run \`svc auth init\`):
;;  :svc/modules {:store {:package ${JSON.stringify(pkg)} :activate [:svc/store]}
;;                :auth  {:module :svc/auth :config {:auth/store :store}}}
{:svc/project ${JSON.stringify(project)}}
`;
}

/** What {@link installPackage} installed, and where its pin was recorded. */
export interface InstalledPackage {
  readonly installed: Awaited<ReturnType<typeof installAddon>>;
  /** The project.edn that holds the pin now. */
  readonly file: string;
  /** Whether project.edn was written by this install (a new project: the store is to be activated next). */
  readonly fresh: boolean;
  /** What the package offers: a provider (signed), an application module, or a store. */
  readonly kind: 'provider' | 'app' | 'store';
}

/**
 * Installs an addon archive into a project: checks the archive's digest against `sha256` before
 * unpacking anything, installs it under `<PROJECT>/.svc/packages/` (keeping the archive), links
 * the dependencies this build already has (no network, no recompilation), verifies a provider
 * package's signature against the project's `:svc/trusted-publishers`, and records
 * `{:version :sha256}` under `:svc/packages` in `project.edn` atomically (comments and layout
 * kept; a new project gets a minimal one). A refused install leaves nothing behind.
 *
 * @example
 * const { installed } = await installPackage('./svc-store-postgres-0.1.0.tgz', './demo', { sha256, profile: null });
 */
export async function installPackage(
  sourceArg: string,
  dirArg: string,
  opts: { readonly sha256: string; readonly profile: string | null; readonly signatureFile?: string | undefined },
): Promise<InstalledPackage> {
  const { sha256 } = opts;
  const dir = resolve(dirArg);
  const file = join(dir, 'project.edn');
  // The spec's bootstrap order installs the store addon before `svc auth init`: with no
  // project.edn yet, one is written after the install, holding the name and the pin.
  const fresh = !existsSync(file);
  const source = existsSync(sourceArg) ? resolve(sourceArg) : bundledSourceOrRefusal(sourceArg, sha256);
  // The publishers a provider package's signature must be by: the project's own list (none yet in a new project).
  let trustedPublishers: Readonly<Record<string, string>> = {};
  if (!fresh) {
    try {
      const parsed = parseEdn(readFileSync(file, 'utf8'), file);
      if (parsed.problems.length > 0 || parsed.value === undefined) throw new ConfigError(parsed.problems);
      trustedPublishers = trustedPublishersOf(parsed.value, { file, profile: opts.profile });
    } catch (error) {
      if (error instanceof ConfigError) {
        const p = error.problems[0];
        throw new RuntimeError(p === undefined ? error.message : formatProblem(p), { code: 'config_invalid', cause: error });
      }
      throw new RuntimeError(`cannot read ${file}: ${(error as Error).message}`, { cause: error });
    }
  }
  // Owner-only, explicitly (as `svc auth init` makes it): what the service loads must not be writable by others.
  // A directory made here for a new project is removed again if the install is refused.
  const made = fresh && !existsSync(dir);
  if (fresh) mkdirSync(dir, { recursive: true, mode: 0o700 });
  let installed: Awaited<ReturnType<typeof installAddon>>;
  try {
    installed = await installAddon({
      source,
      sha256,
      packagesDir: join(dir, '.svc', 'packages'),
      dependenciesDir: dependenciesDir(),
      trustedPublishers,
      ...(opts.signatureFile === undefined ? {} : { signatureFile: resolve(opts.signatureFile) }),
    });
  } catch (error) {
    if (made) rmSync(dir, { recursive: true, force: true });
    if (error instanceof AddonVerificationError) throw new RuntimeError(error.message, { cause: error });
    throw new RuntimeError(`cannot install ${sourceArg}: ${(error as Error).message}`, { cause: error });
  }
  // Record the pin atomically, keeping the rest of project.edn (comments, layout) as it is.
  const before = fresh ? minimalProjectEdn(projectNameFor(dir), installed.name) : readFileSync(file, 'utf8');
  const edited = setPackagePin(before, installed.name, { version: installed.version, sha256: installed.sha256 });
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, edited, { mode: fresh ? 0o600 : statSync(file).mode & 0o777, flag: 'wx' });
  renameSync(tmp, file);
  const manifest = JSON.parse(readFileSync(join(installed.dir, ADDON_MANIFEST_FILE), 'utf8')) as { exports?: Record<string, unknown> };
  const kind = installed.signer !== null ? 'provider' : manifest.exports?.['svc/app'] !== undefined ? 'app' : 'store';
  return { installed, file, fresh, kind };
}

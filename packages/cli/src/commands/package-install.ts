import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AddonVerificationError, installAddon, setPackagePin } from '@svc/addons';
import { ADDON_MANIFEST_FILE } from '@svc/core';
import { ConfigError, trustedPublishersOf } from '@svc/core/config';
import { parseCommandArgs } from '../args.js';
import { bundledAddon } from '../bundled-addons.js';
import { CliError, UsageError } from '../cli-error.js';
import type { Command } from '../command.js';
import { dependenciesDir } from '../control.js';
import { formatProblem, parseEdn } from '../edn.js';
import { printJson, printText, shellQuote } from '../output.js';
import { chosenProfile, projectNameFor } from '../project.js';

const spec = {
  name: 'svc package install',
  summary: 'Install an addon archive pinned by its SHA-256, keep the archive in the project, and record the pin in project.edn.',
  usage: 'svc package install <ARCHIVE_OR_NAME> --sha256 <HEX> <PROJECT> [--signature FILE] [--profile NAME] [--json]',
  help: [
    '<ARCHIVE_OR_NAME>     a local .tgz archive, or name@version (fetched with npm; a bundled archive with that digest needs no network)',
    '--sha256 HEX          the SHA-256 of the archive (64 hex digits); a mismatch is refused before anything is unpacked',
    '<PROJECT>             the project directory',
    "--signature FILE      a provider package's detached signature (default: <ARCHIVE>.sig beside the archive); it must verify",
    '                      and be by a publisher of :svc/trusted-publishers in project.edn',
    '--profile NAME        the profile whose :svc/trusted-publishers apply (default: SVC_PROFILE, else none)',
    '--json                print {"name","version","sha256","dir","archive","signer"}',
  ],
  options: { sha256: { type: 'string' }, signature: { type: 'string' }, profile: { type: 'string' }, json: { type: 'boolean' } },
  positionals: ['ARCHIVE_OR_NAME', 'PROJECT'],
} as const;

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
    throw new CliError(
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

/**
 * `svc package install <ARCHIVE_OR_NAME> --sha256 <HEX> <PROJECT>`: checks the archive's digest
 * against the pin before unpacking anything, installs it under `<PROJECT>/.svc/packages/`
 * (keeping the archive), links the dependencies this `svc` already has (no network, no
 * recompilation), and records `{:version :sha256}` under `:svc/packages` in `project.edn`.
 *
 * @example
 * await packageInstall.run(['./svc-store-postgres-0.1.0.tgz', '--sha256', 'ab…', './demo']);
 */
export const packageInstall: Command = {
  path: ['package', 'install'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [sourceArg, dirArg] = args.positionals as [string, string];
    const given = args.values.sha256;
    if (given === undefined || given === '') throw new UsageError(`${spec.name}: --sha256 HEX is required; usage: ${spec.usage}`);
    const sha256 = given.toLowerCase();
    if (!/^[0-9a-f]{64}$/.test(sha256)) {
      throw new UsageError(
        `${spec.name}: the --sha256 digest is malformed (${given.length} characters); it must be the archive's SHA-256 as 64 hex digits`,
      );
    }
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
        trustedPublishers = trustedPublishersOf(parsed.value, { file, profile: chosenProfile(args.values.profile, process.env) });
      } catch (error) {
        if (error instanceof ConfigError) {
          const p = error.problems[0];
          throw new CliError(p === undefined ? error.message : formatProblem(p), { cause: error });
        }
        throw new CliError(`cannot read ${file}: ${(error as Error).message}`, { cause: error });
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
        ...(args.values.signature === undefined ? {} : { signatureFile: resolve(args.values.signature) }),
      });
    } catch (error) {
      if (made) rmSync(dir, { recursive: true, force: true });
      if (error instanceof AddonVerificationError) throw new CliError(error.message, { cause: error });
      throw new CliError(`cannot install ${sourceArg}: ${(error as Error).message}`, { cause: error });
    }
    // Record the pin atomically, keeping the rest of project.edn (comments, layout) as it is.
    const before = fresh ? minimalProjectEdn(projectNameFor(dir), installed.name) : readFileSync(file, 'utf8');
    const edited = setPackagePin(before, installed.name, { version: installed.version, sha256: installed.sha256 });
    const tmp = `${file}.tmp-${process.pid}`;
    writeFileSync(tmp, edited, { mode: fresh ? 0o600 : statSync(file).mode & 0o777, flag: 'wx' });
    renameSync(tmp, file);
    if (args.values.json === true) printJson(installed);
    else {
      printText(`installed ${installed.name}@${installed.version} (sha256 ${installed.sha256})`);
      printText(`  files:   ${installed.dir}`);
      printText(`  archive: ${installed.archive}`);
      if (installed.signer !== null) printText(`  signed by: ${installed.signer.name} (${installed.signer.publicKey})`);
      const manifest = JSON.parse(readFileSync(join(installed.dir, ADDON_MANIFEST_FILE), 'utf8')) as { exports?: Record<string, unknown> };
      if (installed.signer !== null) {
        printText(`pinned in ${file}; activate it with {:package "${installed.name}" :activate [:svc/auth-provider] :config {...}}`);
      } else if (manifest.exports?.['svc/app'] !== undefined) {
        printText(`pinned in ${file}; serve it behind the application gateway with {:package "${installed.name}" :activate [:svc/app]}`);
      } else {
        printText(`pinned in ${file}; activate it with {:package "${installed.name}" :activate [:svc/store]} and point :auth/store at it`);
      }
      if (fresh) printText(`${file} is new: activate the store in it (see its comment), then run \`svc auth init ${shellQuote(dirArg)}\``);
    }
    return 0;
  },
};

import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AddonVerificationError, installAddon, setPackagePin } from '@svc/addons';
import { ADDON_MANIFEST_FILE } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { bundledAddon } from '../bundled-addons.js';
import { CliError } from '../cli-error.js';
import type { Command } from '../command.js';
import { dependenciesDir } from '../control.js';
import { printJson, printText, shellQuote } from '../output.js';

const spec = {
  name: 'svc package install',
  summary: 'Install an addon archive pinned by its SHA-256, keep the archive in the project, and record the pin in project.edn.',
  usage: 'svc package install <ARCHIVE_OR_NAME> --sha256 <HEX> <PROJECT> [--json]',
  help: [
    '<ARCHIVE_OR_NAME>     a local .tgz archive, or name@version (fetched with npm; a bundled archive with that digest needs no network)',
    '--sha256 HEX          the SHA-256 of the archive (64 hex digits); a mismatch is refused before anything is unpacked',
    '<PROJECT>             the project directory',
    '--json                print {"name","version","sha256","dir","archive"}',
  ],
  options: { sha256: { type: 'string' }, json: { type: 'boolean' } },
  positionals: ['ARCHIVE_OR_NAME', 'PROJECT'],
} as const;

/** A bundled archive matching `name` or `name@version` and the digest, so no fetch is needed. */
function bundledSource(source: string, sha256: string): string | null {
  const m = /^(@?[^@]+)(?:@(.+))?$/.exec(source);
  if (m === null) return null;
  const bundled = bundledAddon(m[1] as string);
  if (bundled === null || bundled.sha256 !== sha256 || (m[2] !== undefined && m[2] !== bundled.version)) return null;
  return bundled.archive;
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
    const sha256 = args.values.sha256?.toLowerCase();
    if (sha256 === undefined || !/^[0-9a-f]{64}$/.test(sha256)) {
      throw new CliError('--sha256 must be the 64-hex-digit SHA-256 of the archive', { code: 'usage_error' });
    }
    const dir = resolve(dirArg);
    const file = join(dir, 'project.edn');
    if (!existsSync(file))
      throw new CliError(`no project at ${dir} (${file} does not exist); run \`svc auth init ${shellQuote(dirArg)}\` first`);
    const source = existsSync(sourceArg) ? resolve(sourceArg) : (bundledSource(sourceArg, sha256) ?? sourceArg);
    let installed: Awaited<ReturnType<typeof installAddon>>;
    try {
      installed = await installAddon({ source, sha256, packagesDir: join(dir, '.svc', 'packages'), dependenciesDir: dependenciesDir() });
    } catch (error) {
      if (error instanceof AddonVerificationError) throw new CliError(error.message, { cause: error });
      throw new CliError(`cannot install ${sourceArg}: ${(error as Error).message}`, { cause: error });
    }
    // Record the pin atomically, keeping the rest of project.edn (comments, layout) as it is.
    const edited = setPackagePin(readFileSync(file, 'utf8'), installed.name, { version: installed.version, sha256: installed.sha256 });
    const tmp = `${file}.tmp-${process.pid}`;
    writeFileSync(tmp, edited, { mode: statSync(file).mode & 0o777 });
    renameSync(tmp, file);
    if (args.values.json === true) printJson(installed);
    else {
      printText(`installed ${installed.name}@${installed.version} (sha256 ${installed.sha256})`);
      printText(`  files:   ${installed.dir}`);
      printText(`  archive: ${installed.archive}`);
      const manifest = JSON.parse(readFileSync(join(installed.dir, ADDON_MANIFEST_FILE), 'utf8')) as { exports?: Record<string, unknown> };
      if (manifest.exports?.['svc/app'] !== undefined) {
        printText(`pinned in ${file}; serve it behind the application gateway with {:package "${installed.name}" :activate [:svc/app]}`);
      } else {
        printText(`pinned in ${file}; activate it with {:package "${installed.name}" :activate [:svc/store]} and point :auth/store at it`);
      }
    }
    return 0;
  },
};

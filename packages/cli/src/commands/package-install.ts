import { chosenProfile, installPackage } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import type { Command } from '../command.js';
import { printJson, printText, shellQuote } from '../output.js';

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
    const { installed, file, fresh, kind } = await installPackage(sourceArg, dirArg, {
      sha256,
      profile: chosenProfile(args.values.profile, process.env),
      signatureFile: args.values.signature,
    });
    if (args.values.json === true) printJson(installed);
    else {
      printText(`installed ${installed.name}@${installed.version} (sha256 ${installed.sha256})`);
      printText(`  files:   ${installed.dir}`);
      printText(`  archive: ${installed.archive}`);
      if (installed.signer !== null) printText(`  signed by: ${installed.signer.name} (${installed.signer.publicKey})`);
      if (kind === 'provider') {
        printText(`pinned in ${file}; activate it with {:package "${installed.name}" :activate [:svc/auth-provider] :config {...}}`);
      } else if (kind === 'app') {
        printText(`pinned in ${file}; serve it behind the application gateway with {:package "${installed.name}" :activate [:svc/app]}`);
      } else {
        printText(`pinned in ${file}; activate it with {:package "${installed.name}" :activate [:svc/store]} and point :auth/store at it`);
      }
      if (fresh) printText(`${file} is new: activate the store in it (see its comment), then run \`svc auth init ${shellQuote(dirArg)}\``);
    }
    return 0;
  },
};

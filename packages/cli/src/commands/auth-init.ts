import { rfc3339 } from '@svc/core';
import { BOOTSTRAP_TOKEN_TTL_SECONDS, formatLimit } from '@svc/core/settings';
import { chosenProfile, type InitializedProject, initProject, RuntimeError } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { CliError, UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printLine, shellQuote } from '../output.js';

const spec = {
  name: 'svc auth init',
  summary: `Create a project, its control database and node key, and print a one-time bootstrap token (valid ${formatLimit(BOOTSTRAP_TOKEN_TTL_SECONDS, 'seconds')}).`,
  usage: 'svc auth init <PROJECT> [--json | --token-only] [--recover] [--profile NAME]',
  help: [
    '<PROJECT>             the project directory (created if missing; project.edn written if none)',
    '--json                print {"project","control_db","bootstrap_token","expires_at"}',
    '--token-only          print only the bootstrap token, to pipe into `svc auth enroll -`',
    '--recover             issue a new bootstrap token although a management device is enrolled (audited)',
    PROJECT_HELP,
  ],
  options: { json: { type: 'boolean' }, 'token-only': { type: 'boolean' }, recover: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc auth init <PROJECT>`: creates the project directory and a default `project.edn` when
 * missing, the control directory (0700), the control database (0600) and the node key (0600),
 * then issues a bootstrap token. The token is printed on stdout only, never logged or stored.
 *
 * @example
 * await authInit.run(['./demo', '--json']);
 */
export const authInit: Command = {
  path: ['auth', 'init'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    if (args.values.json === true && args.values['token-only'] === true) {
      throw new UsageError(`${spec.name}: --json and --token-only cannot be combined`);
    }
    const [dirArg] = args.positionals as [string];
    let init: InitializedProject;
    try {
      init = await initProject(dirArg, {
        profile: chosenProfile(args.values.profile, process.env),
        env: process.env,
        recover: args.values.recover === true,
      });
    } catch (error) {
      if (error instanceof RuntimeError && error.code === 'management_device_enrolled') {
        throw new CliError(
          `${error.message}; to issue a new bootstrap token anyway (audited), run \`svc auth init --recover ${shellQuote(dirArg)}\``,
          { cause: error },
        );
      }
      throw error;
    }
    const { project } = init;
    const expiresAt = rfc3339(init.expiresAt);
    if (args.values['token-only'] === true) {
      printLine(init.bootstrapToken);
    } else if (args.values.json === true) {
      printJson({ project: project.dir, control_db: init.controlStore, bootstrap_token: init.bootstrapToken, expires_at: expiresAt });
    } else {
      printLine(`project:         ${project.dir} (${project.config.project})`);
      printLine(`control db:      ${init.controlStore}`);
      printLine(`bootstrap token: ${init.bootstrapToken}`);
      printLine(`expires at:      ${expiresAt} (single use)${init.reason === 'recovery' ? ' [recovery, audited]' : ''}`);
      printLine('');
      printLine('Next, on the administrator device: generate a key (`svc auth keygen`), then run');
      printLine(`  svc auth enroll - ${shellQuote(dirArg)}`);
      printLine('and paste the token when it asks (it reads standard input; the token never goes in the arguments).');
    }
    return 0;
  },
};

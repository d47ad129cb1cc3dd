import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { issueBootstrapToken, rfc3339 } from '@svc/core';
import { ConfigError } from '@svc/core/config';
import { BOOTSTRAP_TOKEN_TTL_SECONDS, formatLimit } from '@svc/core/settings';
import { parseCommandArgs } from '../args.js';
import { bundledSqliteAddon, installBundledStoreIfPinned } from '../bundled-addons.js';
import { CliError, UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { controlStoreLocation, ensureControlDir, ensureNodeKey, initProjectId, makeDeps, openControlStore } from '../control.js';
import { createLogger } from '../logger.js';
import { printJson, printLine, shellQuote } from '../output.js';
import { chosenProfile, defaultProjectEdn, loadProject, projectNameFor } from '../project.js';

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
    const dir = resolve(dirArg);
    // Owner-only, explicitly (the umask may be 002): what the service loads must not be writable by others.
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const file = join(dir, 'project.edn');
    if (!existsSync(file)) writeFileSync(file, defaultProjectEdn(projectNameFor(dir), bundledSqliteAddon()), { flag: 'wx', mode: 0o600 });
    const project = loadProject(dir, { profile: chosenProfile(args.values.profile, process.env), env: process.env });
    // The embedded default is an addon too: installed from the bundled archive with its pin,
    // so the default path runs the same verification as any other addon.
    await installBundledStoreIfPinned(project);
    ensureControlDir(project.controlDir);
    const log = createLogger({ env: process.env, fallback: 'warn' });
    const store = await openControlStore(project, { create: true });
    try {
      ensureNodeKey(project.nodeKey);
      await initProjectId(store);
      const deps = await makeDeps(project, store, log);
      let issued: Awaited<ReturnType<typeof issueBootstrapToken>>;
      try {
        issued = await issueBootstrapToken(deps, { recovery: args.values.recover === true });
      } catch (error) {
        if (error instanceof ConfigError) {
          throw new CliError(
            `a management device is already enrolled in ${project.dir}; to issue a new bootstrap token anyway (audited), run \`svc auth init --recover ${shellQuote(dirArg)}\``,
          );
        }
        throw error;
      }
      const expiresAt = rfc3339(issued.expiresAt);
      if (args.values['token-only'] === true) {
        printLine(issued.token);
      } else if (args.values.json === true) {
        printJson({
          project: project.dir,
          control_db: controlStoreLocation(project),
          bootstrap_token: issued.token,
          expires_at: expiresAt,
        });
      } else {
        printLine(`project:         ${project.dir} (${project.config.project})`);
        printLine(`control db:      ${controlStoreLocation(project)}`);
        printLine(`bootstrap token: ${issued.token}`);
        printLine(`expires at:      ${expiresAt} (single use)${issued.reason === 'recovery' ? ' [recovery, audited]' : ''}`);
        printLine('');
        printLine('Next, on the administrator device: generate a key (`svc auth keygen`), then run');
        printLine(`  svc auth enroll - ${shellQuote(dirArg)}`);
        printLine('and paste the token when it asks (it reads standard input; the token never goes in the arguments).');
      }
      return 0;
    } finally {
      await store.close();
    }
  },
};

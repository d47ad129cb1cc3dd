import { parseCommandArgs } from '../args.js';
import { CliError } from '../cli-error.js';
import type { Command } from '../command.js';
import { credentialStore } from '../credentials.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc auth contexts use',
  summary: 'Make a saved sign-in (context) the current one, used when a command names no --context.',
  usage: 'svc auth contexts use <NAME> [--credentials FILE] [--json]',
  help: [
    '<NAME>                a context listed by `svc auth contexts`',
    '--credentials FILE    the credentials file (default: $SVC_CREDENTIALS, else ~/.config/svc/credentials.json)',
    '--json                print {"current"}',
  ],
  options: { credentials: { type: 'string' }, json: { type: 'boolean' } },
  positionals: ['NAME'],
} as const;

/**
 * `svc auth contexts use NAME`: switches the current context of the credentials file.
 *
 * @example
 * await authContextsUse.run(['application@app.example']);
 */
export const authContextsUse: Command = {
  path: ['auth', 'contexts', 'use'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [name] = args.positionals as [string];
    const store = credentialStore(args.values.credentials, name);
    try {
      store.use(name);
    } catch (error) {
      throw new CliError((error as Error).message, { cause: error });
    }
    if (args.values.json === true) printJson({ current: name });
    else printText(`current context: ${name}`);
    return 0;
  },
};

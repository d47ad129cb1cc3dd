import { parseCommandArgs } from '../args.js';
import type { Command } from '../command.js';
import { SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printUser } from '../operator-output.js';
import { subjectArgument } from '../user-options.js';

const spec = {
  name: 'svc auth users show',
  summary: 'Show one user: its attributes, where each came from, its status and last sign-in.',
  usage: 'svc auth users show <SUBJECT> [--json]',
  help: ['<SUBJECT>             the sub_... id (see `svc auth users`)', '--json                print {"user": User}', ...SESSION_HELP],
  options: { ...SESSION_OPTIONS },
  positionals: ['SUBJECT'],
} as const;

/**
 * `svc auth users show <SUBJECT>`: `GET /v1/auth/users/:subject`.
 *
 * @example
 * await authUsersShow.run(['sub_01J...', '--json']);
 */
export const authUsersShow: Command = {
  path: ['auth', 'users', 'show'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const subject = subjectArgument(spec.name, args.positionals[0]);
    const { user } = await viaApi(args.values, 'reading the user failed', (api, token) => api.user(token, subject));
    printUser(user, args.values.json === true);
    return 0;
  },
};

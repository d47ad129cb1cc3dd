import { parseCommandArgs } from '../args.js';
import type { Command } from '../command.js';
import { SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printUser } from '../operator-output.js';
import { printText } from '../output.js';
import { subjectArgument } from '../user-options.js';

const spec = {
  name: 'svc auth users enable',
  summary: 'Enable a disabled user: sign-in works again (its revoked sessions stay revoked).',
  usage: 'svc auth users enable <SUBJECT> [--json]',
  help: [
    '<SUBJECT>             the sub_... id (see `svc auth users`)',
    '--json                print {"user": User, "revoked_sessions"}',
    ...SESSION_HELP,
  ],
  options: { ...SESSION_OPTIONS },
  positionals: ['SUBJECT'],
} as const;

/**
 * `svc auth users enable <SUBJECT>`: `POST /v1/auth/users/:subject/enable`.
 *
 * @example
 * await authUsersEnable.run(['sub_01J...']);
 */
export const authUsersEnable: Command = {
  path: ['auth', 'users', 'enable'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const subject = subjectArgument(spec.name, args.positionals[0]);
    const result = await viaApi(args.values, 'enable refused', (api, token) => api.enableUser(token, subject), {
      invalidRequest: 'refusal',
    });
    if (args.values.json === true) printUser(result.user, true, { revoked_sessions: result.revoked_sessions });
    else printText(`enabled user ${result.user.subject}; revoked ${result.revoked_sessions} session(s)`);
    return 0;
  },
};

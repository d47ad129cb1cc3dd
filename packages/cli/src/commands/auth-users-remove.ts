import { parseCommandArgs } from '../args.js';
import type { Command } from '../command.js';
import { SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printJson, printText } from '../output.js';
import { subjectArgument } from '../user-options.js';

const spec = {
  name: 'svc auth users remove',
  summary: 'Remove a user with its devices and links, revoking its sessions (audited; refuses the last management user).',
  usage: 'svc auth users remove <SUBJECT> [--json]',
  help: [
    '<SUBJECT>             the sub_... id (see `svc auth users`)',
    '--json                print {"subject","removed","revoked_sessions","removed_devices","removed_links"}',
    ...SESSION_HELP,
  ],
  options: { ...SESSION_OPTIONS },
  positionals: ['SUBJECT'],
} as const;

/**
 * `svc auth users remove <SUBJECT>`: `DELETE /v1/auth/users/:subject`.
 *
 * @example
 * await authUsersRemove.run(['sub_01J...', '--json']);
 */
export const authUsersRemove: Command = {
  path: ['auth', 'users', 'remove'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const subject = subjectArgument(spec.name, args.positionals[0]);
    const r = await viaApi(args.values, 'user removal refused', (api, token) => api.removeUser(token, subject), {
      invalidRequest: 'refusal',
    });
    if (args.values.json === true) printJson(r);
    else
      printText(
        `removed user ${r.subject}; revoked ${r.revoked_sessions} session(s), removed ${r.removed_devices} device(s) and ${r.removed_links} link(s)`,
      );
    return 0;
  },
};

import { isRealm, type UserCreateBody } from '@svc/core';
import { parseCommandArgs, requireOption } from '../args.js';
import { UsageError } from '../cli-error.js';
import type { Command } from '../command.js';
import { SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printUser } from '../operator-output.js';
import { printText } from '../output.js';
import { groupsOption } from '../user-options.js';

const spec = {
  name: 'svc auth users add',
  summary: 'Add a user without a credential yet (then pair a device or link a login to it with `svc auth pair --subject`).',
  usage: 'svc auth users add --realm R [--name N] [--email E] [--email-verified] [--groups a,b] [--json]',
  help: [
    '--realm REALM         management or application',
    '--name NAME           the display name',
    '--email EMAIL         the email address (an internationalised domain is kept in its A-label form)',
    '--email-verified      the email address is verified (you checked it)',
    '--groups a,b          the groups, comma-separated (each [a-z0-9][a-z0-9._-]{0,63})',
    '--json                print {"user": User}',
    ...SESSION_HELP,
  ],
  options: {
    realm: { type: 'string' },
    name: { type: 'string' },
    email: { type: 'string' },
    'email-verified': { type: 'boolean' },
    groups: { type: 'string' },
    ...SESSION_OPTIONS,
  },
  positionals: [],
} as const;

/**
 * `svc auth users add --realm R ...`: `POST /v1/auth/users`, the operator owning what it sets.
 *
 * @example
 * await authUsersAdd.run(['--realm', 'application', '--email', 'ada@example.com', '--groups', 'ops']);
 */
export const authUsersAdd: Command = {
  path: ['auth', 'users', 'add'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const realm = requireOption(args.values.realm, '--realm REALM', spec.name);
    if (!isRealm(realm)) throw new UsageError(`${spec.name}: --realm must be management or application`);
    const { name, email, groups } = args.values;
    if (args.values['email-verified'] === true && email === undefined) {
      throw new UsageError(`${spec.name}: --email-verified needs --email`);
    }
    const body: UserCreateBody = {
      realm,
      ...(name === undefined ? {} : { name }),
      ...(email === undefined ? {} : { email }),
      ...(args.values['email-verified'] === true ? { email_verified: true } : {}),
      ...(groups === undefined ? {} : { groups: groupsOption(groups) }),
    };
    const { user } = await viaApi(args.values, 'adding the user refused', (api, token) => api.addUser(token, body));
    if (args.values.json === true) printUser(user, true);
    else printText(`added user ${user.subject} (${user.realm})`);
    return 0;
  },
};

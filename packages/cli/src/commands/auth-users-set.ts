import type { UserChangeBody } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import type { Command } from '../command.js';
import { SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printUser } from '../operator-output.js';
import { printText } from '../output.js';
import { groupsOption, subjectArgument } from '../user-options.js';

const spec = {
  name: 'svc auth users set',
  summary: "Change a user's name, email or groups (what you set stays yours: a sign-in provider no longer refreshes it).",
  usage:
    'svc auth users set <SUBJECT> [--name N | --clear-name] [--email E | --clear-email] [--email-verified | --email-unverified] [--groups a,b | --clear-groups] [--json]',
  help: [
    '<SUBJECT>             the sub_... id (see `svc auth users`)',
    '--name NAME           the display name',
    '--email EMAIL         the email address (a new one is unverified unless --email-verified)',
    '--email-verified      the email address is verified',
    '--email-unverified    the email address is not verified',
    '--groups a,b          the groups, comma-separated (replaces them all)',
    '--clear-name, --clear-email, --clear-groups',
    '                      unset it (a sign-in provider may then set it again)',
    '--json                print {"user": User}',
    ...SESSION_HELP,
  ],
  options: {
    name: { type: 'string' },
    email: { type: 'string' },
    'email-verified': { type: 'boolean' },
    'email-unverified': { type: 'boolean' },
    groups: { type: 'string' },
    'clear-name': { type: 'boolean' },
    'clear-email': { type: 'boolean' },
    'clear-groups': { type: 'boolean' },
    ...SESSION_OPTIONS,
  },
  positionals: ['SUBJECT'],
} as const;

/**
 * `svc auth users set <SUBJECT> ...`: `PATCH /v1/auth/users/:subject` with what was given.
 *
 * @example
 * await authUsersSet.run(['sub_01J...', '--groups', 'ops,dev']);
 */
export const authUsersSet: Command = {
  path: ['auth', 'users', 'set'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const subject = subjectArgument(spec.name, args.positionals[0]);
    const v = args.values;
    const both = (a: string, b: string, x: unknown, y: unknown) => {
      if (x !== undefined && x !== false && y === true) throw new UsageError(`${spec.name}: give ${a} or ${b}, not both`);
    };
    both('--name', '--clear-name', v.name, v['clear-name']);
    both('--email', '--clear-email', v.email, v['clear-email']);
    both('--groups', '--clear-groups', v.groups, v['clear-groups']);
    both('--email-verified', '--email-unverified', v['email-verified'], v['email-unverified']);
    if (v['clear-email'] === true && v['email-verified'] === true) throw new UsageError(`${spec.name}: --email-verified needs an email`);
    const body: { -readonly [K in keyof UserChangeBody]: UserChangeBody[K] } = {};
    if (v.name !== undefined) body.name = v.name;
    if (v['clear-name'] === true) body.name = null;
    if (v.email !== undefined) body.email = v.email;
    if (v['clear-email'] === true) body.email = null;
    if (v['email-verified'] === true) body.email_verified = true;
    if (v['email-unverified'] === true) body.email_verified = false;
    if (v.groups !== undefined) body.groups = groupsOption(v.groups);
    if (v['clear-groups'] === true) body.groups = null;
    if (Object.keys(body).length === 0) throw new UsageError(`${spec.name}: nothing to change; see \`${spec.name} --help\``);
    const { user } = await viaApi(v, 'changing the user refused', (api, token) => api.changeUser(token, subject, body));
    if (v.json === true) printUser(user, true);
    else printText(`changed user ${user.subject}`);
    return 0;
  },
};

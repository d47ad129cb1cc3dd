import { isRealm, USER_STATUSES, USERS_PAGE_MAX, type UserStatus } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import type { Command } from '../command.js';
import { SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printUsers } from '../operator-output.js';
import { subjectArgument } from '../user-options.js';

const spec = {
  name: 'svc auth users',
  summary: 'List the users (who each subject is, its status and groups) over the management API, one page at a time.',
  usage: 'svc auth users [--realm R] [--status S] [--group G] [--email E] [--filter TEXT] [--limit N] [--after SUBJECT] [--json]',
  help: [
    '--realm REALM         only users of that realm (management or application)',
    '--status STATUS       only active or only disabled users',
    '--group GROUP         only members of that group',
    '--email EMAIL         only the user with that email',
    '--filter TEXT         only users whose name, email or user name contains TEXT (any letter case)',
    `--limit N             at most N users (1 to ${USERS_PAGE_MAX}, default 100)`,
    '--after SUBJECT       the page after that subject (the `next` of the previous page)',
    '--json                print {"users": [User], "next"}',
    ...SESSION_HELP,
  ],
  options: {
    realm: { type: 'string' },
    status: { type: 'string' },
    group: { type: 'string' },
    email: { type: 'string' },
    filter: { type: 'string' },
    limit: { type: 'string' },
    after: { type: 'string' },
    ...SESSION_OPTIONS,
  },
  positionals: [],
} as const;

/**
 * `svc auth users`: a page of `GET /v1/auth/users`, as a table (with the command for the next
 * page) or JSON.
 *
 * @example
 * await authUsers.run(['--group', 'ops', '--json']);
 */
export const authUsers: Command = {
  path: ['auth', 'users'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const { realm, status, group, email, filter, limit, after } = args.values;
    if (realm !== undefined && !isRealm(realm)) throw new UsageError(`${spec.name}: --realm must be management or application`);
    if (status !== undefined && !USER_STATUSES.includes(status as UserStatus)) {
      throw new UsageError(`${spec.name}: --status must be ${USER_STATUSES.join(' or ')}`);
    }
    let count: number | undefined;
    if (limit !== undefined) {
      count = /^[1-9][0-9]{0,3}$/.test(limit) ? Number(limit) : Number.NaN;
      if (!(count <= USERS_PAGE_MAX)) throw new UsageError(`${spec.name}: --limit must be a whole number from 1 to ${USERS_PAGE_MAX}`);
    }
    if (after !== undefined) subjectArgument(`${spec.name} --after`, after);
    const page = await viaApi(args.values, 'listing users failed', (api, token) =>
      api.users(token, {
        ...(realm === undefined ? {} : { realm }),
        ...(status === undefined ? {} : { status: status as UserStatus }),
        ...(group === undefined ? {} : { group }),
        ...(email === undefined ? {} : { email }),
        ...(filter === undefined ? {} : { filter }),
        ...(count === undefined ? {} : { limit: count }),
        ...(after === undefined ? {} : { after }),
      }),
    );
    printUsers(page, args.values.json === true);
    return 0;
  },
};

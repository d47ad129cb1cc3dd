import { isRealm } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import type { Command } from '../command.js';
import { SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printGroups } from '../operator-output.js';

const spec = {
  name: 'svc auth groups',
  summary: 'List the groups of the users, with their member counts, over the management API.',
  usage: 'svc auth groups [--realm R] [--json]',
  help: ['--realm REALM         only groups of that realm', '--json                print {"groups": [Group]}', ...SESSION_HELP],
  options: { realm: { type: 'string' }, ...SESSION_OPTIONS },
  positionals: [],
} as const;

/**
 * `svc auth groups`: `GET /v1/auth/groups`.
 *
 * @example
 * await authGroups.run(['--realm', 'application']);
 */
export const authGroups: Command = {
  path: ['auth', 'groups'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const realm = args.values.realm;
    if (realm !== undefined && !isRealm(realm)) throw new UsageError(`${spec.name}: --realm must be management or application`);
    const { groups } = await viaApi(args.values, 'listing groups failed', (api, token) =>
      api.groups(token, realm === undefined ? {} : { realm }),
    );
    printGroups(groups, args.values.json === true);
    return 0;
  },
};

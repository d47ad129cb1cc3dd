import { isIdOfKind } from '@svc/core';
import { parseCommandArgs } from './args.js';
import { UsageError } from './cli-error.js';
import type { Command } from './command.js';
import { SESSION_HELP, SESSION_OPTIONS, viaApi } from './operator-api.js';
import { printUser } from './operator-output.js';
import { printText } from './output.js';

/**
 * The `<SUBJECT>` of a user command: a subject id, or a usage error (exit 2), so that an
 * `invalid_request` the API answers later is about the request, not the argument.
 *
 * @example
 * const subject = subjectArgument(spec.name, args.positionals[0]);
 */
export function subjectArgument(command: string, value: string | undefined): string {
  if (value === undefined || !isIdOfKind(value, 'subject')) {
    throw new UsageError(`${command}: <SUBJECT> must be a subject id (sub_..., see \`svc auth users\`)`);
  }
  return value;
}

/**
 * The groups of `--groups a,b`: comma-separated names, blanks around them ignored; an empty
 * value is no group at all (the API checks each name).
 *
 * @example
 * groupsOption('ops, dev'); // ['ops', 'dev']
 */
export function groupsOption(value: string): string[] {
  return value
    .split(',')
    .map((g) => g.trim())
    .filter((g) => g !== '');
}

/**
 * `svc auth users disable|enable <SUBJECT>`: the one change of status, over the management API
 * (`POST /v1/auth/users/:subject/<action>`), printed as the user (`--json`) or one line.
 *
 * @example
 * export const authUsersDisable = userStatusCommand('disable', 'Disable a user: ...');
 */
export function userStatusCommand(action: 'disable' | 'enable', summary: string): Command {
  const spec = {
    name: `svc auth users ${action}`,
    summary,
    usage: `svc auth users ${action} <SUBJECT> [--json]`,
    help: [
      '<SUBJECT>             the sub_... id (see `svc auth users`)',
      '--json                print {"user": User, "revoked_sessions"}',
      ...SESSION_HELP,
    ],
    options: { ...SESSION_OPTIONS },
    positionals: ['SUBJECT'],
  } as const;
  return {
    path: ['auth', 'users', action],
    summary,
    async run(argv) {
      const args = parseCommandArgs(spec, argv);
      if (args === null) return 0;
      const subject = subjectArgument(spec.name, args.positionals[0]);
      const result = await viaApi(
        args.values,
        `${action} refused`,
        (api, token) => (action === 'disable' ? api.disableUser(token, subject) : api.enableUser(token, subject)),
        { invalidRequest: 'refusal' },
      );
      if (args.values.json === true) printUser(result.user, true, { revoked_sessions: result.revoked_sessions });
      else if (action === 'disable') printText(`disabled user ${result.user.subject}; revoked ${result.revoked_sessions} session(s)`);
      else printText(`enabled user ${result.user.subject}: sign-in works again (its revoked sessions stay revoked)`);
      return 0;
    },
  };
}

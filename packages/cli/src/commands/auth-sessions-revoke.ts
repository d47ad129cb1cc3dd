import { isIdOfKind, makePrincipal, revokeSession, rfc3339 } from '@svc/core';
import { withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { explainFailure } from '../errors-map.js';
import { checkMode, SESSION_HELP, SESSION_OPTIONS, viaApi, viaOwnSession } from '../operator-api.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc auth sessions revoke',
  summary: 'Revoke a session immediately (audited as revoked by the operator, or by the signed-in device over the API).',
  usage: 'svc auth sessions revoke (<SESSION_ID> [<PROJECT>] | --others) [--json]',
  help: [
    '<SESSION_ID>          the ses_... id (see `svc auth sessions`)',
    '<PROJECT>             the project directory (offline); without it, the management API with the saved session',
    '--others              revoke all your other sessions (sign out everywhere else), keeping this one; with an',
    '                      application login, over the application gateway',
    '--json                print {"session_id","revoked"} (with --others, {"revoked": [SESSION_ID]})',
    PROJECT_HELP,
    ...SESSION_HELP,
  ],
  options: { others: { type: 'boolean' }, ...SESSION_OPTIONS, ...PROJECT_OPTIONS },
  positionals: ['SESSION_ID', 'PROJECT'],
  optionalPositionals: 2,
} as const;

/** The subject recorded for changes made offline by whoever holds the control directory. */
export const OPERATOR_SUBJECT = 'operator-cli';

/**
 * `svc auth sessions revoke <SESSION_ID> [<PROJECT>]`: core `revokeSession` with an operator
 * principal (the holder of the control directory), so the event says who did it; without a
 * project, `POST /v1/auth/revoke {"session_id"}` as the signed-in management device.
 *
 * @example
 * await authSessionsRevoke.run(['ses_01J...', './demo']);
 */
export const authSessionsRevoke: Command = {
  path: ['auth', 'sessions', 'revoke'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [sessionId, dir] = args.positionals as [string | undefined, string | undefined];
    checkMode(spec.name, dir, args.values);
    if (args.values.others === true) {
      if (sessionId !== undefined) {
        throw new UsageError(
          `${spec.name}: --others revokes your other sessions over the management API; give no <SESSION_ID> or <PROJECT>`,
        );
      }
      // Self-service: the signed-in subject of the saved session, in either realm.
      const { revoked } = await viaOwnSession(args.values, 'revoking your other sessions failed', (api, token) =>
        api.revokeOtherSessions(token),
      );
      if (args.values.json === true) printJson({ revoked });
      else printText(revoked.length === 0 ? 'no other sessions to revoke' : revoked.map((id) => `session ${id} revoked`).join('\n'));
      return 0;
    }
    if (sessionId === undefined) throw new UsageError(`${spec.name}: give <SESSION_ID> (or --others); see \`${spec.name} --help\``);
    if (!isIdOfKind(sessionId, 'session')) throw new UsageError(`${spec.name}: <SESSION_ID> must be a session id (ses_...)`);
    const what = 'revocation refused';
    const result =
      dir === undefined
        ? await viaApi(args.values, what, (api, token) => api.revoke(token, sessionId))
        : await withProject(dir, args.values.profile, async ({ deps }) => {
            const now = rfc3339(deps.clock.now());
            const operator = makePrincipal({
              subject: OPERATOR_SUBJECT,
              realm: 'management',
              session: OPERATOR_SUBJECT,
              device: OPERATOR_SUBJECT,
              claims: { amr: ['control-dir'], auth_time: now, exp: now },
            });
            try {
              return await revokeSession(deps, { principal: operator, sessionId });
            } catch (error) {
              throw explainFailure(what, error);
            }
          });
    if (args.values.json === true) printJson(result);
    else printText(`session ${result.session_id} revoked`);
    return 0;
  },
};

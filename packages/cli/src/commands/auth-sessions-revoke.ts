import { makePrincipal, revokeSession, rfc3339 } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { explainFailure } from '../errors-map.js';
import { printJson, printLine } from '../output.js';
import { withProject } from '../session.js';

const spec = {
  name: 'svc auth sessions revoke',
  summary: 'Revoke a session immediately (audited as revoked by the operator).',
  usage: 'svc auth sessions revoke <SESSION_ID> <PROJECT> [--json]',
  help: [
    '<SESSION_ID>          the ses_... id (see `svc auth sessions`)',
    '<PROJECT>             the project directory',
    '--json                print {"session_id","revoked"}',
    PROJECT_HELP,
  ],
  options: { json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['SESSION_ID', 'PROJECT'],
} as const;

/** The subject recorded for changes made offline by whoever holds the control directory. */
export const OPERATOR_SUBJECT = 'operator-cli';

/**
 * `svc auth sessions revoke <SESSION_ID> <PROJECT>`: core `revokeSession` with an operator
 * principal (the holder of the control directory), so the event says who did it.
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
    const [sessionId, dir] = args.positionals as [string, string];
    return withProject(dir, args.values.profile, async ({ deps }) => {
      const now = rfc3339(deps.clock.now());
      const operator = makePrincipal({
        subject: OPERATOR_SUBJECT,
        realm: 'management',
        session: OPERATOR_SUBJECT,
        device: OPERATOR_SUBJECT,
        claims: { amr: ['control-dir'], auth_time: now, exp: now },
      });
      let result: Awaited<ReturnType<typeof revokeSession>>;
      try {
        result = await revokeSession(deps, { principal: operator, sessionId });
      } catch (error) {
        throw explainFailure('revocation refused', error);
      }
      if (args.values.json === true) printJson(result);
      else printLine(`session ${result.session_id} revoked`);
      return 0;
    });
  },
};

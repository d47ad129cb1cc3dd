import { isRealm, type SessionJson, sessionToJson } from '@svc/core';
import { withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { checkMode, SESSION_HELP, SESSION_OPTIONS, viaApi, viaOwnSession } from '../operator-api.js';
import { printSessions } from '../operator-output.js';

const spec = {
  name: 'svc auth sessions',
  summary: 'List the active sessions, newest first: offline on a project, or over the management API.',
  usage: 'svc auth sessions [<PROJECT>] [--realm REALM] [--mine] [--json]',
  help: [
    '<PROJECT>             the project directory (offline); without it, the management API with the saved session',
    '--realm REALM         only sessions of that realm',
    "--mine                only your own (the signed-in subject's), over the API of the saved sign-in's realm",
    '                      (the management API, or the application gateway after an application login)',
    '--json                print {"sessions": [Session]}',
    PROJECT_HELP,
    ...SESSION_HELP,
  ],
  options: { realm: { type: 'string' }, mine: { type: 'boolean' }, ...SESSION_OPTIONS, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
  optionalPositionals: 1,
} as const;

/**
 * `svc auth sessions [<PROJECT>]`: active sessions, no token material, from the project's store
 * or from `GET /v1/auth/sessions`; the same table (or JSON) either way.
 *
 * @example
 * await authSessions.run(['./demo', '--json']);
 */
export const authSessions: Command = {
  path: ['auth', 'sessions'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const realm = args.values.realm;
    if (realm !== undefined && !isRealm(realm)) throw new UsageError(`${spec.name}: --realm must be management or application`);
    const [dir] = args.positionals as [string | undefined];
    checkMode(spec.name, dir, args.values);
    const mine = args.values.mine === true;
    if (mine && dir !== undefined)
      throw new UsageError(`${spec.name}: --mine lists the signed-in subject's sessions over the management API; drop <PROJECT>`);
    let sessions: readonly SessionJson[];
    if (dir !== undefined) {
      sessions = await withProject(dir, args.values.profile, async ({ store }) =>
        (await store.listActiveSessions(realm === undefined ? { now: Date.now() } : { now: Date.now(), realm })).map(sessionToJson),
      );
    } else {
      // --mine is self-service: the signed-in subject of the saved session, in either realm.
      const listed = mine
        ? await viaOwnSession(args.values, 'listing your sessions failed', (api, token) => api.ownSessions(token))
        : await viaApi(args.values, 'listing sessions failed', (api, token) => api.sessions(token));
      sessions = listed.sessions.filter((s) => realm === undefined || s.realm === realm);
    }
    printSessions(sessions, args.values.json === true);
    return 0;
  },
};

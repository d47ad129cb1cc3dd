import { isRealm, sessionToJson } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printLine } from '../output.js';
import { withProject } from '../session.js';

const spec = {
  name: 'svc auth sessions',
  summary: 'List the active sessions, newest first (offline, on the project).',
  usage: 'svc auth sessions <PROJECT> [--realm REALM] [--json]',
  help: [
    '<PROJECT>             the project directory',
    '--realm REALM         only sessions of that realm',
    '--json                print {"sessions": [Session]}',
    PROJECT_HELP,
  ],
  options: { realm: { type: 'string' }, json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc auth sessions <PROJECT>`: active sessions, no token material.
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
    const [dir] = args.positionals as [string];
    return withProject(dir, args.values.profile, async ({ store }) => {
      const sessions = (await store.listActiveSessions(realm === undefined ? { now: Date.now() } : { now: Date.now(), realm })).map(
        sessionToJson,
      );
      if (args.values.json === true) printJson({ sessions });
      else if (sessions.length === 0) printLine('no active sessions');
      else
        for (const s of sessions)
          printLine(`${s.id}  ${s.realm.padEnd(11)}  device ${s.device_id}  since ${s.created_at}  generation ${s.generation}`);
      return 0;
    });
  },
};

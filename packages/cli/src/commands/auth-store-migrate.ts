import { chosenProfile, loadProject, migrateProjectStore } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc auth store migrate',
  summary:
    'Copy the whole control state into another, empty store module of project.edn (SQLite to PostgreSQL and back), with the service stopped: users, devices, passkeys, links, the audit chain (verified, continued with store.migrated), and with --sessions the live sessions.',
  usage: 'svc auth store migrate <PROJECT> --to ALIAS [--sessions] [--json]',
  help: [
    '<PROJECT>             the project directory; its :auth/store module is the source',
    '--to ALIAS            the target: another store module in :svc/modules (e.g. pg for :pg), empty; its password comes from its',
    '                      secret reference in project.edn, never from the command line',
    '--sessions            also copy live sessions (token digests, refresh grace, DPoP records): users stay signed in;',
    '                      without it every device and passkey signs in again',
    '--json                print {"from","to","sessions","live_sessions_left","copied","audit_events","audit_head","switch"}',
    PROJECT_HELP,
  ],
  options: { to: { type: 'string' }, sessions: { type: 'boolean' }, json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc auth store migrate <PROJECT> --to ALIAS [--sessions]`: the runtime's
 * `migrateProjectStore`, printed; then what to change in project.edn to switch.
 *
 * @example
 * await authStoreMigrate.run(['./demo', '--to', 'pg', '--sessions']);
 */
export const authStoreMigrate: Command = {
  path: ['auth', 'store', 'migrate'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir] = args.positionals as [string];
    const to = args.values.to;
    if (to === undefined || to === '' || to === ':')
      throw new UsageError(`${spec.name}: --to ALIAS is required (a store module of project.edn, e.g. --to pg)`);
    const project = loadProject(dir, { profile: chosenProfile(args.values.profile, process.env), env: process.env });
    const sessions = args.values.sessions === true;
    const moved = await migrateProjectStore(project, { to, sessions });
    const change = `:auth/store :${moved.from} -> :auth/store :${moved.to}`;
    if (args.values.json === true) {
      printJson({
        from: moved.from,
        to: moved.to,
        sessions: moved.sessions,
        live_sessions_left: moved.liveSessionsLeft,
        copied: moved.counts,
        audit_events: moved.auditEvents,
        audit_head: moved.auditHead,
        switch: change,
      });
      return 0;
    }
    const c = moved.counts;
    printText(
      `copied the control state from :${moved.from} (${moved.fromPackage}) to :${moved.to} (${moved.toPackage}): ${c.users ?? 0} users, ${c.devices ?? 0} devices, ${c.links ?? 0} links, ${c.scim_tokens ?? 0} SCIM tokens, ${c.sessions ?? 0} sessions`,
    );
    printText(
      moved.sessions
        ? 'live sessions were copied: users stay signed in'
        : `live sessions were not copied (${moved.liveSessionsLeft} live): every device and passkey signs in again; --sessions keeps them`,
    );
    printText(`audit chain verified and continued with store.migrated: ${moved.auditEvents} events, head ${moved.auditHead}`);
    printText(`to switch, in ${project.file} change ${change}, then start the service; the source store is left as it was`);
    return 0;
  },
};

import { auditEventToJson, rfc3339 } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { allAuditEvents } from '../audit-events.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printLine } from '../output.js';
import { withProject } from '../session.js';

const spec = {
  name: 'svc auth audit',
  summary: 'Print the audit log, oldest first (offline, on the project).',
  usage: 'svc auth audit <PROJECT> [--json]',
  help: [
    '<PROJECT>             the project directory',
    "--json                one JSON object per line (the API's event form)",
    PROJECT_HELP,
  ],
  options: { json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc auth audit <PROJECT>`: the events as text lines, or JSON lines with `--json`.
 *
 * @example
 * await authAudit.run(['./demo', '--json']);
 */
export const authAudit: Command = {
  path: ['auth', 'audit'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir] = args.positionals as [string];
    return withProject(dir, args.values.profile, async ({ store }) => {
      for await (const event of allAuditEvents(store)) {
        if (args.values.json === true) printJson(auditEventToJson(event));
        else {
          const who = [
            event.realm === null ? null : `realm=${event.realm}`,
            event.subject === null ? null : `subject=${event.subject}`,
            event.deviceId === null ? null : `device=${event.deviceId}`,
            event.sessionId === null ? null : `session=${event.sessionId}`,
            ...Object.entries(event.data).map(([k, v]) => `${k}=${String(v)}`),
          ].filter((x) => x !== null);
          printLine(`#${event.seq} ${rfc3339(event.at)} ${event.type} ${who.join(' ')}`);
        }
      }
      return 0;
    });
  },
};

import { auditEventToJson } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { allAuditEvents } from '../audit-events.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { checkMode, SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printAuditEvent } from '../operator-output.js';
import { withProject } from '../session.js';

/** Events per page read from `GET /v1/auth/audit` (the API's maximum). */
const API_PAGE = 1000;

const spec = {
  name: 'svc auth audit',
  summary: 'Print the audit log, oldest first: offline on a project, or over the management API.',
  usage: 'svc auth audit [<PROJECT>] [--json]',
  help: [
    '<PROJECT>             the project directory (offline); without it, the management API with the saved session',
    "--json                one JSON object per line (the API's event form)",
    PROJECT_HELP,
    ...SESSION_HELP,
  ],
  options: { ...SESSION_OPTIONS, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
  optionalPositionals: 1,
} as const;

/**
 * `svc auth audit [<PROJECT>]`: the events as text lines (controls escaped), or JSON lines with
 * `--json`, from the project's store or page by page from `GET /v1/auth/audit`.
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
    const [dir] = args.positionals as [string | undefined];
    checkMode(spec.name, dir, args.values);
    const json = args.values.json === true;
    if (dir !== undefined) {
      return withProject(dir, args.values.profile, async ({ store }) => {
        for await (const event of allAuditEvents(store)) printAuditEvent(auditEventToJson(event), json);
        return 0;
      });
    }
    let after = 0;
    for (;;) {
      const page = await viaApi(args.values, 'reading the audit log failed', (api, token) => api.audit(token, { after, limit: API_PAGE }));
      for (const event of page.events) printAuditEvent(event, json);
      if (page.next_after === null) return 0;
      after = page.next_after;
    }
  },
};

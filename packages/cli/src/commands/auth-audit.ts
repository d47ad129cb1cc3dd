import { type AuditEventJson, auditEventToJson } from '@svc/core';
import { withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { checkMode, SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printAuditEvent } from '../operator-output.js';

/** Events per page read from `GET /v1/auth/audit` (the API's maximum). */
const API_PAGE = 1000;
/** Events per page read from the store. */
const STORE_PAGE = 1000;

const spec = {
  name: 'svc auth audit',
  summary: 'Print the audit log, oldest first: offline on a project, or over the management API.',
  usage: 'svc auth audit [<PROJECT>] [--json] [--follow]',
  help: [
    '<PROJECT>             the project directory (offline); without it, the management API with the saved session',
    "--json                one JSON object per line (the API's event form)",
    '--follow              after the trail so far, print new events as they are written, until Ctrl-C or SIGTERM (exit 0)',
    PROJECT_HELP,
    ...SESSION_HELP,
  ],
  options: { follow: { type: 'boolean' }, ...SESSION_OPTIONS, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
  optionalPositionals: 1,
} as const;

/** How often `--follow` looks for new events. */
const FOLLOW_POLL_MS = 500;

/**
 * Calls `page(after)` for the events after `after` and prints them, over and over: until a page
 * is empty (or, with `follow`, until SIGINT or SIGTERM, waiting between empty pages).
 */
async function printTrail(
  page: (after: number) => Promise<{ readonly events: readonly AuditEventJson[]; readonly more: boolean }>,
  opts: { readonly json: boolean; readonly follow: boolean },
): Promise<number> {
  let stopped = false;
  let wake: (() => void) | null = null;
  const onSignal = () => {
    stopped = true;
    wake?.();
  };
  if (opts.follow) {
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  }
  try {
    let after = 0;
    while (!stopped) {
      const { events, more } = await page(after);
      for (const event of events) printAuditEvent(event, opts.json);
      after = events.at(-1)?.seq ?? after;
      if (more) continue;
      if (!opts.follow) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, FOLLOW_POLL_MS);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
    return 0;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/**
 * `svc auth audit [<PROJECT>]`: the events as text lines (controls escaped), or JSON lines with
 * `--json`, from the project's store or page by page from `GET /v1/auth/audit`. With
 * `--follow`, it then keeps printing new events as they are written (it reads the store or the
 * API every half second) until Ctrl-C or SIGTERM, and exits 0.
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
    const opts = { json: args.values.json === true, follow: args.values.follow === true };
    if (dir !== undefined) {
      return withProject(dir, args.values.profile, async ({ store }) =>
        printTrail(async (after) => {
          const events = await store.listAuditEvents({ afterSeq: after, limit: STORE_PAGE });
          return { events: events.map((e) => auditEventToJson(e)), more: events.length === STORE_PAGE };
        }, opts),
      );
    }
    return printTrail(async (after) => {
      const page = await viaApi(args.values, 'reading the audit log failed', (api, token) => api.audit(token, { after, limit: API_PAGE }));
      return { events: page.events, more: page.next_after !== null };
    }, opts);
  },
};

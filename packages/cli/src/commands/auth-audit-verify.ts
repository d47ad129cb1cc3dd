import { verifyAuditChain } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { allAuditEvents } from '../audit-events.js';
import { CliError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printText } from '../output.js';
import { withProject } from '../session.js';

const spec = {
  name: 'svc auth audit verify',
  summary: 'Check the audit hash chain: finds an edited, removed, inserted or reordered event.',
  usage: 'svc auth audit verify <PROJECT> [--json]',
  help: ['<PROJECT>             the project directory', '--json                print the verdict as JSON', PROJECT_HELP],
  options: { json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc auth audit verify <PROJECT>`: exit 0 with the length and head hash of an intact chain,
 * exit 1 naming the first bad event otherwise.
 *
 * @example
 * await authAuditVerify.run(['./demo']);
 */
export const authAuditVerify: Command = {
  path: ['auth', 'audit', 'verify'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir] = args.positionals as [string];
    return withProject(dir, args.values.profile, async ({ store }) => {
      const events = [];
      for await (const event of allAuditEvents(store)) events.push(event);
      const verdict = verifyAuditChain(events);
      if (verdict.ok) {
        if (args.values.json === true) printJson({ ok: true, events: verdict.length, head: verdict.head });
        else printText(`audit chain ok: ${verdict.length} events, head ${verdict.head}`);
        return 0;
      }
      const bad = events.find((e) => e.seq === verdict.seq);
      const name = `event #${verdict.seq}${bad === undefined ? '' : ` (${bad.id}, ${bad.type})`}`;
      if (args.values.json === true) printJson({ ok: false, seq: verdict.seq, event_id: bad?.id ?? null, problem: verdict.problem });
      throw new CliError(
        `audit chain broken at ${name}: ${verdict.problem}; the control database was altered outside svc, restore it from a backup`,
      );
    });
  },
};

import { verifyProjectAudit, withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { CliError, UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printLine, printText } from '../output.js';

const spec = {
  name: 'svc auth audit verify',
  summary:
    'Check the audit hash chain (edited, removed, inserted or reordered events) and, against exported checkpoints, truncation and rewriting.',
  usage: 'svc auth audit verify <PROJECT> [--checkpoints FILE] [--export FILE|-] [--json]',
  help: [
    '<PROJECT>             the project directory',
    '--checkpoints FILE    also check the chain against every signed checkpoint in FILE (one JSON per line)',
    '--export FILE|-       after a successful check, append a checkpoint of the head signed by the node key to FILE',
    '                      (created 0600), or print it on stdout with -; keep it where the database writers cannot write',
    '--json                print the verdict as JSON',
    PROJECT_HELP,
  ],
  options: { checkpoints: { type: 'string' }, export: { type: 'string' }, json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc auth audit verify <PROJECT>`: exit 0 with the length and head hash of an intact chain,
 * exit 1 naming the first bad event otherwise. With `--checkpoints FILE`, every signed
 * checkpoint exported earlier must still hold (same hash at its length, the chain at least as
 * long): a truncated or re-sealed chain, which the hash chain alone cannot see, is exit 1. With
 * `--export`, a checkpoint of the verified head, signed by the node key, is appended.
 *
 * @example
 * await authAuditVerify.run(['./demo', '--checkpoints', '/var/log/svc/checkpoints.jsonl', '--export', '/var/log/svc/checkpoints.jsonl']);
 */
export const authAuditVerify: Command = {
  path: ['auth', 'audit', 'verify'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir] = args.positionals as [string];
    if (args.values.export === '') throw new UsageError(`${spec.name}: --export takes a file, or - for stdout`);
    const json = args.values.json === true;
    const verdict = await withProject(dir, args.values.profile, (open) =>
      verifyProjectAudit(open, { checkpoints: args.values.checkpoints, exportTo: args.values.export }),
    );
    if (!verdict.ok && verdict.broken === 'chain') {
      const bad = verdict.event;
      const name = `event #${verdict.seq}${bad === undefined ? '' : ` (${bad.id}, ${bad.type})`}`;
      if (json) printJson({ ok: false, seq: verdict.seq, event_id: bad?.id ?? null, problem: verdict.problem });
      throw new CliError(
        `audit chain broken at ${name}: ${verdict.problem}; the control database was altered outside svc, restore it from a backup`,
      );
    }
    if (!verdict.ok) {
      if (json) printJson({ ok: false, events: verdict.events, head: verdict.head, checkpoints: verdict.failures });
      throw new CliError(
        `audit chain does not match ${verdict.failures.length} of ${verdict.checked} exported checkpoints (${verdict.failures.slice(0, 3).join('; ')}): events were removed or the chain was rewritten; restore the control database from a backup`,
      );
    }
    if (args.values.export === '-' && verdict.checkpointLine !== null) {
      printLine(verdict.checkpointLine);
      return 0;
    }
    if (json) printJson({ ok: true, events: verdict.events, head: verdict.head, checkpoints_checked: verdict.checked });
    else {
      printText(
        `audit chain ok: ${verdict.events} events, head ${verdict.head}${args.values.checkpoints === undefined ? '' : `; ${verdict.checked} exported checkpoints hold`}`,
      );
    }
    return 0;
  },
};

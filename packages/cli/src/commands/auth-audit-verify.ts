import { readFileSync } from 'node:fs';
import { type AuditEvent, checkAuditCheckpoint, signAuditCheckpoint, verifyAuditChain } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { appendCheckpointLine } from '../audit-checkpoints.js';
import { allAuditEvents } from '../audit-events.js';
import { CliError, UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { assertOwnerOnly } from '../control.js';
import { loadNodeIdentity } from '../node-keys.js';
import { printJson, printLine, printText } from '../output.js';
import { withProject } from '../session.js';

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

/** Every checkpoint line of `file` that does not hold against the chain, as `line N: problem: detail`. */
function checkpointFailures(file: string, chain: Parameters<typeof checkAuditCheckpoint>[1]): { checked: number; failures: string[] } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new CliError(`cannot read the checkpoints ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const failures: string[] = [];
  let checked = 0;
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    checked++;
    let value: unknown = null;
    try {
      value = JSON.parse(line);
    } catch {
      value = null;
    }
    const verdict = checkAuditCheckpoint(value, chain);
    if (!verdict.ok) failures.push(`line ${i + 1}: ${verdict.problem}: ${verdict.detail}`);
  });
  return { checked, failures };
}

/** Appends one line to `file` (O_APPEND, created owner-only), or prints it with `-`. */
function appendLine(file: string, line: string): void {
  if (file === '-') printLine(line);
  else appendCheckpointLine(file, line);
}

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
    return withProject(dir, args.values.profile, async ({ project, store, deps, log }) => {
      const events: AuditEvent[] = [];
      for await (const event of allAuditEvents(store)) events.push(event);
      const verdict = verifyAuditChain(events);
      if (!verdict.ok) {
        const bad = events.find((e) => e.seq === verdict.seq);
        const name = `event #${verdict.seq}${bad === undefined ? '' : ` (${bad.id}, ${bad.type})`}`;
        if (args.values.json === true) printJson({ ok: false, seq: verdict.seq, event_id: bad?.id ?? null, problem: verdict.problem });
        throw new CliError(
          `audit chain broken at ${name}: ${verdict.problem}; the control database was altered outside svc, restore it from a backup`,
        );
      }
      const needsKey = args.values.checkpoints !== undefined || args.values.export !== undefined;
      let identity: ReturnType<typeof loadNodeIdentity> | undefined;
      if (needsKey) {
        assertOwnerOnly(project.nodeKey, 'the node key');
        identity = loadNodeIdentity(project.nodeKey);
      }
      let checked = 0;
      if (args.values.checkpoints !== undefined && identity !== undefined) {
        const result = checkpointFailures(args.values.checkpoints, {
          project: deps.projectId,
          events,
          publicKeyHex: identity.publicKeyHex,
          previousKeys: identity.previousKeys ?? [],
        });
        checked = result.checked;
        if (result.failures.length > 0) {
          if (args.values.json === true) printJson({ ok: false, events: verdict.length, head: verdict.head, checkpoints: result.failures });
          throw new CliError(
            `audit chain does not match ${result.failures.length} of ${checked} exported checkpoints (${result.failures.slice(0, 3).join('; ')}): events were removed or the chain was rewritten; restore the control database from a backup`,
          );
        }
      }
      if (args.values.export !== undefined && identity !== undefined) {
        const last = events.at(-1);
        const checkpoint = signAuditCheckpoint(
          { project: deps.projectId, head: last === undefined ? null : { seq: last.seq, hash: last.hash }, now: deps.clock.now() },
          identity,
        );
        log.info({ event: 'audit.checkpoint', checkpoint }, 'audit checkpoint exported');
        appendLine(args.values.export, JSON.stringify(checkpoint));
      }
      const quiet = args.values.export === '-';
      if (args.values.json === true) {
        if (!quiet) printJson({ ok: true, events: verdict.length, head: verdict.head, checkpoints_checked: checked });
      } else if (!quiet) {
        printText(
          `audit chain ok: ${verdict.length} events, head ${verdict.head}${args.values.checkpoints === undefined ? '' : `; ${checked} exported checkpoints hold`}`,
        );
      }
      return 0;
    });
  },
};

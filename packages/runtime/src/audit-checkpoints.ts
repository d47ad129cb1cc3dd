import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs';
import { type AuditCheckpointsJson, type AuditEvent, type AuthDeps, reviewAuditCheckpoints, signAuditCheckpoint } from '@svc/core';
import type { Logger } from 'pino';
import { allAuditEvents } from './audit-events.js';
import { assertOwnerOnly } from './control.js';
import { RuntimeError } from './errors.js';
import { liveNodeIdentity, loadNodeIdentity } from './node-keys.js';
import type { Project } from './project.js';

/** The file a running service appends signed audit checkpoints to (one JSON per line). */
export const CHECKPOINT_FILE_ENV = 'SVC_AUDIT_CHECKPOINT_FILE';
/** How often, in seconds, a running service checkpoints the audit head when it moved (default 300). */
export const CHECKPOINT_SECONDS_ENV = 'SVC_AUDIT_CHECKPOINT_SECONDS';

/**
 * Appends `line` to `file`: opened with O_APPEND (never truncating what earlier checkpoints
 * left), created owner-only.
 */
export function appendCheckpointLine(file: string, line: string): void {
  const fd = openSync(file, 'a', 0o600);
  try {
    writeSync(fd, `${line}\n`);
  } finally {
    closeSync(fd);
  }
}

/**
 * Exports signed checkpoints of the audit chain's head while the service runs: at start, every
 * `SVC_AUDIT_CHECKPOINT_SECONDS` (300 by default) when the head moved, and at stop; each to the
 * log (`audit.checkpoint`) and, when `SVC_AUDIT_CHECKPOINT_FILE` names one, appended to that file.
 * The file belongs outside the control directory, where the database's writers cannot write;
 * `svc auth audit verify --checkpoints FILE` then finds a truncated or re-sealed chain. Without
 * a node key (nothing to sign with) it does nothing.
 *
 * @example
 * const exporter = startCheckpointExport({ project, deps, log });
 * await exporter.stop();
 */
export function startCheckpointExport(ctx: {
  readonly project: Project;
  readonly deps: AuthDeps;
  readonly log: Logger;
  readonly env?: NodeJS.ProcessEnv;
}): { stop(): Promise<void> } {
  const { project, deps, log } = ctx;
  const env = ctx.env ?? process.env;
  if (!existsSync(project.nodeKey)) return { stop: async () => undefined };
  assertOwnerOnly(project.nodeKey, 'the node key');
  const identity = liveNodeIdentity(project.nodeKey, (error) =>
    log.error({ err: error, event: 'node.key_reload_failed' }, 'reading the rotated node key failed; still signing with the previous one'),
  );
  const file = env[CHECKPOINT_FILE_ENV] === undefined || env[CHECKPOINT_FILE_ENV] === '' ? null : env[CHECKPOINT_FILE_ENV];
  const seconds = Number(env[CHECKPOINT_SECONDS_ENV] ?? 300);
  const intervalMs = Number.isFinite(seconds) && seconds >= 1 ? seconds * 1000 : 300_000;
  let last: string | null = null;
  let running: Promise<void> = Promise.resolve();
  const exportNow = (force: boolean): Promise<void> => {
    running = running.then(async () => {
      try {
        const head = await deps.store.auditHead();
        const key = `${head?.seq ?? 0}:${head?.hash ?? ''}`;
        if (!force && key === last) return;
        const checkpoint = signAuditCheckpoint({ project: deps.projectId, head, now: deps.clock.now() }, identity());
        log.info({ event: 'audit.checkpoint', checkpoint }, 'audit checkpoint');
        if (file !== null) appendCheckpointLine(file, JSON.stringify(checkpoint));
        last = key;
      } catch (error) {
        log.warn({ err: error, event: 'audit.checkpoint_failed' }, 'exporting an audit checkpoint failed; will retry');
      }
    });
    return running;
  };
  void exportNow(true);
  const timer = setInterval(() => void exportNow(false), intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await exportNow(false);
    },
  };
}

/**
 * The signed checkpoints this service exports (`SVC_AUDIT_CHECKPOINT_FILE`), each checked as
 * `svc auth audit verify --checkpoints FILE` checks it: its signature by the node key or by a
 * previous key inside that key's window (the node key history), and the chain as it is now
 * still holding its head. The `latest` ones come back newest first; `total` and `failed` count
 * the whole file. Without a checkpoint file (or a node key) nothing is exported: `exported:
 * false`. A file not written yet holds none.
 *
 * @example
 * const review = await reviewExportedCheckpoints({ project, deps }, 20); // { exported, total, failed, checkpoints }
 */
export async function reviewExportedCheckpoints(
  ctx: { readonly project: Project; readonly deps: AuthDeps; readonly env?: NodeJS.ProcessEnv },
  latest: number,
): Promise<AuditCheckpointsJson> {
  const env = ctx.env ?? process.env;
  const file = env[CHECKPOINT_FILE_ENV];
  if (file === undefined || file === '' || !existsSync(ctx.project.nodeKey))
    return { exported: false, total: 0, failed: 0, checkpoints: [] };
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { exported: true, total: 0, failed: 0, checkpoints: [] };
    throw new RuntimeError(`cannot read the checkpoints ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const identity = loadNodeIdentity(ctx.project.nodeKey);
  const events: AuditEvent[] = [];
  for await (const event of allAuditEvents(ctx.deps.store)) events.push(event);
  const review = reviewAuditCheckpoints(
    text,
    { project: ctx.deps.projectId, events, publicKeyHex: identity.publicKeyHex, previousKeys: identity.previousKeys ?? [] },
    latest,
  );
  return { exported: true, total: review.total, failed: review.failed, checkpoints: [...review.checkpoints] };
}

import { closeSync, existsSync, openSync, writeSync } from 'node:fs';
import { type AuthDeps, signAuditCheckpoint } from '@svc/core';
import type { Logger } from 'pino';
import { assertOwnerOnly } from './control.js';
import { liveNodeIdentity } from './node-keys.js';
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

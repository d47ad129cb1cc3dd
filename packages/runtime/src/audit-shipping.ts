import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  fsyncSync,
  lstatSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import {
  type AuditEvent,
  type AuditShippingHealth,
  type AuditSinkName,
  type AuthDeps,
  auditEventToJson,
  auditShippingAfter,
  auditSinkPathFor,
  errorCodeOf,
  GENESIS_HASH,
  signAuditCheckpoint,
  sinkDirectoryRefusal,
  sinkFileRefusal,
} from '@svc/core';
import type { AuditSinks } from '@svc/core/config';
import type { NodeIdentity } from '@svc/server';
import type { Logger } from 'pino';
import { assertOwnerOnly, mkdirOwnerOnly } from './control.js';
import { RuntimeError, type RuntimeFailureCode } from './errors.js';
import { writeFileAtomic } from './node-key-history.js';
import { liveNodeIdentity } from './node-keys.js';
import type { Project } from './project.js';

/** How far the sinks have the trail: the last event delivered to every sink, saved after they have it. */
export interface AuditShipCursor {
  readonly seq: number;
  readonly hash: string;
}

/**
 * The cursor file of audit shipping, in the control directory (owner-only, beside the node key):
 * per node, because the sinks are this node's.
 *
 * @example
 * readAuditCursor(auditCursorFile(project)); // { seq: 42, hash: "..." }
 */
export function auditCursorFile(project: Project): string {
  return join(project.controlDir, 'audit-ship-cursor.json');
}

/**
 * The saved cursor, or the start of the chain when there is none yet.
 *
 * @example
 * const { seq } = readAuditCursor(auditCursorFile(project));
 */
export function readAuditCursor(file: string): AuditShipCursor {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { seq: 0, hash: GENESIS_HASH };
    throw error;
  }
  const value = JSON.parse(text) as Partial<AuditShipCursor>;
  if (!Number.isSafeInteger(value.seq) || typeof value.hash !== 'string') throw new TypeError(`${file} is not an audit cursor`);
  return { seq: value.seq as number, hash: value.hash };
}

/**
 * The audit sink file, or its directory, is not one the service may write the trail to (see
 * {@link sinkFileRefusal}, {@link sinkDirectoryRefusal}): nothing was written through it.
 */
export class AuditSinkError extends RuntimeError {
  constructor(message: string) {
    super(message, { code: 'audit_sink_refused' });
    this.name = 'AuditSinkError';
  }
}

// Append-only, created owner-only, and never through a symbolic link at the last component.
// O_NONBLOCK: a FIFO (or device) put at the path must not block the open before fstat refuses it
// (a FIFO with no reader fails with ENXIO); it changes nothing for a regular file.
const SINK_OPEN_FLAGS = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * A JSON-lines file that rotates by size: before a line would take it past `maxBytes`, `path`
 * becomes `path.1` (`path.1` becomes `path.2`, … up to `keep`; the oldest is deleted) and a new
 * `path` is started. Each {@link JsonLinesFile.append} is fsynced before it returns.
 *
 * Every open refuses (with {@link AuditSinkError}, before writing a byte) a path that is a
 * symbolic link (`O_NOFOLLOW`), not a regular file, owned by another user or readable or
 * writable by group or others (a file that existed keeps its mode when opened), and a
 * directory its group or others can write in: the construction checks an existing file at once, so a
 * service with a bad sink refuses to start.
 */
export class JsonLinesFile {
  private size: number;

  constructor(
    private readonly path: string,
    private readonly maxBytes: number,
    private readonly keep: number,
  ) {
    mkdirOwnerOnly(dirname(path));
    this.checkDirectory();
    this.size = 0;
    if (existsSync(path) || isSymlink(path)) {
      const fd = this.open();
      try {
        this.size = fstatSync(fd).size;
      } finally {
        closeSync(fd);
      }
    }
  }

  /** Appends `lines` (one JSON each), rotating first whenever the next line would not fit. */
  append(lines: readonly string[]): void {
    let chunk: string[] = [];
    let chunkBytes = 0;
    for (const line of lines) {
      const bytes = Buffer.byteLength(line, 'utf8') + 1;
      if (this.size + chunkBytes > 0 && this.size + chunkBytes + bytes > this.maxBytes) {
        this.write(chunk);
        this.rotate();
        chunk = [];
        chunkBytes = 0;
      }
      chunk.push(line);
      chunkBytes += bytes;
    }
    this.write(chunk);
  }

  private refuse(what: string, why: string, fix: string): never {
    throw new AuditSinkError(`refusing the audit sink ${what} ${this.path}: ${why}; ${fix}`);
  }

  private checkDirectory(): void {
    const dir = dirname(this.path);
    const why = sinkDirectoryRefusal(statSync(dir));
    if (why !== null) {
      throw new AuditSinkError(
        `refusing the audit sink directory ${dir} (for ${this.path}): ${why}; keep the sink in a dedicated directory only the service's user can write, such as /var/log/svc (\`install -d -m 0750 -o <service user> /var/log/svc\`, or \`chmod go-w ${dir}\`)`,
      );
    }
  }

  /** Opens the sink for appending after the checks, or throws {@link AuditSinkError} having written nothing. */
  private open(): number {
    let fd: number;
    try {
      fd = openSync(this.path, SINK_OPEN_FLAGS, 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ELOOP') {
        this.refuse('file', 'it is a symbolic link', 'point :file at the real file, not a link to it');
      }
      if ((error as NodeJS.ErrnoException).code === 'ENXIO') {
        this.refuse('file', 'it is not a regular file (a FIFO or device)', 'point :file at a regular file');
      }
      throw error;
    }
    try {
      const why = sinkFileRefusal(fstatSync(fd), process.getuid?.() ?? null);
      if (why !== null) {
        this.refuse('file', why, `make it a regular file of the service's user, mode 0600 (\`chmod 600 ${this.path}\`), or remove it`);
      }
      return fd;
    } catch (error) {
      closeSync(fd);
      throw error;
    }
  }

  private write(lines: readonly string[]): void {
    if (lines.length === 0) return;
    const text = `${lines.join('\n')}\n`;
    this.checkDirectory();
    const fd = this.open();
    try {
      const buf = Buffer.from(text, 'utf8');
      let off = 0;
      while (off < buf.length) off += writeSync(fd, buf, off);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    this.size += Buffer.byteLength(text, 'utf8');
  }

  private rotate(): void {
    rmSync(`${this.path}.${this.keep}`, { force: true });
    for (let i = this.keep - 1; i >= 1; i--) {
      if (existsSync(`${this.path}.${i}`)) renameSync(`${this.path}.${i}`, `${this.path}.${i + 1}`);
    }
    if (existsSync(this.path)) renameSync(this.path, `${this.path}.1`);
    this.size = 0;
  }
}

/** Whether `path` is a symbolic link (dangling ones included, which `existsSync` reports as absent). */
function isSymlink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * The line of an event in the sinks: the API's event form, marked so a log pipeline can pick it
 * out, and the id of the node that shipped it (null without a node key): each node of a cluster
 * ships the whole trail, so a sink fed by several nodes can tell their copies apart.
 */
function eventLine(event: AuditEvent, shippedBy: string | null): string {
  return JSON.stringify({ record: 'audit.event', ...auditEventToJson(event), shipped_by_node: shippedBy });
}

/**
 * Ships the audit trail to the sinks of `:svc/audit-sinks` while the service runs: events after
 * the saved cursor, a batch at a time, each batch followed by a checkpoint of the chain at its
 * last event signed by the node key; the batch is written (and the file fsynced) to every sink
 * before the cursor moves past it, atomically. So delivery is at least once: a crash repeats at
 * most the batch in flight, never an event before the cursor, and loses none. A chain that no
 * longer continues from the cursor (restored from an older backup, moved to another store, or
 * rewritten) is not shipped: the error names the cursor file to remove to ship the whole trail
 * again. After a failed attempt the next one reads the cursor file again, so removing (or
 * fixing) it resumes shipping without a restart. `health()` says whether the last attempt
 * failed and why, for readiness, node health and metrics; null when no sink is configured.
 *
 * @example
 * const shipping = startAuditShipping({ project, deps, log });
 * shipping.health(); // { sinks: ['file'], stalled: false, code: null }
 * await shipping.stop(); // delivers what is left, then returns
 */
export function startAuditShipping(ctx: {
  readonly project: Project;
  readonly deps: AuthDeps;
  readonly log: Logger;
  readonly sinks?: AuditSinks;
}): AuditShipping {
  const { project, deps, log } = ctx;
  const sinks = ctx.sinks ?? project.config.auditSinks;
  if (sinks.file === null && !sinks.stdout) return { stop: async () => undefined, health: () => null };
  const names: AuditSinkName[] = [...(sinks.file === null ? [] : (['file'] as const)), ...(sinks.stdout ? (['stdout'] as const) : [])];
  let health = auditShippingAfter(names, null);
  let identity: (() => NodeIdentity) | null = null;
  if (existsSync(project.nodeKey)) {
    assertOwnerOnly(project.nodeKey, 'the node key');
    identity = liveNodeIdentity(project.nodeKey, (error) =>
      log.error(
        { err: error, event: 'node.key_reload_failed' },
        'reading the rotated node key failed; still signing with the previous one',
      ),
    );
  }
  // The node id at start names the file (`{node}`) and the lines: a key rotated while the
  // service runs changes neither until the next start.
  const shippedBy = identity === null ? null : identity().nodeId;
  let sinkPath: string | null = null;
  if (sinks.file !== null) {
    try {
      sinkPath = auditSinkPathFor(sinks.file, shippedBy);
    } catch (error) {
      throw new AuditSinkError((error as Error).message);
    }
  }
  const file =
    sinkPath === null
      ? null
      : new JsonLinesFile(isAbsolute(sinkPath) ? sinkPath : resolve(project.dir, sinkPath), sinks.fileMaxBytes, sinks.fileKeep);
  const cursorFile = auditCursorFile(project);
  let cursor = readAuditCursor(cursorFile);
  let stopping = false;
  let lastPass = false;
  let wake: (() => void) | null = null;
  let reported = '';

  /** Delivers one batch; resolves with how many events it delivered. */
  const deliverBatch = async (): Promise<number> => {
    // After a failure, the operator may have removed or fixed the cursor file: read it again.
    if (health.stalled) cursor = readAuditCursor(cursorFile);
    const events = await deps.store.listAuditEvents({ afterSeq: cursor.seq, limit: sinks.batch });
    const first = events[0];
    const last = events.at(-1);
    if (first === undefined || last === undefined) {
      const head = await deps.store.auditHead();
      if ((head?.seq ?? 0) < cursor.seq) {
        throw new ShipStall(`the audit chain has ${head?.seq ?? 0} events but the sinks already have ${cursor.seq}`);
      }
      if (head !== null && head.seq === cursor.seq && head.hash !== cursor.hash) {
        throw new ShipStall(`event #${head.seq} is not the one the sinks have`);
      }
      return 0;
    }
    if (first.seq !== cursor.seq + 1 || first.prevHash !== cursor.hash) {
      throw new ShipStall(`event #${first.seq} does not continue the chain the sinks have up to #${cursor.seq}`);
    }
    const lines = events.map((e) => eventLine(e, shippedBy));
    if (identity !== null) {
      const checkpoint = signAuditCheckpoint(
        { project: deps.projectId, head: { seq: last.seq, hash: last.hash }, now: deps.clock.now() },
        identity(),
      );
      lines.push(JSON.stringify({ record: 'audit.checkpoint', ...checkpoint }));
    }
    file?.append(lines);
    if (sinks.stdout) writeStdoutLines(lines);
    const next = { seq: last.seq, hash: last.hash };
    writeFileAtomic(cursorFile, `${JSON.stringify(next)}\n`, 0o600);
    cursor = next;
    return events.length;
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        wake = null;
        resolve();
      }, ms);
      wake = () => {
        clearTimeout(timer);
        wake = null;
        resolve();
      };
    });

  const loop = (async () => {
    for (;;) {
      let delivered = 0;
      try {
        delivered = await deliverBatch();
        if (health.stalled) log.info({ event: 'audit.ship_resumed', cursor_seq: cursor.seq }, 'audit shipping resumed');
        health = auditShippingAfter(names, null);
        reported = '';
      } catch (caught) {
        const error = errorCodeOf(caught) === null ? new AuditShipError(caught) : caught;
        health = auditShippingAfter(names, error);
        const why = (error as Error).message;
        // Once per distinct reason, not once per attempt: the stall itself is in /readyz, health and metrics.
        if (why !== reported) {
          reported = why;
          if (error instanceof ShipStall) {
            log.error(
              { event: 'audit.ship_stalled', code: health.code, cursor_file: cursorFile },
              `audit shipping stopped: ${why}; if the control store was restored or moved to another store, remove ${cursorFile} to ship the whole trail again (the running service resumes by itself, no restart needed)`,
            );
          } else {
            log.error(
              { err: error, event: 'audit.ship_failed', code: health.code },
              `delivering audit events failed: ${why}; retrying every ${sinks.pollMilliseconds} ms`,
            );
          }
        }
      }
      if (delivered > 0 && delivered === sinks.batch) continue;
      if (stopping) {
        // A pass that began before stop() may have missed the last events: one more after it.
        if (lastPass) return;
        lastPass = true;
        continue;
      }
      await sleep(sinks.pollMilliseconds);
    }
  })();

  return {
    health: () => health,
    async stop() {
      // One more pass after the last request: what the surfaces appended while closing ships too.
      stopping = true;
      (wake as (() => void) | null)?.();
      await loop;
    },
  };
}

/** Running audit shipping: how it is doing, and how to stop it. */
export interface AuditShipping {
  /** The outcome of the last delivery attempt; null when no sink is configured. */
  health(): AuditShippingHealth | null;
  /** Delivers what is left, then resolves. */
  stop(): Promise<void>;
}

/** The chain no longer continues the one the sinks have: shipping stops until the operator decides. */
class ShipStall extends Error {
  readonly code = 'audit_ship_stalled' satisfies RuntimeFailureCode;
}

/** A delivery attempt failed without a stable code of its own (the sink could not be written, the cursor file could not be read). */
class AuditShipError extends Error {
  readonly code = 'audit_ship_failed' satisfies RuntimeFailureCode;

  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = 'AuditShipError';
  }
}

/** DEL, the C1 controls, the bidirectional controls and U+2028/9: canonical JSON leaves them raw inside strings. */
const RAW_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * The `stdout` sink: each event one JSON line on the process's standard output, written
 * synchronously so that a pipe reader has it before the cursor moves past it. Characters that
 * could reorder or restyle what a terminal shows are written as `\uXXXX` escapes (the JSON
 * means the same); a momentarily full non-blocking pipe is retried.
 */
function writeStdoutLines(lines: readonly string[]): void {
  const text = `${lines.join('\n')}\n`.replace(RAW_IN_JSON, (c) => `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`);
  const buf = Buffer.from(text, 'utf8');
  let off = 0;
  while (off < buf.length) {
    try {
      off += writeSync(1, buf, off);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
    }
  }
}

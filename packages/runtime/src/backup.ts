import { createHash } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  constants,
  existsSync,
  fsyncSync,
  linkSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { basename, dirname } from 'node:path';
import { checkBackupSignature, signBackup } from '@svc/core';
// The embedded store's own backup operations (a consistent copy, its checks, its lock): the store
// knows its file format; the runtime adds the project's rules (signature, node key, file names).
import {
  backupSqliteStore,
  lockSqliteStore,
  readSqliteBackupInfo,
  type SqliteStoreLock,
  StoreBackupError,
  settleSqliteFile,
  verifySqliteBackup,
} from 'svc-store-sqlite/backup';
import { installBundledStoreIfPinned } from './bundled-addons.js';
import { embeddedStoreFile, ensureControlDir, ensureNodeKey, openControlStore } from './control.js';
import { RuntimeError } from './errors.js';
import { nodeKeyHistoryFile, readNodeKeyHistory } from './node-key-history.js';
import { loadNodeIdentity } from './node-keys.js';
import type { Project } from './project.js';

/** What a backup file says about itself, read from the database it holds. */
export interface BackupInfo {
  readonly projectId: string;
  readonly schemaVersion: number;
}

/** What {@link backupProject} wrote: the backup's facts, its signature file and the node key that signed it. */
export interface BackupResult extends BackupInfo {
  readonly signatureFile: string;
  readonly nodePublicKey: string;
  readonly nodeId: string;
}

/**
 * The signature file of a backup: `<FILE>.sig` beside it (see core's `signBackup`).
 *
 * @example
 * backupSignatureFile('/backups/demo.db'); // "/backups/demo.db.sig"
 */
export function backupSignatureFile(backup: string): string {
  return `${backup}.sig`;
}

function sha256File(path: string): string {
  const hash = createHash('sha256');
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      hash.update(buf.subarray(0, n));
    }
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

/** The embedded store's file, or a refusal naming the PostgreSQL path for an external store. */
export function sqliteFileOf(project: Project, what: string): string {
  const file = embeddedStoreFile(project);
  if (file === null) {
    throw new RuntimeError(
      `${what}: the project's store is ${project.config.store.package}, not the embedded SQLite store; back it up and restore it with pg_dump/pg_restore (docs/deployment.md, "Backup and restore")`,
    );
  }
  return file;
}

/** Creates `path` empty and owner-only (0600 whatever the umask); refuses an existing file. */
function createOwnerOnlyFile(path: string): void {
  closeSync(openSync(path, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600));
  chmodSync(path, 0o600);
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Copies `from` into the existing (owner-only) file `to` by content, so `to` keeps its mode. */
function copyInto(from: string, to: string): void {
  const src = openSync(from, 'r');
  try {
    const dst = openSync(to, 'w');
    try {
      const buf = Buffer.allocUnsafe(1 << 20);
      for (;;) {
        const n = readSync(src, buf, 0, buf.length, null);
        if (n === 0) break;
        let off = 0;
        while (off < n) off += writeSync(dst, buf, off, n - off);
      }
      fsyncSync(dst);
    } finally {
      closeSync(dst);
    }
  } finally {
    closeSync(src);
  }
}

/**
 * Writes a consistent copy of the project's embedded control database to `target`, created
 * owner-only (0600) before any data is in it; the service may be serving meanwhile. The copy is
 * one `VACUUM INTO` (a single read transaction: a snapshot as of one commit, not blocking
 * writers), written beside `target`; transient flow state is dropped from it
 * ({@link TRANSIENT_STATE}), and the node key signs the SHA-256 of the whole file into
 * `<target>.sig` (core's `signBackup`). Both are linked into place, so `target` is complete or
 * absent. It refuses to replace an existing file. The node key is not in the backup.
 *
 * @example
 * const info = await backupProject(project, '/backups/demo-2026-11-23.db');
 */
export async function backupProject(project: Project, target: string, now: () => number = Date.now): Promise<BackupResult> {
  const source = sqliteFileOf(project, 'backup refused');
  if (!existsSync(source)) throw new RuntimeError(`backup refused: no control database at ${source}; nothing to back up`);
  const sigTarget = backupSignatureFile(target);
  for (const file of [target, sigTarget]) {
    if (existsSync(file)) throw new RuntimeError(`backup refused: ${file} exists; svc never overwrites a file, choose a new name`);
  }
  if (!existsSync(project.nodeKey)) {
    throw new RuntimeError(
      `backup refused: no node key at ${project.nodeKey} to sign the backup with; start the service once, or run \`svc auth init\``,
    );
  }
  const identity = loadNodeIdentity(project.nodeKey);
  const partial = `${target}.partial-${process.pid}`;
  const sigPartial = `${sigTarget}.partial-${process.pid}`;
  try {
    createOwnerOnlyFile(partial);
  } catch (error) {
    throw new RuntimeError(`backup failed: cannot create ${partial}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  try {
    let info: BackupInfo;
    try {
      info = backupSqliteStore(source, partial);
    } catch (error) {
      if (error instanceof StoreBackupError) throw new RuntimeError(error.message, { cause: error });
      throw error;
    }
    const signed = signBackup(
      { project: info.projectId, sha256: sha256File(partial), schemaVersion: info.schemaVersion, now: now() },
      identity,
    );
    createOwnerOnlyFile(sigPartial);
    copyTextInto(sigPartial, `${JSON.stringify(signed, null, 2)}\n`);
    let linked = false;
    try {
      linkSync(partial, target);
      linked = true;
      linkSync(sigPartial, sigTarget);
    } catch (error) {
      // A backup without its signature would only be refused at restore: none is left.
      if (linked) rmSync(target, { force: true });
      throw new RuntimeError(`backup failed: cannot write ${target}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
    fsyncPath(dirname(target));
    return { ...info, signatureFile: sigTarget, nodePublicKey: identity.publicKeyHex, nodeId: identity.nodeId };
  } catch (error) {
    if (error instanceof RuntimeError) throw error;
    throw new RuntimeError(`backup failed: ${(error as Error).message}`, { cause: error });
  } finally {
    for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(partial + suffix, { force: true });
    rmSync(sigPartial, { force: true });
  }
}

function copyTextInto(path: string, text: string): void {
  const fd = openSync(path, 'w');
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** What {@link restoreProject} did. */
export interface RestoreResult extends BackupInfo {
  readonly file: string;
  readonly auditEvents: number;
  /** Where the replaced control database was kept, or null when there was none. */
  readonly preRestore: string | null;
  /** Whether restore had to create a node key (the project had none: a new node identity). */
  readonly nodeKeyCreated: boolean;
  /** The public key (hex) whose signature over the backup verified. */
  readonly signedBy: string;
}

/** What restore accepts a backup signature from, beyond the project's node key and its key history. */
export interface RestoreOptions {
  readonly now?: Date;
  /** Public keys (hex) the operator names as trusted (`--trusted-key`), e.g. the node key of a project whose control directory was lost. */
  readonly trustedKeys?: readonly string[];
}

/** Reads the signature file of `backup` as JSON, or refuses: a backup is only restored with its signature. */
function readSignature(backup: string): unknown {
  const file = backupSignatureFile(backup);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new RuntimeError(
        `restore refused: ${backup} is not signed: no ${basename(file)} beside it (\`svc auth backup\` writes one; keep the two files together)`,
      );
    }
    throw new RuntimeError(`restore refused: cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

/** The keys the project itself trusts for a backup: its node key (null when it has none) and the keys before it. */
function projectBackupKeys(project: Project): { nodeKey: string | null; previousKeys: ReturnType<typeof readNodeKeyHistory>['previous'] } {
  const previousKeys = readNodeKeyHistory(nodeKeyHistoryFile(project.nodeKey)).previous;
  return { nodeKey: existsSync(project.nodeKey) ? loadNodeIdentity(project.nodeKey).publicKeyHex : null, previousKeys };
}

function unreadable(target: string, error: unknown): RuntimeError {
  return new RuntimeError(
    `restore refused: the current control database ${target} cannot be read (${(error as Error).message}); move it away (keep it) and run the restore again`,
    { cause: error },
  );
}

/**
 * Hard-links `file` to `name`, or to `name-2`, `name-3`... when a restore in the same second
 * already kept one there: an earlier replaced database is never lost nor overwritten.
 */
function keepAside(file: string, name: string): string {
  for (let n = 1; ; n += 1) {
    const candidate = n === 1 ? name : `${name}-${n}`;
    try {
      linkSync(file, candidate);
      return candidate;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}

/** A UTC timestamp for file names: 20261123T131500Z. */
function stamp(now: Date): string {
  return now
    .toISOString()
    .replace(/\.\d+Z$/, 'Z')
    .replace(/[-:]/g, '');
}

/**
 * Puts a backup written by {@link backupProject} back as the project's embedded control
 * database. Refuses (the control database's content unchanged) while any process has the control database open (the
 * service running: its connection's lock is detected by taking the SQLite lock exclusively,
 * without waiting), a backup of another project, a backup whose schema is newer than this
 * build's store, and a backup whose audit chain does not verify. The backup is copied beside
 * the control database (owner-only), checked there through the project's verified store
 * (which migrates an older schema), fsynced and renamed over it; the replaced file is kept as
 * `control.db.pre-restore-<UTC time>` (owner-only). A project without a control database
 * (disaster recovery) gets the backup as its first one.
 *
 * @example
 * const result = await restoreProject(project, '/backups/demo-2026-11-23.db');
 */
export async function restoreProject(project: Project, backup: string, opts: RestoreOptions = {}): Promise<RestoreResult> {
  const now = opts.now ?? new Date();
  const target = sqliteFileOf(project, 'restore refused');
  if (!existsSync(backup) || !statSync(backup).isFile()) throw new RuntimeError(`restore refused: no backup file at ${backup}`);
  // Disaster recovery: a project whose .svc/ is gone gets its pinned bundled store back first.
  await installBundledStoreIfPinned(project);
  ensureControlDir(project.controlDir);
  const staging = `${target}.restore-${process.pid}`;
  let current: SqliteStoreLock | null = null;
  let stagingInPlace = false;
  try {
    // 1. Nobody may have the control database open: the lock is held until the file is replaced.
    let currentProject: string | null = null;
    if (existsSync(target)) {
      try {
        current = lockSqliteStore(target);
      } catch (error) {
        if (error instanceof StoreBackupError && error.problem === 'in_use') {
          throw new RuntimeError(
            `restore refused: the control database ${target} is in use (is \`svc serve\` running on this project?); stop the service first`,
          );
        }
        throw unreadable(target, error instanceof StoreBackupError ? (error.cause ?? error) : error);
      }
      currentProject = current.projectId;
    }

    // 2. A private, owner-only copy of the backup beside the control database, checked against
    //    its signature by a key the project (or the operator) trusts.
    const signature = readSignature(backup);
    createOwnerOnlyFile(staging);
    copyInto(backup, staging);
    let info: BackupInfo = backupInfoOf(staging, `restore refused: ${backup}`);
    if (currentProject !== null && info.projectId !== currentProject) {
      throw new RuntimeError(
        `restore refused: ${backup} is a backup of project ${info.projectId}, but this project's control database belongs to ${currentProject}`,
      );
    }
    // The signature covers the bytes copied here, so nothing read below can differ from what was signed.
    const verdict = checkBackupSignature(signature, {
      sha256: sha256File(staging),
      project: info.projectId,
      ...projectBackupKeys(project),
      operatorKeys: opts.trustedKeys ?? [],
    });
    if (!verdict.ok) {
      if (verdict.problem === 'malformed') {
        throw new RuntimeError(`restore refused: ${backupSignatureFile(backup)} is ${verdict.detail}; use another backup`);
      }
      if (verdict.problem === 'untrusted') throw new RuntimeError(`restore refused: ${backup} is ${verdict.detail}`);
      if (verdict.problem === 'retired_key') {
        throw new RuntimeError(
          `restore refused: ${backup} is ${verdict.detail} (${nodeKeyHistoryFile(project.nodeKey)} lists this project's retired node keys)`,
        );
      }
      throw new RuntimeError(`restore refused: the signature of ${backup} does not hold: ${verdict.detail}; use another backup`);
    }

    // 3. Open the copy with the project's verified store (refuses a newer schema, migrates an
    //    older one) and verify its audit chain.
    let store: Awaited<ReturnType<typeof openControlStore>>;
    try {
      store = await openControlStore(project, { create: false, sqliteFile: staging });
    } catch (error) {
      if (error instanceof RuntimeError && /newer than/.test(error.message)) {
        throw new RuntimeError(
          `restore refused: ${backup} has schema version ${info.schemaVersion}, newer than this svc's store supports; restore it with the svc version that wrote it`,
        );
      }
      throw error;
    }
    let checked: Awaited<ReturnType<typeof verifySqliteBackup>>;
    try {
      checked = await verifySqliteBackup(staging, store);
    } finally {
      await store.close();
    }
    if (!checked.ok && checked.problem === 'audit_chain') {
      throw new RuntimeError(
        `restore refused: the audit chain of ${backup} is broken at event #${checked.seq} (${checked.detail}); the backup was altered, use another one`,
      );
    }
    // 3b. Every device, link and session must be one the audit trail recorded: a signature only
    //     says which key made the file, and the chain only covers the audit table.
    if (!checked.ok) {
      const more = checked.unaccounted.length > 1 ? ` (and ${checked.unaccounted.length - 1} more)` : '';
      throw new RuntimeError(
        `restore refused: ${backup} holds state its audit trail does not account for: ${checked.unaccounted[0]}${more}; the backup was altered, use another one`,
      );
    }
    const auditEvents = checked.auditEvents;
    settleSqliteFile(staging);
    chmodSync(staging, 0o600);
    // The schema as restored: the store brought an older backup up to date.
    info = backupInfoOf(staging, staging);

    // 4. Keep the old file, then replace it atomically.
    let preRestore: string | null = null;
    if (existsSync(target)) {
      preRestore = keepAside(target, `${target}.pre-restore-${stamp(now)}`);
      chmodSync(preRestore, 0o600);
    }
    for (const side of ['-wal', '-shm', '-journal']) rmSync(target + side, { force: true });
    renameSync(staging, target);
    stagingInPlace = true;
    fsyncPath(dirname(target));
    const nodeKeyCreated = ensureNodeKey(project.nodeKey);
    return { ...info, file: target, auditEvents, preRestore, nodeKeyCreated, signedBy: verdict.publicKey };
  } finally {
    current?.release();
    if (!stagingInPlace) for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(staging + suffix, { force: true });
  }
}

/** The project and schema of a copy of the control database, or the store's refusal as the runtime's error. */
function backupInfoOf(file: string, label: string): BackupInfo {
  try {
    return readSqliteBackupInfo(file, label);
  } catch (error) {
    if (error instanceof StoreBackupError) throw new RuntimeError(error.message, { cause: error });
    throw error;
  }
}

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
import { type AuditEvent, type BackupState, checkBackupSignature, signBackup, unaccountedState, verifyAuditChain } from '@svc/core';
import Database from 'better-sqlite3';
import { allAuditEvents } from './audit-events.js';
import { installBundledStoreIfPinned } from './bundled-addons.js';
import { embeddedStoreFile, ensureControlDir, ensureNodeKey, openControlStore } from './control.js';
import { RuntimeError } from './errors.js';
import { nodeKeyHistoryFile, readNodeKeyHistory } from './node-key-history.js';
import { loadNodeIdentity } from './node-keys.js';
import type { Project } from './project.js';

/** `PRAGMA application_id` of a svc auth control store ("svca"), as svc-store-sqlite writes it. */
const CONTROL_STORE_APPLICATION_ID = 0x73766361;

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

/**
 * Transient state a backup leaves out: provider flows in progress (their `state`, `nonce` and
 * PKCE verifier), sign-in challenges, and pairing attempts still open (neither completed nor
 * burned). All are short lived and single use: after a restore they are started again, and a
 * backup file (kept longer and in more places than the database) must not carry them. The
 * sealed grace pairs of sessions go too ({@link dropTransientState}): their grace is long over
 * by the time a backup is restored.
 */
const TRANSIENT_STATE: readonly (readonly [table: string, where: string])[] = [
  ['flows', '1 = 1'],
  ['challenges', '1 = 1'],
  ['pairing_intents', 'completed_at IS NULL AND burned_at IS NULL'],
];

/** Deletes {@link TRANSIENT_STATE} from the copy `file`, then rebuilds it so no freed page keeps a byte of it. */
function dropTransientState(file: string): void {
  const db = new Database(file, { fileMustExist: true });
  try {
    const has = db.prepare<[string], { n: number }>("SELECT COUNT(*) AS n FROM sqlite_schema WHERE type = 'table' AND name = ?");
    db.transaction(() => {
      for (const [table, where] of TRANSIENT_STATE) {
        if ((has.get(table)?.n ?? 0) > 0) db.exec(`DELETE FROM ${table} WHERE ${where}`);
      }
      db.exec('UPDATE sessions SET prev_successor = NULL WHERE prev_successor IS NOT NULL');
    })();
    db.exec('VACUUM');
  } finally {
    db.close();
  }
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

function sqliteCode(error: unknown): string {
  return (error as { code?: unknown }).code?.toString() ?? '';
}

/** Reads the project id and schema version of a control database; `label` names it in refusals. */
function readInfo(db: Database.Database, label: string): BackupInfo {
  let applicationId: number;
  try {
    applicationId = db.pragma('application_id', { simple: true }) as number;
  } catch (error) {
    throw new RuntimeError(`${label} is not a SQLite database (${(error as Error).message})`, { cause: error });
  }
  if (applicationId !== CONTROL_STORE_APPLICATION_ID) throw new RuntimeError(`${label} is not a svc auth control database`);
  const schema = db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number | null };
  const project = db.prepare('SELECT project_id FROM project WHERE singleton = 1').get() as { project_id: string } | undefined;
  if (project === undefined) throw new RuntimeError(`${label} holds no project (it was never initialised with \`svc auth init\`)`);
  return { projectId: project.project_id, schemaVersion: schema.v ?? 0 };
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

/** Leaves a SQLite file as one self-contained file (rollback journal mode: no -wal or -shm beside it). */
function settle(file: string): void {
  const db = new Database(file, { fileMustExist: true });
  try {
    db.pragma('journal_mode = DELETE');
  } finally {
    db.close();
  }
  fsyncPath(file);
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
    const db = new Database(source, { fileMustExist: true, timeout: 5000 });
    try {
      readInfo(db, source);
      db.prepare('VACUUM INTO ?').run(partial);
    } finally {
      db.close();
    }
    dropTransientState(partial);
    settle(partial);
    chmodSync(partial, 0o600);
    const check = new Database(partial, { fileMustExist: true, readonly: true });
    let info: BackupInfo;
    try {
      info = readInfo(check, partial);
    } finally {
      check.close();
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

/** The rows of a control database the audit trail must account for (see core's `unaccountedState`). */
function readAccountedState(file: string): BackupState {
  const db = new Database(file, { fileMustExist: true, readonly: true });
  try {
    return {
      devices: db
        .prepare('SELECT id, public_key AS publicKey, realm, subject, removed_at AS removedAt FROM devices')
        .all() as BackupState['devices'],
      links: db
        .prepare('SELECT id, realm, subject, issuer, external_subject AS externalSubject, removed_at AS removedAt FROM links')
        .all() as BackupState['links'],
      sessions: db
        .prepare('SELECT id, realm, subject, device_id AS deviceId, revoked_at AS revokedAt FROM sessions')
        .all() as BackupState['sessions'],
      bootstrapTokens: db
        .prepare('SELECT id, expires_at AS expiresAt, used_at AS usedAt, superseded_at AS supersededAt FROM bootstrap_tokens')
        .all() as NonNullable<BackupState['bootstrapTokens']>,
      pairingIntents: db
        .prepare('SELECT id, realm, subject, completed_at AS completedAt, burned_at AS burnedAt FROM pairing_intents')
        .all() as NonNullable<BackupState['pairingIntents']>,
    };
  } finally {
    db.close();
  }
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
  let current: Database.Database | null = null;
  let stagingInPlace = false;
  try {
    // 1. Nobody may have the control database open: the lock is held until the file is replaced.
    let currentProject: string | null = null;
    if (existsSync(target)) {
      current = new Database(target, { fileMustExist: true, timeout: 0 });
      current.pragma('locking_mode = EXCLUSIVE');
      try {
        // Leaving WAL mode needs the only connection: a serving process holds a lock on the file.
        current.pragma('journal_mode = DELETE');
      } catch (error) {
        if (sqliteCode(error).startsWith('SQLITE_BUSY')) {
          throw new RuntimeError(
            `restore refused: the control database ${target} is in use (is \`svc serve\` running on this project?); stop the service first`,
          );
        }
        throw unreadable(target, error);
      }
      try {
        currentProject = readInfo(current, target).projectId;
      } catch (error) {
        throw unreadable(target, error);
      }
    }

    // 2. A private, owner-only copy of the backup beside the control database, checked against
    //    its signature by a key the project (or the operator) trusts.
    const signature = readSignature(backup);
    createOwnerOnlyFile(staging);
    copyInto(backup, staging);
    const raw = new Database(staging, { fileMustExist: true });
    let info: BackupInfo;
    try {
      info = readInfo(raw, `restore refused: ${backup}`);
    } finally {
      raw.close();
    }
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
    let auditEvents: number;
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
    const events: AuditEvent[] = [];
    try {
      for await (const event of allAuditEvents(store)) events.push(event);
      const chain = verifyAuditChain(events);
      if (!chain.ok) {
        throw new RuntimeError(
          `restore refused: the audit chain of ${backup} is broken at event #${chain.seq} (${chain.problem}); the backup was altered, use another one`,
        );
      }
      auditEvents = chain.length;
    } finally {
      await store.close();
    }
    // 3b. Every device, link and session must be one the audit trail recorded: a signature only
    //     says which key made the file, and the chain only covers the audit table.
    const unaccounted = unaccountedState(readAccountedState(staging), events);
    if (unaccounted.length > 0) {
      const more = unaccounted.length > 1 ? ` (and ${unaccounted.length - 1} more)` : '';
      throw new RuntimeError(
        `restore refused: ${backup} holds state its audit trail does not account for: ${unaccounted[0]}${more}; the backup was altered, use another one`,
      );
    }
    settle(staging);
    chmodSync(staging, 0o600);
    const restored = new Database(staging, { fileMustExist: true, readonly: true });
    try {
      // The schema as restored: the store brought an older backup up to date.
      info = readInfo(restored, staging);
    } finally {
      restored.close();
    }

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
    current?.close();
    if (!stagingInPlace) for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(staging + suffix, { force: true });
  }
}

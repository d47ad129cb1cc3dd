/**
 * Backup and restore as operations of the embedded store: a consistent copy of a control
 * database, the facts a copy states about itself, the lock that proves no process has the
 * database open, and the audit check of a copy. The caller (the runtime) owns the files around
 * them (owner-only creation, signatures, atomic links and renames) and the words it prints.
 */
import { chmodSync, closeSync, fsyncSync, openSync } from 'node:fs';
import { type AuditEvent, type BackupState, unaccountedState, verifyAuditChain } from '@svc/core';
import type { Store } from '@svc/core/store';
import Database from 'better-sqlite3';
// The value import registers store_backup_refused with core's registry whoever loads this module alone.
import type { STORE_SQLITE_FAILURE_CODES, StoreSqliteFailureCode } from './failure-codes.js';
import { CONTROL_STORE_APPLICATION_ID } from './open-sqlite-store.js';

/** What a copy of a control database says about itself, read from the database it holds. */
export interface SqliteBackupInfo {
  readonly projectId: string;
  readonly schemaVersion: number;
}

/**
 * Why a file cannot be backed up, restored or checked: `not_sqlite` (not a SQLite database),
 * `not_control_store` (another application's database), `no_project` (a control database never
 * initialised), `in_use` (another connection holds it: the service is running), `unreadable`
 * (the current database could not be read; `cause` says why).
 */
export type StoreBackupProblem = 'not_sqlite' | 'not_control_store' | 'no_project' | 'in_use' | 'unreadable';

/**
 * A refusal of a backup operation of the embedded store; `problem` says which, `file` names the
 * database. The message is one line naming the file (the `label` the caller gave).
 *
 * @example
 * try {
 *   readSqliteBackupInfo('/backups/demo.db');
 * } catch (error) {
 *   if (error instanceof StoreBackupError && error.problem === 'no_project') console.error(error.message);
 * }
 */
export class StoreBackupError extends Error {
  readonly code = 'store_backup_refused' as const satisfies StoreSqliteFailureCode & keyof typeof STORE_SQLITE_FAILURE_CODES;
  readonly problem: StoreBackupProblem;
  readonly file: string;

  constructor(problem: StoreBackupProblem, file: string, message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'StoreBackupError';
    this.problem = problem;
    this.file = file;
  }
}

/**
 * Transient state a backup leaves out: provider flows in progress (their `state`, `nonce` and
 * PKCE verifier), sign-in challenges, and pairing attempts still open (neither completed nor
 * burned). All are short lived and single use: after a restore they are started again, and a
 * backup file (kept longer and in more places than the database) must not carry them. The
 * sealed grace pairs of sessions go too: their grace is long over by the time a backup is
 * restored.
 */
const TRANSIENT_STATE: readonly (readonly [table: string, where: string])[] = [
  ['flows', '1 = 1'],
  ['challenges', '1 = 1'],
  ['pairing_intents', 'completed_at IS NULL AND burned_at IS NULL'],
];

/** Reads the project id and schema version of an open control database; `label` names it in refusals. */
function readInfo(db: Database.Database, file: string, label: string): SqliteBackupInfo {
  let applicationId: number;
  try {
    applicationId = db.pragma('application_id', { simple: true }) as number;
  } catch (error) {
    throw new StoreBackupError('not_sqlite', file, `${label} is not a SQLite database (${(error as Error).message})`, { cause: error });
  }
  if (applicationId !== CONTROL_STORE_APPLICATION_ID) {
    throw new StoreBackupError('not_control_store', file, `${label} is not a svc auth control database`);
  }
  const schema = db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number | null };
  const project = db.prepare('SELECT project_id FROM project WHERE singleton = 1').get() as { project_id: string } | undefined;
  if (project === undefined) {
    throw new StoreBackupError('no_project', file, `${label} holds no project (it was never initialised with \`svc auth init\`)`);
  }
  return { projectId: project.project_id, schemaVersion: schema.v ?? 0 };
}

/** Opens `file` (which must exist) for one job and closes it whatever happens. */
function withDatabase<T>(file: string, fn: (db: Database.Database) => T, options: Database.Options = {}): T {
  const db = new Database(file, { fileMustExist: true, ...options });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/**
 * The project id and schema version a control database (or a copy of one) holds; `label` names
 * the file in the refusal's message (default: the path).
 *
 * @throws StoreBackupError `not_sqlite`, `not_control_store` or `no_project`.
 * @example
 * const { projectId, schemaVersion } = readSqliteBackupInfo('/backups/demo.db');
 */
export function readSqliteBackupInfo(file: string, label: string = file): SqliteBackupInfo {
  let db: Database.Database;
  try {
    db = new Database(file, { fileMustExist: true });
  } catch (error) {
    throw new StoreBackupError('not_sqlite', file, `${label} is not a SQLite database (${(error as Error).message})`, { cause: error });
  }
  try {
    return readInfo(db, file, label);
  } finally {
    db.close();
  }
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Leaves a SQLite file as one self-contained file (rollback journal mode: no -wal or -shm beside
 * it), fsynced.
 *
 * @example
 * settleSqliteFile('/p/.svc/control/control.db.restore-42');
 */
export function settleSqliteFile(file: string): void {
  withDatabase(file, (db) => db.pragma('journal_mode = DELETE'));
  fsyncPath(file);
}

/**
 * Writes a consistent copy of the control database `source` into `into`, an existing EMPTY
 * file the caller created owner-only (so no byte of the copy is ever readable by others); the
 * service may be serving meanwhile. The copy is one `VACUUM INTO` (a single read transaction: a
 * snapshot as of one commit, not blocking writers); transient state is then deleted from the
 * copy and the copy rebuilt so no freed page keeps a byte of it, left in rollback-journal mode
 * (one self-contained file), fsynced and mode 0600. Returns what the copy holds.
 *
 * @throws StoreBackupError when `source` is not an initialised control database.
 * @example
 * closeSync(openSync(partial, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600));
 * const { projectId, schemaVersion } = backupSqliteStore('/p/.svc/control/control.db', partial);
 */
export function backupSqliteStore(source: string, into: string): SqliteBackupInfo {
  withDatabase(
    source,
    (db) => {
      readInfo(db, source, source);
      db.prepare('VACUUM INTO ?').run(into);
    },
    { timeout: 5000 },
  );
  withDatabase(into, (db) => {
    const has = db.prepare<[string], { n: number }>("SELECT COUNT(*) AS n FROM sqlite_schema WHERE type = 'table' AND name = ?");
    db.transaction(() => {
      for (const [table, where] of TRANSIENT_STATE) {
        if ((has.get(table)?.n ?? 0) > 0) db.exec(`DELETE FROM ${table} WHERE ${where}`);
      }
      db.exec('UPDATE sessions SET prev_successor = NULL WHERE prev_successor IS NOT NULL');
    })();
    db.exec('VACUUM');
  });
  settleSqliteFile(into);
  chmodSync(into, 0o600);
  return readSqliteBackupInfo(into);
}

/** The hold {@link lockSqliteStore} takes on a control database: nobody else can open it until `release`. */
export interface SqliteStoreLock {
  /** The project the locked database belongs to. */
  readonly projectId: string;
  /** Lets go of the lock (closes the connection); safe to call twice. */
  release(): void;
}

/**
 * Takes the control database `file` for this process alone, without waiting: the connection
 * leaves WAL mode (which needs the only connection) in exclusive locking mode, so a running
 * service (whose connection holds a lock on the file) is detected, and no process can open the
 * file until `release`. A restore holds it until the file is replaced.
 *
 * @throws StoreBackupError `in_use` when another connection has the file open; `unreadable`
 *   (with the reason as `cause`) when the file cannot be read as a control database.
 * @example
 * const lock = lockSqliteStore('/p/.svc/control/control.db');
 * try {
 *   // ... replace the file ...
 * } finally {
 *   lock.release();
 * }
 */
export function lockSqliteStore(file: string): SqliteStoreLock {
  let db: Database.Database;
  try {
    db = new Database(file, { fileMustExist: true, timeout: 0 });
  } catch (error) {
    throw new StoreBackupError('unreadable', file, `${file} cannot be read (${(error as Error).message})`, { cause: error });
  }
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    try {
      db.pragma('journal_mode = DELETE');
    } catch (error) {
      const code = (error as { code?: unknown }).code?.toString() ?? '';
      if (code.startsWith('SQLITE_BUSY'))
        throw new StoreBackupError('in_use', file, `${file} is in use by another process`, { cause: error });
      throw error;
    }
    const { projectId } = readInfo(db, file, file);
    return { projectId, release: () => db.close() };
  } catch (error) {
    db.close();
    if (error instanceof StoreBackupError && error.problem === 'in_use') throw error;
    throw new StoreBackupError('unreadable', file, `${file} cannot be read (${(error as Error).message})`, { cause: error });
  }
}

/**
 * The rows of a control database (or a copy) the audit trail must account for (see core's
 * `unaccountedState`).
 *
 * @example
 * const problems = unaccountedState(readSqliteAccountedState(copy), events);
 */
export function readSqliteAccountedState(file: string): BackupState {
  return withDatabase(
    file,
    (db) => ({
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
    }),
    { readonly: true },
  );
}

/** What {@link verifySqliteBackup} found in a copy. */
export type SqliteBackupVerdict =
  | { readonly ok: true; readonly auditEvents: number }
  | { readonly ok: false; readonly problem: 'audit_chain'; readonly seq: number; readonly detail: string }
  | { readonly ok: false; readonly problem: 'unaccounted'; readonly unaccounted: readonly string[] };

const AUDIT_PAGE = 1000;

/**
 * Verifies a copy of a control database: its audit chain holds, and every device, link,
 * session, bootstrap token and pairing intent in it is one the audit trail recorded (a
 * signature only says which key made the file, and the chain only covers the audit table).
 * `store` is the copy opened as a store (through the project's verified store addon, which
 * refuses a newer schema and migrates an older one); `file` is the copy's path.
 *
 * @example
 * const store = await openSqliteStore({ file: staging });
 * try {
 *   const verdict = await verifySqliteBackup(staging, store);
 *   if (!verdict.ok) console.error(verdict.problem);
 * } finally {
 *   await store.close();
 * }
 */
export async function verifySqliteBackup(file: string, store: Pick<Store, 'listAuditEvents'>): Promise<SqliteBackupVerdict> {
  const events: AuditEvent[] = [];
  for (let after = 0; ; ) {
    const page = await store.listAuditEvents({ afterSeq: after, limit: AUDIT_PAGE });
    events.push(...page);
    const last = page.at(-1);
    if (page.length < AUDIT_PAGE || last === undefined) break;
    after = last.seq;
  }
  const chain = verifyAuditChain(events);
  if (!chain.ok) return { ok: false, problem: 'audit_chain', seq: chain.seq, detail: chain.problem };
  const unaccounted = unaccountedState(readSqliteAccountedState(file), events);
  if (unaccounted.length > 0) return { ok: false, problem: 'unaccounted', unaccounted };
  return { ok: true, auditEvents: chain.length };
}

import { chmodSync, closeSync, constants, openSync, type Stats, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { StoreOpenError } from '@svc/core';
import Database from 'better-sqlite3';
import { type CheckpointPlan, DEFAULT_CHECKPOINT_PLAN } from './checkpoint.js';
import { loadMigrations, migrate } from './migrations.js';
import { SqliteStore } from './sqlite-store.js';

/** How to open the embedded control store. */
export interface SqliteStoreOptions {
  /** Database file path; its directory must already exist. */
  file: string;
  /**
   * `normal` (default): WAL + NORMAL survives a kill -9 of the process; on power loss the last
   * commits may roll back, the file never corrupts. `full` fsyncs every commit.
   */
  synchronous?: 'normal' | 'full';
  /**
   * Default true: refuse to open when the file or its directory is accessible by group or
   * other, because the file holds every session's token digests and the audit trail.
   */
  requireOwnerOnly?: boolean;
  /**
   * How long a write waits for another process's write lock before it fails with `503
   * store_unavailable` (default 5000). The wait is asynchronous: the event loop keeps serving
   * reads, health and the other listeners meanwhile (only opening and migrating block).
   */
  busyTimeoutMs?: number;
  /** Sessions the bearer-check cache keeps (default 10,000); 0 reads the store on every check. */
  bearerCacheSessions?: number;
  /** When the WAL is checkpointed, and by whom (see `DEFAULT_CHECKPOINT_PLAN`); tests make it small. */
  checkpoint?: Partial<CheckpointPlan>;
}

/** SQLite's page cache per connection, in KiB (set explicitly: the figure must not depend on how SQLite was built). */
const PAGE_CACHE_KIB = 16_384;

/** SQLite's own (blocking) busy wait once the store is open, in milliseconds. */
const SQLITE_BUSY_WAIT_MS = 5;

/** `PRAGMA application_id` of a svc auth control store: "svca". */
export const CONTROL_STORE_APPLICATION_ID = 0x73766361;

const SIDE_FILES = ['-wal', '-shm'] as const;

function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

function octal(mode: number): string {
  return `0${(mode & 0o777).toString(8).padStart(3, '0')}`;
}

function refuseOpenToOthers(file: string, dir: string): void {
  const dirStat = statSync(dir);
  if ((dirStat.mode & 0o077) !== 0) {
    throw new StoreOpenError(
      dir,
      `refusing to open the control database: its directory ${dir} has mode ${octal(dirStat.mode)}, accessible by group or other; run \`chmod 700 ${dir}\``,
    );
  }
  for (const path of [file, ...SIDE_FILES.map((suffix) => file + suffix)]) {
    const st = statOrNull(path);
    if (st !== null && (st.mode & 0o077) !== 0) {
      throw new StoreOpenError(
        path,
        `refusing to open the control database: ${path} has mode ${octal(st.mode)}, accessible by group or other; run \`chmod 600 ${path}\``,
      );
    }
  }
}

/** Creates the file owner-only before SQLite sees it, so it is never readable by others, not even briefly. */
function createOwnerOnly(file: string): void {
  let fd: number;
  try {
    fd = openSync(file, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return;
    throw error;
  }
  closeSync(fd);
  // The umask may have narrowed 0600 further; make it exactly 0600.
  chmodSync(file, 0o600);
}

/** Refuses a file that is some other application's SQLite database, before changing anything in it. */
function refuseForeign(db: Database.Database, file: string): void {
  let applicationId: number;
  let objects: number;
  try {
    applicationId = db.pragma('application_id', { simple: true }) as number;
    objects = db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM sqlite_schema').get()?.n ?? 0;
  } catch (error) {
    throw new StoreOpenError(file, `${file} is not a SQLite database (${(error as Error).message}); is the path right?`, { cause: error });
  }
  if (applicationId === CONTROL_STORE_APPLICATION_ID) return;
  if (applicationId === 0 && objects === 0) return; // a fresh, empty file
  throw new StoreOpenError(file, `${file} is a SQLite database but not a svc auth control store; is the path right?`);
}

/**
 * Opens (creating it if missing) the embedded control store: the file is created with mode
 * 0600, then opened in WAL mode with foreign keys on and migrated to the current schema; the
 * `-wal` and `-shm` files are made 0600 too. Several processes may open the same file.
 *
 * @throws StoreOpenError when the file or its directory is accessible by group or other
 *   (unless `requireOwnerOnly: false`), or the file is not a control store, or its schema is
 *   newer than this package.
 * @example
 * const store = await openSqliteStore({ file: '/var/lib/svc/demo/control.db' });
 * try {
 *   await store.ping();
 * } finally {
 *   await store.close();
 * }
 */
export async function openSqliteStore(options: SqliteStoreOptions): Promise<SqliteStore> {
  const file = resolve(options.file);
  const dir = dirname(file);
  const synchronous = options.synchronous ?? 'normal';
  if (synchronous !== 'normal' && synchronous !== 'full') throw new TypeError('synchronous must be "normal" or "full"');
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  if (!Number.isSafeInteger(busyTimeoutMs) || busyTimeoutMs < 0) throw new TypeError('busyTimeoutMs must be a whole number >= 0');
  const checkpoint: CheckpointPlan = { ...DEFAULT_CHECKPOINT_PLAN, ...options.checkpoint };
  if (
    !Object.values(checkpoint).every((v) => Number.isSafeInteger(v) && v > 0) ||
    checkpoint.restartAtFrames >= checkpoint.backstopFrames
  ) {
    throw new TypeError(
      'checkpoint: everyMs, restartAtFrames and backstopFrames must be whole numbers > 0, restartAtFrames < backstopFrames',
    );
  }

  const dirStat = statOrNull(dir);
  if (dirStat === null || !dirStat.isDirectory()) {
    throw new StoreOpenError(dir, `the directory of the control database does not exist: ${dir}; create it with \`mkdir -m 700 ${dir}\``);
  }
  // Checked before anything is created, so a refusal leaves the directory as it was.
  // Windows has no POSIX modes to check; its ACLs are the operator's business.
  if ((options.requireOwnerOnly ?? true) && process.platform !== 'win32') refuseOpenToOthers(file, dir);
  createOwnerOnly(file);

  const db = new Database(file, { fileMustExist: true, timeout: busyTimeoutMs });
  try {
    refuseForeign(db, file);
    const mode = db.pragma('journal_mode = WAL', { simple: true });
    if (mode !== 'wal') throw new StoreOpenError(file, `${file} could not be switched to WAL mode (it reports ${String(mode)})`);
    db.pragma(`synchronous = ${synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    db.pragma('foreign_keys = ON');
    // The store's background thread checkpoints the WAL (checkpoint.ts); this connection's own
    // automatic checkpoint, which would stall the event loop for the copy, is only its backstop.
    db.pragma(`wal_autocheckpoint = ${checkpoint.backstopFrames}`);
    // Room for the upper levels of every B-tree of a store with millions of sessions, so a
    // session that is not in the bearer-check cache costs one leaf read, not a descent.
    db.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
    migrate(db, file, loadMigrations(), Date.now());
    // Temporary files in memory, after the migrations (an index built over millions of rows may
    // still sort on disk). A batch whose write threw runs again with each write in a savepoint
    // (write-queue.ts), whose journal holds the pages it changes; past 64 KiB SQLite moved that
    // journal into a file of the system's temporary directory for the rest of the batch: pages
    // of this store (token digests, the audit trail) outside its owner-only directory, and two
    // system calls per page written. Once open, the store's queries keep little in temporary
    // structures: pages of rows in index order, counts, a realm's groups.
    db.pragma('temp_store = MEMORY');
    // From here on SQLite's own busy wait, which sleeps inside the call and so blocks the whole
    // event loop, is kept to a few milliseconds (a reader meeting a checkpoint's brief lock);
    // writes wait for another process's write lock on timers instead (SqliteStore#write).
    db.pragma(`busy_timeout = ${SQLITE_BUSY_WAIT_MS}`);
    for (const suffix of SIDE_FILES) {
      try {
        chmodSync(file + suffix, 0o600);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
    return new SqliteStore(db, file, synchronous, options.bearerCacheSessions, busyTimeoutMs, checkpoint);
  } catch (error) {
    db.close();
    if (error instanceof StoreOpenError) throw error;
    throw new StoreOpenError(file, `cannot open the control database ${file}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * The one schema-migration runner of the SQL stores. Core does no I/O: each store reads its
 * own `migrations/NNN_name.sql` files and gives the runner a {@link MigrationDriver} over its
 * connection; the runner decides what to apply, in which order, and when to refuse.
 */

/** One schema migration: `migrations/NNN_name.sql`. */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/** A migration file name: three digits, an underscore, a lowercase name, `.sql`. */
const MIGRATION_FILE = /^(\d{3})_([a-z0-9_]+)\.sql$/;

/**
 * The migrations among `files` (names in a directory; others are ignored), in version order,
 * each read by `read`; `where` names the directory in errors. Throws when two share a version
 * or there are none.
 *
 * @example
 * const dir = new URL('../migrations/', import.meta.url);
 * const migrations = migrationsFrom(readdirSync(dir), (f) => readFileSync(new URL(f, dir), 'utf8'), dir.pathname);
 */
export function migrationsFrom(files: readonly string[], read: (file: string) => string, where: string): readonly Migration[] {
  const migrations: Migration[] = [];
  for (const file of [...files].sort()) {
    const match = MIGRATION_FILE.exec(file);
    if (match === null) continue;
    const version = Number(match[1]);
    if (migrations.some((m) => m.version === version)) throw new Error(`two migrations share version ${version}: ${file}`);
    migrations.push({ version, name: match[2] ?? file, sql: read(file) });
  }
  if (migrations.length === 0) throw new Error(`no migrations found in ${where}`);
  return Object.freeze(migrations);
}

/**
 * What the runner needs of a store's connection. `T` wraps each result: a promise for an
 * asynchronous driver (PostgreSQL), the value itself for a synchronous one (better-sqlite3,
 * whose transaction must not yield to the event loop: another connection of the same thread
 * waiting on the write lock would block the thread that holds it).
 */
export interface MigrationDriverOf<Sync extends boolean> {
  /** The versions applied so far, ascending; none when the tracking table does not exist yet. */
  appliedVersions(): Result<Sync, readonly number[]>;
  /**
   * Runs `fn` in one transaction that holds the store's migration lock (so processes opening
   * the same store at once apply each migration exactly once), with the tracking table
   * `schema_migrations` created first; commits when `fn` returns, rolls back when it throws.
   */
  exclusively<T>(fn: () => Result<Sync, T>): Result<Sync, T>;
  /** Applies `migration` and records it as applied at `now`, inside {@link exclusively}. */
  apply(migration: Migration, now: number): Result<Sync, void>;
  /** The error to throw when the store's schema (`found`) is newer than the newest migration (`latest`). */
  newerSchema(found: number, latest: number): Error;
}

type Result<Sync extends boolean, T> = Sync extends true ? T : Promise<T>;

/** An asynchronous driver (see {@link MigrationDriverOf}). */
export type MigrationDriver = MigrationDriverOf<false>;

/** A synchronous driver (see {@link MigrationDriverOf}). */
export type SyncMigrationDriver = MigrationDriverOf<true>;

/**
 * The migrations of `migrations` not in `applied` (ascending), in order; throws the driver's
 * error when `applied` holds a version newer than the newest migration. The one decision both
 * runners share.
 */
function pending(
  driver: { newerSchema(found: number, latest: number): Error },
  applied: readonly number[],
  migrations: readonly Migration[],
) {
  const latest = migrations.at(-1)?.version ?? 0;
  const newest = applied.at(-1) ?? 0;
  if (newest > latest) throw driver.newerSchema(newest, latest);
  return migrations.filter((m) => !applied.includes(m.version));
}

/**
 * Brings a store's schema up to date: refuses a schema newer than `migrations`, and applies
 * each missing migration in order inside one {@link MigrationDriverOf.exclusively} transaction
 * (checking again under the lock). An up-to-date store (the common case) is only read: no
 * lock, no DDL, so opening never serialises behind other processes and a role without DDL
 * rights can use a migrated store. Returns the versions it applied (none when up to date).
 *
 * @example
 * const applied = await runMigrations(driver, loadMigrations(), Date.now()); // [] when up to date
 */
export async function runMigrations(driver: MigrationDriver, migrations: readonly Migration[], now: number): Promise<number[]> {
  if (pending(driver, await driver.appliedVersions(), migrations).length === 0) return [];
  return driver.exclusively(async () => {
    const applied: number[] = [];
    for (const m of pending(driver, await driver.appliedVersions(), migrations)) {
      await driver.apply(m, now);
      applied.push(m.version);
    }
    return applied;
  });
}

/**
 * {@link runMigrations} over a synchronous driver: the same decisions, without yielding to the
 * event loop inside the transaction.
 *
 * @example
 * const applied = runMigrationsSync(driver, loadMigrations(), Date.now()); // [] when up to date
 */
export function runMigrationsSync(driver: SyncMigrationDriver, migrations: readonly Migration[], now: number): number[] {
  if (pending(driver, driver.appliedVersions(), migrations).length === 0) return [];
  return driver.exclusively(() => {
    const applied: number[] = [];
    for (const m of pending(driver, driver.appliedVersions(), migrations)) {
      driver.apply(m, now);
      applied.push(m.version);
    }
    return applied;
  });
}

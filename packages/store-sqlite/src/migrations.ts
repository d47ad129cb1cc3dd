import { readdirSync, readFileSync } from 'node:fs';
import { StoreOpenError } from '@svc/core';
import { type Migration, migrationsFrom, runMigrationsSync, type SyncMigrationDriver } from '@svc/core/store';
import type Database from 'better-sqlite3';

export type { Migration } from '@svc/core/store';

let cached: readonly Migration[] | undefined;

/**
 * The migrations shipped with this package, in order. Read relative to this file so they are
 * found wherever the package is installed (`dist/` sits next to `migrations/`).
 *
 * @example
 * const latest = loadMigrations().at(-1)?.version;
 */
export function loadMigrations(): readonly Migration[] {
  if (cached !== undefined) return cached;
  const dir = new URL('../migrations/', import.meta.url);
  cached = migrationsFrom(readdirSync(dir), (file) => readFileSync(new URL(file, dir), 'utf8'), dir.pathname);
  return cached;
}

const CREATE_TRACKING_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at INTEGER NOT NULL
) STRICT`;

/** core's migration runner over one better-sqlite3 connection; the migration lock is SQLite's write lock (`BEGIN IMMEDIATE`). */
function sqliteDriver(db: Database.Database, file: string): SyncMigrationDriver {
  return {
    appliedVersions() {
      const table = db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'").get();
      if (table === undefined) return [];
      return db
        .prepare<[], { version: number }>('SELECT version FROM schema_migrations ORDER BY version')
        .all()
        .map((r) => r.version);
    },
    exclusively: (fn) =>
      db
        .transaction(() => {
          db.exec(CREATE_TRACKING_TABLE);
          return fn();
        })
        .immediate(),
    apply(m, now) {
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, now);
    },
    newerSchema: (found, latest) =>
      new StoreOpenError(
        file,
        `the control database ${file} has schema version ${found}, newer than this svc-store-sqlite knows (${latest}); upgrade svc-store-sqlite`,
      ),
  };
}

/**
 * Brings the schema up to date with core's runner: applies each missing migration in order,
 * all in one `BEGIN IMMEDIATE` transaction so that processes opening the same fresh file at
 * once apply each migration exactly once. Returns the versions it applied (none when up to date).
 *
 * @example
 * const applied = migrate(db, file, loadMigrations(), Date.now()); // [] when up to date
 */
export function migrate(db: Database.Database, file: string, migrations: readonly Migration[], now: number): number[] {
  return runMigrationsSync(sqliteDriver(db, file), migrations, now);
}

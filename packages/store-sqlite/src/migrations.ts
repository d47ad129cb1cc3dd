import { readdirSync, readFileSync } from 'node:fs';
import { StoreOpenError } from '@svc/core';
import type Database from 'better-sqlite3';

/** One schema migration: `migrations/NNN_name.sql`. */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

const MIGRATION_FILE = /^(\d{3})_([a-z0-9_]+)\.sql$/;

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
  const migrations: Migration[] = [];
  for (const file of readdirSync(dir).sort()) {
    const match = MIGRATION_FILE.exec(file);
    if (match === null) continue;
    const version = Number(match[1]);
    if (migrations.some((m) => m.version === version)) throw new Error(`two migrations share version ${version}: ${file}`);
    migrations.push({ version, name: match[2] ?? file, sql: readFileSync(new URL(file, dir), 'utf8') });
  }
  if (migrations.length === 0) throw new Error(`no migrations found in ${dir.pathname}`);
  cached = Object.freeze(migrations);
  return cached;
}

const CREATE_TRACKING_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at INTEGER NOT NULL
) STRICT`;

function appliedVersions(db: Database.Database): number[] {
  const table = db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'").get();
  if (table === undefined) return [];
  return db
    .prepare<[], { version: number }>('SELECT version FROM schema_migrations ORDER BY version')
    .all()
    .map((r) => r.version);
}

function refuseNewer(file: string, applied: readonly number[], latest: number): void {
  const newest = applied.at(-1) ?? 0;
  if (newest > latest) {
    throw new StoreOpenError(
      file,
      `the control database ${file} has schema version ${newest}, newer than this svc-store-sqlite knows (${latest}); upgrade svc-store-sqlite`,
    );
  }
}

/**
 * Brings the schema up to date: applies each missing migration in order, all in one
 * `BEGIN IMMEDIATE` transaction so that processes opening the same fresh file at once apply
 * each migration exactly once. Returns the versions it applied (none when up to date).
 *
 * @example
 * const applied = migrate(db, file, loadMigrations(), Date.now()); // [] when up to date
 */
export function migrate(db: Database.Database, file: string, migrations: readonly Migration[], now: number): number[] {
  const latest = migrations.at(-1)?.version ?? 0;
  // Fast path without the write lock: every open of an up-to-date store (the common case)
  // must not serialize behind other processes' writes.
  const seen = appliedVersions(db);
  refuseNewer(file, seen, latest);
  if (migrations.every((m) => seen.includes(m.version))) return [];
  return db
    .transaction(() => {
      db.exec(CREATE_TRACKING_TABLE);
      const done = new Set(appliedVersions(db));
      refuseNewer(
        file,
        [...done].sort((a, b) => a - b),
        latest,
      );
      const insert = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
      const applied: number[] = [];
      for (const m of migrations) {
        if (done.has(m.version)) continue;
        db.exec(m.sql);
        insert.run(m.version, m.name, now);
        applied.push(m.version);
      }
      return applied;
    })
    .immediate();
}

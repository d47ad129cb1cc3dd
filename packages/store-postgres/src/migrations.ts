import { readdirSync, readFileSync } from 'node:fs';
import type { PoolClient } from 'pg';
import type { StorePostgresFailureCode } from './failure-codes.js';

/** One schema migration: `migrations/NNN_name.sql`. */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/** Why migrating stopped without an error of the server: the schema is newer than this package. */
export class NewerSchemaError extends Error {
  readonly code = 'store_schema_newer' as const satisfies StorePostgresFailureCode;
  readonly found: number;
  readonly latest: number;

  constructor(found: number, latest: number) {
    super(`schema version ${found} is newer than this svc-store-postgres knows (${latest})`);
    this.name = 'NewerSchemaError';
    this.found = found;
    this.latest = latest;
  }
}

const MIGRATION_FILE = /^(\d{3})_([a-z0-9_]+)\.sql$/;

let cached: readonly Migration[] | undefined;

/**
 * The migrations shipped with this package, in order. Read relative to this module so they
 * are found wherever the package is installed (`dist/` and `src/` both sit next to
 * `migrations/`).
 *
 * @example
 * const migrations = loadMigrations();
 * migrations.at(-1)?.version; // the schema version this package writes
 */
export function loadMigrations(dir: URL = new URL('../migrations/', import.meta.url)): readonly Migration[] {
  if (cached !== undefined) return cached;
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
  applied_at BIGINT NOT NULL
)`;

async function appliedVersions(client: PoolClient): Promise<number[]> {
  // to_regclass resolves through search_path (the store's schema) and is NULL, not an error,
  // when the table does not exist yet.
  const table = await client.query<{ t: string | null }>("SELECT to_regclass('schema_migrations')::text AS t");
  if (table.rows[0]?.t == null) return [];
  const rows = await client.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
  return rows.rows.map((r) => r.version);
}

function refuseNewer(applied: readonly number[], latest: number): void {
  const newest = applied.at(-1) ?? 0;
  if (newest > latest) throw new NewerSchemaError(newest, latest);
}

/**
 * Brings the schema up to date on `client`, whose search_path is the store's schema: creates
 * the schema if missing and applies each missing migration in order, all in one transaction
 * under a transaction-scoped advisory lock keyed on the schema name, so nodes starting at once
 * apply each migration exactly once and never race on CREATE SCHEMA. Returns the versions it
 * applied (none when up to date).
 *
 * @example
 * const applied = await migrate(client, 'svc_auth', loadMigrations(), Date.now());
 */
export async function migrate(client: PoolClient, schema: string, migrations: readonly Migration[], now: number): Promise<number[]> {
  const latest = migrations.at(-1)?.version ?? 0;
  // Fast path without the lock or DDL: an up-to-date store (the common case) opens with
  // reads only, so a runtime role without CREATE on the database can use a migrated schema.
  const seen = await appliedVersions(client);
  refuseNewer(seen, latest);
  if (migrations.every((m) => seen.includes(m.version))) return [];

  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`svc-store-postgres migrate ${schema}`]);
    // Created only when missing: PostgreSQL checks CREATE on the database even for an existing
    // schema with IF NOT EXISTS, and a least-privilege role that owns only its (DBA-made)
    // schema has no such right. The schema name was validated as a plain lowercase identifier,
    // so it needs no quoting; IF NOT EXISTS still guards against a DBA creating it meanwhile.
    const present = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    if (present.rowCount === 0) await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(CREATE_TRACKING_TABLE);
    const done = await appliedVersions(client);
    refuseNewer(done, latest);
    const applied: number[] = [];
    for (const m of migrations) {
      if (done.includes(m.version)) continue;
      try {
        await client.query(m.sql);
      } catch (err) {
        throw new Error(`migration ${String(m.version).padStart(3, '0')}_${m.name} failed: ${(err as Error).message}`);
      }
      await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, now]);
      applied.push(m.version);
    }
    await client.query('COMMIT');
    return applied;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

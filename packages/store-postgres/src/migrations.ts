import { readdirSync, readFileSync } from 'node:fs';
import { type Migration, type MigrationDriver, migrationsFrom, runMigrations } from '@svc/core/store';
import type { PoolClient } from 'pg';
import type { StorePostgresFailureCode } from './failure-codes.js';

export type { Migration } from '@svc/core/store';

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
  cached = migrationsFrom(readdirSync(dir), (file) => readFileSync(new URL(file, dir), 'utf8'), dir.pathname);
  return cached;
}

const CREATE_TRACKING_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at BIGINT NOT NULL
)`;

/**
 * core's migration runner over `client`; the migration lock is a transaction-scoped advisory
 * lock keyed on the schema name, taken before the schema is created, so nodes starting at once
 * never race on CREATE SCHEMA.
 */
function postgresDriver(client: PoolClient, schema: string): MigrationDriver {
  return {
    async appliedVersions() {
      // to_regclass resolves through search_path (the store's schema) and is NULL, not an error,
      // when the table does not exist yet.
      const table = await client.query<{ t: string | null }>("SELECT to_regclass('schema_migrations')::text AS t");
      if (table.rows[0]?.t == null) return [];
      const rows = await client.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
      return rows.rows.map((r) => r.version);
    },
    async exclusively(fn) {
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
        const result = await fn();
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
    },
    async apply(m, now) {
      try {
        await client.query(m.sql);
      } catch (err) {
        throw new Error(`migration ${String(m.version).padStart(3, '0')}_${m.name} failed: ${(err as Error).message}`);
      }
      await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, now]);
    },
    newerSchema: (found, latest) => new NewerSchemaError(found, latest),
  };
}

/**
 * Brings the schema up to date on `client`, whose search_path is the store's schema, with
 * core's runner: creates the schema if missing and applies each missing migration in order,
 * all in one transaction under a transaction-scoped advisory lock keyed on the schema name, so
 * nodes starting at once apply each migration exactly once and never race on CREATE SCHEMA. An
 * up-to-date store opens with reads only, so a runtime role without CREATE on the database can
 * use a migrated schema. Returns the versions it applied (none when up to date).
 *
 * @example
 * const applied = await migrate(client, 'svc_auth', loadMigrations(), Date.now());
 */
export function migrate(client: PoolClient, schema: string, migrations: readonly Migration[], now: number): Promise<number[]> {
  return runMigrations(postgresDriver(client, schema), migrations, now);
}

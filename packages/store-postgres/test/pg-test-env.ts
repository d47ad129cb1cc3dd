import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openPostgresStore, PostgresStore, type PostgresStoreOptions } from '../src/index.js';
import { budgetPoolConfig } from '../src/open-postgres-store.js';

/** The test server: `SVC_TEST_PG_URL`, else the local trust-auth one `scripts/ensure-postgres.sh` starts. */
export const PG_URL = process.env.SVC_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * Pool size per store in tests: small, because test files run in parallel against one server
 * (max_connections 100), yet above 1 so that attempts really run side by side.
 */
export const TEST_POOL_SIZE = 4;

/** A schema name no other run uses, so parallel runs never collide. */
export function freshSchemaName(): string {
  return `svc_test_${randomBytes(6).toString('hex')}`;
}

/**
 * The schemas a test file creates, and an admin connection to inspect and drop them. Call
 * `dispose()` in `after`: it drops every schema it handed out.
 */
export function createTestEnv() {
  const admin = new pg.Pool({ connectionString: PG_URL, max: 2 });
  admin.on('error', () => undefined);
  const schemas = new Set<string>();
  return {
    admin,
    /** A new schema name, dropped by `dispose`. */
    schema(): string {
      const name = freshSchemaName();
      schemas.add(name);
      return name;
    },
    /**
     * Opens a store (a "node") on `schema`. The test server trusts local connections, which the
     * store refuses unless accepted: accepted here (unauthenticated-role.test.ts tests the refusal).
     */
    open(schema: string, extra: Partial<PostgresStoreOptions> = {}): Promise<PostgresStore> {
      schemas.add(schema);
      return openPostgresStore({ connectionString: PG_URL, schema, max: TEST_POOL_SIZE, allowUnauthenticated: true, ...extra });
    },
    async drop(schema: string): Promise<void> {
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      schemas.delete(schema);
    },
    async dispose(): Promise<void> {
      try {
        for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await admin.end();
      }
    },
  };
}

/** The test env's type. */
export type TestEnv = ReturnType<typeof createTestEnv>;

/**
 * A store on `schema` (migrated already) with one connection per pool, so that
 * pg_prepared_statements (per connection) shows every execution of its statements; the pools
 * set up as openPostgresStore sets them up: the schema, BIGINT as numbers, the budget's settings
 * for a server of `serverVersion`. End both pools when done.
 */
export function oneConnectionStore(
  schema: string,
  serverVersion: number,
  options = '',
): { store: PostgresStore; pool: pg.Pool; budgetPool: pg.Pool } {
  const types = new pg.TypeOverrides();
  types.setTypeParser(20, 'text', Number);
  const base = { connectionString: PG_URL, options: `-c search_path=${schema} ${options}`.trim(), types };
  const pool = new pg.Pool({ ...base, max: 1 });
  const budgetPool = new pg.Pool({ ...budgetPoolConfig(base, serverVersion), max: 1 });
  return { store: new PostgresStore(pool, schema, budgetPool), pool, budgetPool };
}

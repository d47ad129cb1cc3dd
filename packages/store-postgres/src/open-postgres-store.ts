import pg from 'pg';
import { loadMigrations, migrate, NewerSchemaError } from './migrations.js';
import { PostgresStore } from './postgres-store.js';
import { StoreOpenError } from './store-open-error.js';

/** Where and how to reach the control database. */
export interface PostgresStoreOptions {
  /** `postgres://user@host:port/database`; the discrete fields below fill in what it leaves out. */
  readonly connectionString?: string;
  readonly host?: string;
  readonly port?: number;
  readonly database?: string;
  readonly user?: string;
  /** Already resolved from a secret reference by the caller. Never logged, never in an error message. */
  readonly password?: string;
  /** The schema every table lives in; created if missing. Default `svc_auth`. */
  readonly schema?: string;
  /** Pool size per node. Default 10. */
  readonly max?: number;
  /** TLS with certificate verification against the system CAs. */
  readonly ssl?: boolean;
}

/** The schema used when the options name none. */
export const DEFAULT_SCHEMA = 'svc_auth';

// A plain lowercase identifier: needs no quoting in SQL, nor escaping in the startup options.
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

// Our transactions are a few statements with no user think time; one idle this long is dead.
const IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000;

// How long to wait for a connection before an operation fails (so an outage becomes a 5xx,
// not a request that hangs forever).
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * BIGINT (OID 20) as a JavaScript number, on this pool only: every BIGINT here is a time in
 * milliseconds, a sequence number or a count, all far below 2^53. A value beyond that is
 * refused rather than silently rounded.
 */
function pgTypes(): pg.CustomTypesConfig {
  const types = new pg.TypeOverrides();
  types.setTypeParser(20, 'text', (text: string) => {
    const n = Number(text);
    if (!Number.isSafeInteger(n)) throw new RangeError(`BIGINT ${text} is beyond the safe integer range`);
    return n;
  });
  return types;
}

/** `user@host:port/database (schema s)`, for messages: never the password. */
function describeTarget(options: PostgresStoreOptions, schema: string): string {
  let host = options.host ?? '127.0.0.1';
  let port = String(options.port ?? 5432);
  let database = options.database ?? options.user ?? 'postgres';
  let user = options.user ?? 'postgres';
  if (options.connectionString !== undefined) {
    try {
      const url = new URL(options.connectionString);
      host = url.hostname || host;
      port = url.port || port;
      database = decodeURIComponent(url.pathname.replace(/^\//, '')) || database;
      user = decodeURIComponent(url.username) || user;
    } catch {
      return `the configured PostgreSQL connection string (schema ${schema})`;
    }
  }
  return `${user}@${host}:${port}/${database} (schema ${schema})`;
}

/** Every spelling of the password that could appear in a message. */
function secretsOf(options: PostgresStoreOptions): string[] {
  const secrets: string[] = [];
  if (options.password !== undefined && options.password !== '') secrets.push(options.password, encodeURIComponent(options.password));
  if (options.connectionString !== undefined) {
    try {
      const url = new URL(options.connectionString);
      if (url.password !== '') secrets.push(url.password, decodeURIComponent(url.password));
    } catch {
      // An unparsable string may still hold a password: keep it out of messages whole.
      secrets.push(options.connectionString);
    }
  }
  return secrets;
}

function redact(message: string, secrets: readonly string[]): string {
  let out = message.replace(/\s+/g, ' ').trim();
  for (const secret of secrets) out = out.split(secret).join('***');
  return out;
}

function openError(err: unknown, options: PostgresStoreOptions, target: string): StoreOpenError {
  const secrets = secretsOf(options);
  if (err instanceof NewerSchemaError) {
    return new StoreOpenError(target, `the PostgreSQL store at ${target} has ${err.message}; upgrade svc-store-postgres`);
  }
  const e = err as { message?: unknown; code?: unknown; errors?: unknown };
  let detail = typeof e.message === 'string' ? e.message : '';
  // Node reports a refused connect to several addresses as an AggregateError with an empty message.
  if (detail === '' && Array.isArray(e.errors)) detail = e.errors.map((x) => String((x as Error).message)).join('; ');
  if (detail === '') detail = String(err);
  const code = typeof e.code === 'string' ? e.code : undefined;
  let hint: string;
  switch (code) {
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ECONNRESET':
      hint = 'check that the server runs and that the host and port are right';
      break;
    case '28P01':
    case '28000':
      hint = 'check the user and the secret reference of the password';
      break;
    case '3D000':
      hint = 'create the database first, or name an existing one';
      break;
    case '42501':
      hint = 'the user needs CREATE on the database (or a schema migrated by a user that has it)';
      break;
    default:
      hint = 'check the store settings in project.edn';
  }
  return new StoreOpenError(target, redact(`cannot open the PostgreSQL store at ${target}: ${detail}; ${hint}`, secrets), code);
}

/**
 * Creates the pool: its own BIGINT parser, and `search_path` fixed to the schema as a startup
 * parameter, so every connection (including ones the pool opens later) is in the schema
 * before its first query, with no race against a `connect` handler.
 */
function createPool(options: PostgresStoreOptions, schema: string): pg.Pool {
  const config: pg.PoolConfig = {
    max: options.max ?? 10,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
    application_name: 'svc-auth',
    // idle_in_transaction_session_timeout: a node that stalls or is cut off mid-transaction
    // must not hold the audit_head lock (and so every node's writes) until TCP gives up.
    options: `-c search_path=${schema} -c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS}`,
    types: pgTypes(),
  };
  if (options.connectionString !== undefined) config.connectionString = options.connectionString;
  if (options.host !== undefined) config.host = options.host;
  if (options.port !== undefined) config.port = options.port;
  if (options.database !== undefined) config.database = options.database;
  if (options.user !== undefined) config.user = options.user;
  if (options.password !== undefined) config.password = options.password;
  if (options.ssl !== undefined) config.ssl = options.ssl;
  const pool = new pg.Pool(config);
  // An idle connection the server drops (restart, failover) must not crash the process; the
  // pool discards it, and the next operation connects afresh or fails with its own error.
  pool.on('error', () => undefined);
  return pool;
}

/**
 * Refuses an existing schema (or a table, view, sequence or index in it) owned by a role other
 * than the one svc connects as, unless that owner is a superuser (a DBA who set it up). The
 * schema is created with IF NOT EXISTS: without this check, a role that may create schemas in
 * the database could create `svc_auth` first and, as its owner, read every digest and rewrite or
 * replace the tables under the service.
 */
async function refuseForeignOwner(client: pg.PoolClient, schema: string, target: string): Promise<void> {
  const owners = await client.query<{ kind: string; name: string; owner: string }>(
    `SELECT 'schema' AS kind, n.nspname AS name, r.rolname AS owner
       FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner
      WHERE n.nspname = $1 AND r.rolname <> current_user AND NOT r.rolsuper
     UNION ALL
     SELECT 'relation', c.relname, r.rolname
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_roles r ON r.oid = c.relowner
      WHERE n.nspname = $1 AND r.rolname <> current_user AND NOT r.rolsuper
     ORDER BY 1 DESC, 2
     LIMIT 5`,
    [schema],
  );
  const first = owners.rows[0];
  if (first === undefined) return;
  const what = first.kind === 'schema' ? `the schema ${schema}` : `${schema}.${first.name}`;
  throw new StoreOpenError(
    target,
    `refusing the PostgreSQL store at ${target}: ${what} is owned by the role ${first.owner}, not by the role svc connects as (nor a superuser), so that role could read or replace the control state; drop it or choose another :store/schema`,
  );
}

/**
 * Opens the PostgreSQL control store: connects, creates the schema if missing, applies the
 * migrations (serialised across nodes by a transaction-scoped advisory lock) and checks that
 * the store answers. An existing schema owned by another (non-superuser) role is refused. Fails with a {@link StoreOpenError} whose one-line message never holds
 * the password; invalid options are a `TypeError`.
 *
 * @example
 * const store = await openPostgresStore({ connectionString: 'postgres://svc@db:5432/svc', password, schema: 'svc_auth' });
 * try {
 *   await store.ping();
 * } finally {
 *   await store.close();
 * }
 */
export async function openPostgresStore(options: PostgresStoreOptions): Promise<PostgresStore> {
  const schema = options.schema ?? DEFAULT_SCHEMA;
  if (!SCHEMA_NAME.test(schema)) {
    throw new TypeError(`schema must be a lowercase identifier (letters, digits, _; at most 63), not ${JSON.stringify(schema)}`);
  }
  if (options.max !== undefined && (!Number.isInteger(options.max) || options.max < 1)) {
    throw new TypeError('max must be a whole number of connections, at least 1');
  }
  const target = describeTarget(options, schema);
  const migrations = loadMigrations();
  const pool = createPool(options, schema);
  try {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      // A connection string with its own `options` replaces ours; tables must never land in
      // whatever schema that names (or in public).
      const path = await client.query<{ p: string }>("SELECT current_setting('search_path') AS p");
      if (path.rows[0]?.p !== schema) {
        throw new StoreOpenError(
          target,
          `the connection to ${target} has search_path ${JSON.stringify(path.rows[0]?.p)}, not ${schema}; remove "options" from the connection string`,
        );
      }
      await refuseForeignOwner(client, schema, target);
      await migrate(client, schema, migrations, Date.now());
    } catch (err) {
      broken = err as Error;
      throw err;
    } finally {
      client.release(broken);
    }
    const store = new PostgresStore(pool, schema);
    await store.ping();
    return store;
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw err instanceof StoreOpenError ? err : openError(err, options, target);
  }
}

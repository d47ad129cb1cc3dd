import { randomBytes } from 'node:crypto';
import { StoreOpenError } from '@svc/core';
import pg, { type PoolClient } from 'pg';
import { OWN_BACKENDS, svcApplicationName } from './connections.js';
import { HostSelector, multiHostClient, splitConnectionString } from './hosts.js';
import { loadMigrations, migrate, NewerSchemaError } from './migrations.js';
import { PostgresStore } from './postgres-store.js';

/** Where and how to reach the control database. */
export interface PostgresStoreOptions {
  /**
   * `postgres://user@host:port/database`; the discrete fields below fill in what it leaves out.
   * As in libpq, it may list several hosts (`postgres://u@h1:5432,h2:5433/db`), tried in order,
   * and ask with `?target_session_attrs=read-write` (or `primary`) for one that takes writes.
   */
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
  /**
   * How long an operation may wait on the database before it fails with `503
   * store_unavailable`, in milliseconds (see {@link DEFAULT_TIMEOUTS}).
   */
  readonly timeouts?: Partial<PostgresTimeouts>;
  /**
   * Accept a server that lets anyone connect as the store's role without a credential
   * (`trust` in pg_hba.conf): every process on a host that can reach it, a confined provider
   * included, can then read and write the control state. Refused at open unless this is true;
   * when it is, `warn` is called on every open. For development and tests only.
   */
  readonly allowUnauthenticated?: boolean;
  /** Where the loud warning of an accepted unauthenticated role goes (`event`, one-line `message`). */
  readonly warn?: (event: string, message: string) => void;
}

/** The bounds that make a slow, frozen or unreachable database fail fast instead of hanging requests. */
export interface PostgresTimeouts {
  /** Waiting for a new connection (TCP and startup). */
  readonly connectMs: number;
  /** `statement_timeout`: the server cancels a statement that runs longer. */
  readonly statementMs: number;
  /** `lock_timeout`: the server gives up waiting for a row or table lock. */
  readonly lockMs: number;
  /**
   * The client's own bound on an answer (`query_timeout`): it also holds when the server is
   * frozen or the network silently drops packets, where the server-side timeouts never fire.
   */
  readonly queryMs: number;
}

/**
 * The default bounds: 5 s to connect, 5 s per statement, 3 s for a lock, 6 s for any answer.
 * Our statements are single-row lookups and short transactions; anything near these bounds
 * is an outage, and a prompt 503 with `Retry-After` beats a request that hangs.
 */
export const DEFAULT_TIMEOUTS: PostgresTimeouts = Object.freeze({ connectMs: 5_000, statementMs: 5_000, lockMs: 3_000, queryMs: 6_000 });

/** The schema used when the options name none. */
export const DEFAULT_SCHEMA = 'svc_auth';

// A plain lowercase identifier: needs no quoting in SQL, nor escaping in the startup options.
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

// Our transactions are a few statements with no user think time; one idle this long is dead.
const IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000;

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
      const targets = splitConnectionString(options.connectionString, options.port);
      const url = new URL(targets.urls[0] as string);
      if (targets.hosts.length > 1) {
        host = targets.hosts.map((h) => (h.host.includes(':') ? `[${h.host}]:${h.port}` : `${h.host}:${h.port}`)).join(',');
        port = '';
      } else {
        host = url.hostname || host;
        port = url.port || port;
      }
      database = decodeURIComponent(url.pathname.replace(/^\//, '')) || database;
      user = decodeURIComponent(url.username) || user;
    } catch {
      return `the configured PostgreSQL connection string (schema ${schema})`;
    }
  }
  return `${user}@${host}${port === '' ? '' : `:${port}`}/${database} (schema ${schema})`;
}

/** Every spelling of the password that could appear in a message. */
function secretsOf(options: PostgresStoreOptions): string[] {
  const secrets: string[] = [];
  if (options.password !== undefined && options.password !== '') secrets.push(options.password, encodeURIComponent(options.password));
  if (options.connectionString !== undefined) {
    try {
      const url = new URL(splitConnectionString(options.connectionString).urls[0] as string);
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
  return new StoreOpenError(target, redact(`cannot open the PostgreSQL store at ${target}: ${detail}; ${hint}`, secrets), {
    ...(code === undefined ? {} : { driverCode: code }),
  });
}

/**
 * The connection string with the separately given password in it. The driver lets every field
 * of a connection string, an absent password included, replace the discrete options, so
 * `:store/url` with `:store/password` would otherwise connect with no password at all.
 */
function withPassword(connectionString: string, password: string | undefined): string {
  if (password === undefined || password === '') return connectionString;
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    return connectionString; // The driver reports it; the message never shows it (see secretsOf).
  }
  if (url.password !== '') return connectionString;
  url.password = encodeURIComponent(password);
  return url.href;
}

/**
 * Creates the pool: its own BIGINT parser, and `search_path` fixed to the schema as a startup
 * parameter, so every connection (including ones the pool opens later) is in the schema
 * before its first query, with no race against a `connect` handler.
 */
function poolConfig(options: PostgresStoreOptions, schema: string, t: PostgresTimeouts): pg.PoolConfig {
  const config: pg.PoolConfig = {
    max: options.max ?? 10,
    // Every wait is bounded, so an outage becomes a prompt 503, never a request that hangs.
    connectionTimeoutMillis: t.connectMs,
    query_timeout: t.queryMs,
    keepAlive: true,
    // Names the schema, so a move between stores can tell that nodes still use it (see
    // `exportPostgresState`); PostgreSQL keeps the first 63 bytes.
    application_name: svcApplicationName(schema),
    // idle_in_transaction_session_timeout: a node that stalls or is cut off mid-transaction
    // must not hold the audit_head lock (and so every node's writes) until TCP gives up.
    options: `-c search_path=${schema} -c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS} -c statement_timeout=${t.statementMs} -c lock_timeout=${t.lockMs}`,
    types: pgTypes(),
  };
  if (options.host !== undefined) config.host = options.host;
  if (options.port !== undefined) config.port = options.port;
  if (options.connectionString !== undefined) {
    const targets = splitConnectionString(options.connectionString, options.port);
    if (targets.hosts.length > 1 || targets.attrs !== 'any') {
      // Several hosts, or a session kind to insist on: connections choose their host the libpq way.
      const urls = targets.urls.map((url) => withPassword(url, options.password));
      config.connectionString = urls[0] as string;
      config.Client = multiHostClient(new HostSelector({ ...targets, urls }));
    } else {
      config.connectionString = withPassword(options.connectionString, options.password);
    }
  }
  if (options.database !== undefined) config.database = options.database;
  if (options.user !== undefined) config.user = options.user;
  if (options.password !== undefined) config.password = options.password;
  if (options.ssl !== undefined) config.ssl = options.ssl;
  return config;
}

/**
 * The attempt budget's own small pool (a quarter of the node's, at least 1): the same
 * connection settings, with `synchronous_commit=off` and (from PostgreSQL 12)
 * `plan_cache_mode=force_generic_plan`.
 *
 * No synchronous commit: a budget row is locked until its write
 * commits, and with a synchronous commit that includes the WAL flush: one busy address (many
 * sign-ins through one NAT, or an attack) then queues every attempt behind a disk flush, twice
 * per attempt (reserve, settle). Without the wait, the row is free as soon as the write is
 * done. What it costs: if the database server or its host crashes, or it fails over, budget
 * writes of its last moments (on a local crash up to three `wal_writer_delay`, 600 ms by
 * default; nor does the commit wait for a synchronous standby) may be lost, so an attacker
 * could get those few failed attempts again. Never sessions, tokens, the audit trail or a
 * revocation: every other write uses the main pool and commits synchronously.
 *
 * Generic plans, because the budget's statements take their keys as an array (`key = ANY($1)`):
 * PostgreSQL's generic plan of that assumes ten keys, costlier than a custom plan of the one or
 * two a sign-in reserves, so once `attempt_budget` holds some thousands of keys (many clients,
 * or an attack from many addresses) it would plan each statement anew at every reservation and
 * settlement, about 0.15 ms of the database's time each (docs/performance.md, 2026-11-28
 * at 16:00). This pool runs only those statements and the sweep of old windows, whose plans do
 * not depend on the values: each connection plans each once. `plan_cache_mode` exists from
 * PostgreSQL 12 (`serverVersion`, as `server_version_num`, 120000); on 11 the plans stay
 * PostgreSQL's choice.
 */
export function budgetPoolConfig(config: pg.PoolConfig, serverVersion: number): pg.PoolConfig {
  const settings = ['-c synchronous_commit=off', ...(serverVersion >= 120_000 ? ['-c plan_cache_mode=force_generic_plan'] : [])];
  return {
    ...config,
    max: Math.max(1, Math.ceil((config.max ?? 10) / 4)),
    options: [config.options, ...settings].filter((o) => o !== undefined && o !== '').join(' '),
  };
}

function createPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('connect', (client: pg.PoolClient) => {
    const pid = (client as unknown as { processID?: number | null }).processID;
    if (typeof pid === 'number') OWN_BACKENDS.add(pid);
  });
  pool.on('remove', (client: pg.PoolClient) => {
    const pid = (client as unknown as { processID?: number | null }).processID;
    if (typeof pid === 'number') OWN_BACKENDS.delete(pid);
  });
  // An idle connection the server drops (restart, failover) must not crash the process; the
  // pool discards it, and the next operation connects afresh or fails with its own error.
  pool.on('error', () => undefined);
  // And every client keeps a listener of its own for its whole life: the pool adds and removes
  // its listener as a client goes in and out, and a server restart (57P01) or a dropped
  // connection that lands in a gap the pool or a caller leaves open would be an unhandled
  // 'error' event, which kills the process (seen once under heavy load in the restart test
  // after #tx got its own listener). The error itself still reaches the operation that used
  // the connection, or the pool, which discards the client.
  pool.on('connect', (client: pg.PoolClient) => {
    client.on('error', () => undefined);
  });
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

/** The `event` of the warning an accepted unauthenticated role gives on every open. */
export const UNAUTHENTICATED_STORE_EVENT = 'store.unauthenticated_role';

/**
 * Whether the server lets the store's role in without its credential: one connection with the
 * same host, port, user, database and TLS setting and a random password nobody holds. A server
 * that authenticates the role (scram-sha-256, md5, password, ldap, ...) refuses it (28P01,
 * 28000); one that `trust`s the connection lets it in, and so would let in any process on a
 * host that can reach it. Any other failure (the server went away meanwhile) is no evidence
 * either way: the open goes on and fails or succeeds on its own connections.
 */
async function letsAnyoneIn(config: pg.PoolConfig): Promise<boolean> {
  // A password of our own, never the configured one nor PGPASSWORD or ~/.pgpass (which the
  // driver would fall back to without one). A password in the connection string would win
  // over the field, so it is replaced there too.
  const password = randomBytes(32).toString('base64url');
  let connectionString = config.connectionString;
  if (connectionString !== undefined) {
    try {
      const url = new URL(connectionString);
      if (url.password !== '') {
        url.password = password;
        connectionString = url.href;
      }
    } catch {
      return false; // The open itself reports an unparsable string.
    }
  }
  const Client = (config.Client ?? pg.Client) as typeof pg.Client;
  const probe = new Client({
    ...config,
    ...(connectionString === undefined ? {} : { connectionString }),
    password,
    application_name: 'svc-auth-auth-probe',
    query_timeout: undefined,
  } as pg.ClientConfig);
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return true;
  } catch {
    return false;
  } finally {
    await probe.end().catch(() => undefined);
  }
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
  const timeouts: PostgresTimeouts = { ...DEFAULT_TIMEOUTS, ...(options.timeouts ?? {}) };
  for (const [key, value] of Object.entries(timeouts)) {
    if (!Number.isSafeInteger(value) || value < 1)
      throw new TypeError(`timeouts.${key} must be a whole number of milliseconds, at least 1`);
  }
  const target = describeTarget(options, schema);
  const migrations = loadMigrations();
  const config = poolConfig(options, schema, timeouts);
  const pool = createPool(config);
  // Made once the server's version is known (see budgetPoolConfig).
  let budgetPool: pg.Pool | null = null;
  try {
    // Migrations may take longer than a request may wait (a large table, another node holding
    // the migration lock): they run on a connection of their own without the request bounds.
    const Client = (config.Client ?? pg.Client) as typeof pg.Client;
    const client = new Client({
      ...config,
      query_timeout: undefined,
      options: `-c search_path=${schema} -c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS}`,
    } as pg.ClientConfig);
    client.on('error', () => undefined);
    await client.connect();
    let serverVersion = 0;
    try {
      serverVersion = Number((await client.query<{ server_version_num: string }>('SHOW server_version_num')).rows[0]?.server_version_num);
      if (await letsAnyoneIn(config)) {
        if (options.allowUnauthenticated !== true) {
          throw new StoreOpenError(
            target,
            `refusing the PostgreSQL store at ${target}: the server lets anyone connect as its role without a password (trust authentication), so any process on a host that reaches it could read and rewrite the control state; require a password for the role (scram-sha-256 in pg_hba.conf, see docs/deployment.md), or accept it for development with :store/allow-unauthenticated true`,
            { refusal: 'unauthenticated' },
          );
        }
        options.warn?.(
          UNAUTHENTICATED_STORE_EVENT,
          `WARNING: the PostgreSQL store at ${target} lets anyone connect as its role without a password (trust authentication), accepted by :store/allow-unauthenticated: any process on a host that reaches the server can read and rewrite the control state; never use this in production`,
        );
      }
      // A connection string with its own `options` replaces ours; tables must never land in
      // whatever schema that names (or in public).
      const path = await client.query<{ p: string }>("SELECT current_setting('search_path') AS p");
      if (path.rows[0]?.p !== schema) {
        throw new StoreOpenError(
          target,
          `the connection to ${target} has search_path ${JSON.stringify(path.rows[0]?.p)}, not ${schema}; remove "options" from the connection string`,
        );
      }
      await refuseForeignOwner(client as unknown as pg.PoolClient, schema, target);
      await migrate(client as unknown as PoolClient, schema, migrations, Date.now());
    } finally {
      await client.end().catch(() => undefined);
    }
    budgetPool = createPool(budgetPoolConfig(config, serverVersion));
    const store = new PostgresStore(pool, schema, budgetPool);
    await store.ping();
    // The budget pool's own settings are accepted too, or the store does not open.
    await budgetPool.query('SELECT 1');
    return store;
  } catch (err) {
    await pool.end().catch(() => undefined);
    await budgetPool?.end().catch(() => undefined);
    throw err instanceof StoreOpenError ? err : openError(err, options, target);
  }
}

// How the PostgreSQL store talks to its server: query helpers over the pool or a transaction's
// client, named (prepared) statements, and the one transaction wrapper every write runs in.
import type { Pool, PoolClient, QueryConfig, QueryResult, QueryResultRow } from 'pg';
import { postgresFault } from './faults.js';

/** Something that runs queries: the pool (autocommit) or a client inside a transaction. */
export type Queryable = Pick<PoolClient, 'query'>;

/** Thrown inside {@link transaction} to roll back and still answer `value`. */
class Rollback {
  readonly value: unknown;
  constructor(value: unknown) {
    this.value = value;
  }
}

/**
 * Rolls the current transaction back and makes it answer `value`: for outcomes that must write nothing.
 *
 * @example
 * await transaction(pool, async (c) => (await changes(c, sql, values)) === 0 ? rollback('not_found') : 'done');
 */
export function rollback(value: unknown): never {
  throw new Rollback(value);
}

/**
 * A statement of the hot paths (sign-in, rotation, the attempt budget, the audit trail's writes
 * and sealing), prepared once per connection under its name: each later execution skips the
 * server's parse and analysis and, once PostgreSQL settles on a generic plan, its planning: about
 * a third of PostgreSQL's CPU under two-node load (perf), when every statement came as new text.
 */
export type Named = Readonly<Omit<QueryConfig, 'values'> & { name: string }>;

/** SQL text (parsed and planned on every execution) or a {@link Named} statement. */
export type Sql = string | Named;

/**
 * Runs `sql` (text or a {@link Named} statement) with `values` on `db`.
 *
 * @example
 * const result = await run(pool, 'SELECT 1', []);
 */
export function run<R extends QueryResultRow>(db: Queryable, sql: Sql, values: readonly unknown[]) {
  // A new literal, not `{ ...sql, values }`: V8 adds a property after a leading spread the slow
  // way (about 1 µs), on every statement of the hot paths.
  return typeof sql === 'string'
    ? db.query<R>(sql, values as unknown[])
    : db.query<R>({ name: sql.name, text: sql.text, values: values as unknown[] });
}

/**
 * The rows `sql` answers.
 *
 * @example
 * const devices = await rows<DeviceRow>(pool, `SELECT ${DEVICE_COLUMNS} FROM devices`);
 */
export async function rows<R extends QueryResultRow>(db: Queryable, sql: Sql, values: readonly unknown[] = []): Promise<R[]> {
  return (await run<R>(db, sql, values)).rows;
}

/**
 * The first row `sql` answers, or undefined.
 *
 * @example
 * const head = await first<{ seq: number }>(pool, 'SELECT seq FROM audit_head');
 */
export async function first<R extends QueryResultRow>(db: Queryable, sql: Sql, values: readonly unknown[] = []): Promise<R | undefined> {
  return (await run<R>(db, sql, values)).rows[0];
}

/**
 * How many rows `sql` changed.
 *
 * @example
 * const n = await changes(c, 'UPDATE links SET removed_at = $1 WHERE id = $2 AND removed_at IS NULL', [now, id]);
 */
export async function changes(db: Queryable, sql: Sql, values: readonly unknown[]): Promise<number> {
  return (await run(db, sql, values)).rowCount ?? 0;
}

/**
 * The error for a COMMIT whose wait for the synchronous standby was cancelled (by an operator's
 * `pg_cancel_backend`, or a tool's): PostgreSQL then commits locally, answers success and only
 * warns. Such a write is not on the standby, and a failover would lose it, so it is never
 * acknowledged. Like the driver's errors it carries a SQLSTATE, 57014 (query_canceled), so the
 * store reports a `timeout` fault (503), as for a COMMIT whose answer was lost.
 */
export function unreplicatedCommitError(): Error & { readonly code: string } {
  return Object.assign(new Error('the commit was not confirmed by the synchronous standby (the wait for it was cancelled)'), {
    name: 'UnreplicatedCommitError',
    code: '57014',
  });
}

/**
 * Whether a notice is PostgreSQL's warning that a commit stopped waiting for its synchronous
 * standby: any warning of the routine that waits (`SyncRepWaitForLSN`, syncrep.c) means the wait
 * ended unconfirmed. Told by the routine field, which the server never translates: the text is
 * translated wherever `lc_messages` names another language (`storniere Warten auf synchrone
 * Replikation ...`), and the SQLSTATE says nothing of its own (01000 for a cancel, 57P01 for a
 * shutdown). The English text is also taken, for a server that would leave the routine out.
 */
function syncWaitCancelled(notice: { readonly message?: string | undefined; readonly routine?: string | undefined }): boolean {
  return notice.routine === 'SyncRepWaitForLSN' || /^canceling (the )?wait for synchronous replication/.test(notice.message ?? '');
}

/**
 * Runs `op` on `client` (a COMMIT, or a statement committed on its own), refused as
 * {@link unreplicatedCommitError} when the server warned meanwhile that the commit stopped waiting
 * for its synchronous standby: PostgreSQL sends that warning before the answer, whose promise
 * settles only after it.
 */
async function confirmedByStandby<T>(client: PoolClient, op: () => Promise<T>): Promise<T> {
  let unreplicated = false;
  const onNotice = (notice: { message?: string | undefined; routine?: string | undefined }) => {
    if (syncWaitCancelled(notice)) unreplicated = true;
  };
  client.on('notice', onNotice);
  let result: T;
  try {
    result = await op();
  } finally {
    client.removeListener('notice', onNotice);
  }
  if (unreplicated) throw unreplicatedCommitError();
  return result;
}

/**
 * COMMIT on `client`, refused as {@link unreplicatedCommitError} when the server gave up waiting
 * for its synchronous standby.
 *
 * @example
 * await commitReplicated(client);
 */
export async function commitReplicated(client: PoolClient): Promise<void> {
  await confirmedByStandby(client, () => client.query('COMMIT'));
}

/** A checked-out connection's fate: the error that ended it (`lost`), or why it must not go back to the pool (`broken`). */
interface Checkout {
  lost?: Error;
  broken?: Error;
}

/**
 * Runs `fn` on a connection checked out of `pool`, and then releases it, destroyed when `fn` set
 * `state.broken` or the connection was lost meanwhile (`state.lost`).
 */
async function checkedOut<T>(pool: Pool, fn: (client: PoolClient, state: Checkout) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  const state: Checkout = {};
  // The pool takes its own 'error' listener off a client while it is checked out: without one
  // here, a server restart (57P01) or a dropped connection while it is out is an unhandled
  // 'error' event, and that kills the process.
  const onError = (err: Error) => {
    state.lost ??= err;
  };
  client.on('error', onError);
  try {
    return await fn(client, state);
  } finally {
    client.removeListener('error', onError);
    client.release(state.broken ?? state.lost);
  }
}

/** Marks the connection of a failed operation broken when it was lost or is stuck (a store fault): a ROLLBACK would only wait out another timeout. */
function failedOn(state: Checkout, err: unknown): boolean {
  if (state.lost === undefined && postgresFault(err) === null) return false;
  state.broken = state.lost ?? (err as Error);
  return true;
}

/**
 * Runs one statement as a transaction of its own (autocommit) on a pooled connection of `pool`,
 * refused as {@link unreplicatedCommitError} when the server gave up waiting for its synchronous
 * standby, as {@link commitReplicated} refuses a COMMIT.
 *
 * @example
 * const result = await runReplicated(pool, { name: 'svc_x', text: 'UPDATE ...' }, values);
 */
export function runReplicated<R extends QueryResultRow>(pool: Pool, sql: Sql, values: readonly unknown[]): Promise<QueryResult<R>> {
  return checkedOut(pool, async (client, state) => {
    try {
      return await confirmedByStandby(client, () => run<R>(client, sql, values));
    } catch (err) {
      failedOn(state, err);
      throw err;
    }
  });
}

/**
 * The rows answered by one write committed on its own (see {@link runReplicated}).
 *
 * @example
 * const used = await writtenRows<{ proof_key: string }>(pool, USE_PROOF, [key, expiresAt, now]);
 */
export async function writtenRows<R extends QueryResultRow>(pool: Pool, sql: Sql, values: readonly unknown[]): Promise<R[]> {
  return (await runReplicated<R>(pool, sql, values)).rows;
}

/**
 * Runs `fn` in one READ COMMITTED transaction on one pooled connection of `pool`. A {@link Rollback}
 * thrown by `fn` rolls back and answers its value; any other error rolls back and is
 * rethrown (a connection failure included: callers turn it into a 5xx, nothing is swallowed).
 * `opening`, statements without parameters, goes with the BEGIN in one round trip, and `fn` gets
 * their results.
 *
 * @example
 * const n = await transaction(pool, (c) => changes(c, 'DELETE FROM flows WHERE expires_at <= $1', [now]));
 */
export function transaction<T>(
  pool: Pool,
  fn: (c: PoolClient, opened: readonly QueryResult[]) => Promise<T>,
  opening?: string,
): Promise<T> {
  return checkedOut(pool, async (client, state) => {
    try {
      // `opening`'s statements go with the BEGIN, in one round trip (the simple query protocol):
      // each runs after the one before it ends, with a snapshot of its own.
      const opened = opening === undefined ? [] : ((await client.query(`BEGIN; ${opening}`)) as unknown as QueryResult[]).slice(1);
      if (opening === undefined) await client.query('BEGIN');
      const result = await fn(client, opened);
      await commitReplicated(client);
      return result;
    } catch (err) {
      // A lost or stuck connection is destroyed unrolled: the server rolls the transaction back
      // when the connection closes.
      if (!failedOn(state, err)) {
        try {
          await client.query('ROLLBACK');
        } catch (rollbackError) {
          // The connection is unusable: destroy it instead of returning it to the pool.
          state.broken = rollbackError as Error;
        }
      }
      if (err instanceof Rollback) return err.value as T;
      throw err;
    }
  });
}

/**
 * Whether the calls of a failed batch statement (see `TurnBatch`) go again one by one: when
 * nothing of it was written and the failure may be one call's own. PostgreSQL refused a row for
 * its data or a constraint (SQLSTATE classes 22 and 23), or the statement's locks: a deadlock or
 * a serialization failure (class 40), or one call's row held past `lock_timeout` (55P03); a batch
 * waits for the locks of all its calls, and one busy row must not fail the others. Any other
 * error (an outage, a timeout, a connection lost, perhaps after the commit) is every call's own,
 * as it was with a statement each: no second round into a failing server.
 */
export function callsGoAlone(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return code.startsWith('22') || code.startsWith('23') || code.startsWith('40') || code === '55P03';
}

import { digestsEqual } from '@svc/core';
import { ACCESS_FROM, ACCESS_USER_COLUMNS } from '@svc/core/sql-rows';
import { type AccessRow, type SessionRecord, toSession } from '@svc/core/store';
import type { Pool, QueryConfig } from 'pg';
import type { Named } from './sql.js';
import { paddedKeys, statementsByArity, TurnBatch, type Waiting } from './turn-batch.js';

// The hot path of every authenticated request: a named statement, so each connection parses
// and plans it once. One primary-key lookup (and one of its user's row, whose attributes the
// principal carries: no second query); the digest is then compared in constant time.
const SESSION_FOR_ACCESS: Named = {
  name: 'svc_session_for_access',
  text: `SELECT ${ACCESS_USER_COLUMNS} FROM ${ACCESS_FROM} WHERE s.id = $1`,
};

/** The most sessions one query looks up; a busier turn sends several. */
const BEARER_BATCH_MAX = 256;

/**
 * The same lookup for the sessions of one event-loop turn at once (see `BearerBatch.find`), one
 * statement per arity: `s.id IN ($1, ..., $n)` for n = 2, 4, 8, ... up to
 * {@link BEARER_BATCH_MAX} (see `statementsByArity`: not `= ANY($1::text[])`, which PostgreSQL
 * planned anew on every execution, 9 µs of its CPU per bearer check with 100,000 sessions
 * against 2.6 µs on generic plans).
 */
const SESSIONS_FOR_ACCESS = statementsByArity(
  'svc_sessions_for_access',
  BEARER_BATCH_MAX,
  1,
  (list) => `SELECT ${ACCESS_USER_COLUMNS} FROM ${ACCESS_FROM} WHERE s.id IN (${list})`,
);

/** The statement and values that look up `ids` (distinct, at least one) in one query. */
function lookupOf(ids: readonly string[]): QueryConfig {
  if (ids.length === 1) return { name: SESSION_FOR_ACCESS.name, text: SESSION_FOR_ACCESS.text, values: [ids[0]] };
  const { statement, values } = paddedKeys(SESSIONS_FOR_ACCESS, ids);
  return { name: statement.name, text: statement.text, values: [...values] };
}

/** A bearer check: the session its token names and the token's digest. */
interface BearerLookup {
  readonly sessionId: string;
  readonly digest: string;
}

/**
 * The bearer checks of the PostgreSQL store, batched per event-loop turn (see
 * {@link BearerBatch.find}).
 *
 * @example
 * const bearer = new BearerBatch(pool);
 * const session = await bearer.find(sessionId, accessDigest);
 */
export class BearerBatch {
  readonly #pool: Pool;
  readonly #checks: TurnBatch<BearerLookup, SessionRecord | null>;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.#checks = new TurnBatch(BEARER_BATCH_MAX, (batch) => this.#answer(batch));
  }

  /**
   * The bearer check, against the database's truth on every request. The checks that arrive in
   * one turn of the event loop wait for its check phase (`setImmediate`) and go to the
   * database as one query (`id IN (...)`, see {@link SESSIONS_FOR_ACCESS}): one round trip and
   * one pool connection for all of them instead of one each. The query is sent after every check of the batch was asked for,
   * so after its request was read: a revocation committed before that is seen, as before.
   */
  find(sessionId: string, digest: string): Promise<SessionRecord | null> {
    return this.#checks.add({ sessionId, digest });
  }

  /** Looks up the sessions of `batch` (at most BEARER_BATCH_MAX) in one query and answers every check. */
  async #answer(batch: readonly Waiting<BearerLookup, SessionRecord | null>[]): Promise<void> {
    // Each check's rejection, should the query fail, is classified (an outage becomes
    // store_unavailable) by the wrapper every operation has.
    const rows = (await this.#pool.query<AccessRow>(lookupOf([...new Set(batch.map((w) => w.input.sessionId))]))).rows;
    const byId = new Map(rows.map((row) => [row.id, row]));
    for (const w of batch) {
      // A row that cannot be read fails its own checks, never the others of the batch (nor the process).
      try {
        const row = byId.get(w.input.sessionId);
        w.resolve(row === undefined || !digestsEqual(row.access_digest, w.input.digest) ? null : toSession(row));
      } catch (error) {
        w.reject(error);
      }
    }
  }
}

import { digestsEqual } from '@svc/core';
import { ACCESS_FROM, ACCESS_USER_COLUMNS } from '@svc/core/sql-rows';
import { type AccessRow, type SessionRecord, toSession } from '@svc/core/store';
import type { Pool, QueryConfig } from 'pg';

// The hot path of every authenticated request: a named statement, so each connection parses
// and plans it once. One primary-key lookup (and one of its user's row, whose attributes the
// principal carries: no second query); the digest is then compared in constant time.
const SESSION_FOR_ACCESS: Omit<QueryConfig, 'values'> = {
  name: 'svc_session_for_access',
  text: `SELECT ${ACCESS_USER_COLUMNS} FROM ${ACCESS_FROM} WHERE s.id = $1`,
};

/** The most sessions one query looks up; a busier turn sends several. */
const BEARER_BATCH_MAX = 256;

/**
 * The same lookup for the sessions of one event-loop turn at once (see `BearerBatch.find`), one
 * statement per arity: `s.id IN ($1, ..., $n)` for n = 2, 4, 8, ... up to
 * {@link BEARER_BATCH_MAX}, a batch of k sessions using the smallest n of at least k, its list
 * padded with repeats of its first id (the index scan reads each id once).
 *
 * Not `s.id = ANY($1::text[])`: PostgreSQL's generic plan of that assumes ten elements, costlier
 * than a custom plan of the one or two a batch usually holds, so on a table of some thousands
 * of sessions it never settled on the generic plan and planned the statement anew on every
 * execution: 9 µs of PostgreSQL's CPU per bearer check with 100,000 sessions, against 2.6 µs on
 * generic plans (docs/performance.md, 2026-11-28 at 16:00). With n parameters the generic plan
 * costs what a custom plan does, so after PostgreSQL's five custom plans each connection keeps
 * the generic one, as a named statement intends.
 */
const SESSIONS_FOR_ACCESS: ReadonlyMap<number, Omit<QueryConfig, 'values'>> = new Map(
  Array.from({ length: Math.log2(BEARER_BATCH_MAX) }, (_, i) => {
    const arity = 2 ** (i + 1);
    const list = Array.from({ length: arity }, (_, j) => `$${j + 1}`).join(', ');
    return [
      arity,
      { name: `svc_sessions_for_access_${arity}`, text: `SELECT ${ACCESS_USER_COLUMNS} FROM ${ACCESS_FROM} WHERE s.id IN (${list})` },
    ];
  }),
);

/** The statement and values that look up `ids` (distinct, at least one) in one query. */
function lookupOf(ids: readonly string[]): QueryConfig {
  const first = ids[0] as string;
  if (ids.length === 1) return { ...SESSION_FOR_ACCESS, values: [first] };
  const arity = 2 ** Math.ceil(Math.log2(ids.length));
  const statement = SESSIONS_FOR_ACCESS.get(arity);
  if (statement === undefined) throw new RangeError(`a bearer batch looks up at most ${BEARER_BATCH_MAX} sessions, not ${ids.length}`);
  return { ...statement, values: [...ids, ...Array<string>(arity - ids.length).fill(first)] };
}

/** A bearer check waiting for its turn's query. */
interface BearerLookup {
  readonly sessionId: string;
  readonly digest: string;
  readonly resolve: (session: SessionRecord | null) => void;
  readonly reject: (error: unknown) => void;
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
  #batch: BearerLookup[] = [];

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  /**
   * The bearer check, against the database's truth on every request. The checks that arrive in
   * one turn of the event loop wait for its check phase (`setImmediate`) and go to the
   * database as one query (`id IN (...)`, see {@link SESSIONS_FOR_ACCESS}): one round trip and
   * one pool connection for all of them instead of one each. The query is sent after every check of the batch was asked for,
   * so after its request was read: a revocation committed before that is seen, as before.
   */
  find(sessionId: string, digest: string): Promise<SessionRecord | null> {
    return new Promise((resolve, reject) => {
      if (this.#batch.length === 0) setImmediate(this.#send);
      this.#batch.push({ sessionId, digest, resolve, reject });
    });
  }

  readonly #send = (): void => {
    const all = this.#batch;
    this.#batch = [];
    // Each query looks up at most BEARER_BATCH_MAX distinct sessions, with every check that names them.
    const bySession = new Map<string, BearerLookup[]>();
    for (const lookup of all) {
      const same = bySession.get(lookup.sessionId);
      if (same === undefined) bySession.set(lookup.sessionId, [lookup]);
      else same.push(lookup);
    }
    const ids = [...bySession.keys()];
    for (let i = 0; i < ids.length; i += BEARER_BATCH_MAX) {
      const some = ids.slice(i, i + BEARER_BATCH_MAX);
      void this.#answer(
        some,
        some.flatMap((id) => bySession.get(id) ?? []),
      );
    }
  };

  /** Looks up `ids` (distinct) in one query and answers every check of `batch`, which name them. */
  async #answer(ids: readonly string[], batch: readonly BearerLookup[]): Promise<void> {
    let rows: readonly AccessRow[];
    try {
      rows = (await this.#pool.query<AccessRow>(lookupOf(ids))).rows;
    } catch (error) {
      // Each check's rejection is classified (an outage becomes store_unavailable) by the wrapper every operation has.
      for (const lookup of batch) lookup.reject(error);
      return;
    }
    const byId = new Map(rows.map((row) => [row.id, row]));
    for (const lookup of batch) {
      // A row that cannot be read fails its own checks, never the others of the batch (nor the process).
      try {
        const row = byId.get(lookup.sessionId);
        lookup.resolve(row === undefined || !digestsEqual(row.access_digest, lookup.digest) ? null : toSession(row));
      } catch (error) {
        lookup.reject(error);
      }
    }
  }
}

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

// The same lookup for the bearer checks of one event-loop turn at once (see `BearerBatch.find`).
const SESSIONS_FOR_ACCESS: Omit<QueryConfig, 'values'> = {
  name: 'svc_sessions_for_access',
  text: `SELECT ${ACCESS_USER_COLUMNS} FROM ${ACCESS_FROM} WHERE s.id = ANY($1::text[])`,
};

/** The most bearer checks one query answers; a busier turn sends several. */
const BEARER_BATCH_MAX = 256;

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
   * database as one query (`id = ANY(...)`): one round trip and one pool connection for all of
   * them instead of one each. The query is sent after every check of the batch was asked for,
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
    for (let i = 0; i < all.length; i += BEARER_BATCH_MAX) void this.#answer(all.slice(i, i + BEARER_BATCH_MAX));
  };

  async #answer(batch: readonly BearerLookup[]): Promise<void> {
    let rows: readonly AccessRow[];
    try {
      rows =
        batch.length === 1
          ? (
              await this.#pool.query<AccessRow>({
                name: SESSION_FOR_ACCESS.name,
                text: SESSION_FOR_ACCESS.text,
                values: [batch[0]?.sessionId],
              })
            ).rows
          : (
              await this.#pool.query<AccessRow>({
                name: SESSIONS_FOR_ACCESS.name,
                text: SESSIONS_FOR_ACCESS.text,
                values: [[...new Set(batch.map((l) => l.sessionId))]],
              })
            ).rows;
    } catch (error) {
      // Each check's rejection is classified (an outage becomes store_unavailable) by the wrapper every operation has.
      for (const lookup of batch) lookup.reject(error);
      return;
    }
    const byId = new Map(rows.map((row) => [row.id, row]));
    for (const lookup of batch) {
      const row = byId.get(lookup.sessionId);
      lookup.resolve(row === undefined || !digestsEqual(row.access_digest, lookup.digest) ? null : toSession(row));
    }
  }
}

// The PostgreSQL store's reads of one session by id: the reads of one event-loop turn share one
// statement (see `SessionReads`).
import { SESSION_COLUMNS } from '@svc/core/sql-rows';
import { type SessionRecord, type SessionRow, toSession } from '@svc/core/store';
import type { Pool } from 'pg';
import { type Named, rows } from './sql.js';
import { paddedKeys, statementsByArity, TurnBatch, type Waiting } from './turn-batch.js';

/** The most sessions one statement reads; a busier turn sends several. */
const READ_BATCH_MAX = 256;

const GET_SESSION: Named = { name: 'svc_get_session', text: `SELECT ${SESSION_COLUMNS} FROM sessions WHERE id = $1` };

/** The same for 2 to {@link READ_BATCH_MAX} ids (see `statementsByArity`). */
const GET_SESSIONS = statementsByArity(
  'svc_get_sessions',
  READ_BATCH_MAX,
  1,
  (list) => `SELECT ${SESSION_COLUMNS} FROM sessions WHERE id IN (${list})`,
);

/**
 * `getSession` of the PostgreSQL store. Every refresh reads its session first (whether it is
 * bound to a device key, for the DPoP proof), one statement that was a round trip of its own per
 * refresh, and unnamed, so planned anew each time (docs/performance.md, 2026-11-29). Now the
 * reads of one event-loop turn share one named statement (see `TurnBatch`); each gets its own
 * row, or null. The statement is sent after every read of the batch was asked for: a change
 * committed before a read was asked for is seen, as before.
 *
 * @example
 * const session = await new SessionReads(pool).get(id);
 */
export class SessionReads {
  readonly #pool: Pool;
  readonly #reads: TurnBatch<string, SessionRecord | null>;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.#reads = new TurnBatch(READ_BATCH_MAX, (batch) => this.#read(batch));
  }

  get(id: string): Promise<SessionRecord | null> {
    return this.#reads.add(id);
  }

  async #read(batch: readonly Waiting<string, SessionRecord | null>[]): Promise<void> {
    const ids = [...new Set(batch.map((w) => w.input))];
    let found: SessionRow[];
    if (ids.length === 1) found = await rows<SessionRow>(this.#pool, GET_SESSION, ids);
    else {
      const { statement, values } = paddedKeys(GET_SESSIONS, ids);
      found = await rows<SessionRow>(this.#pool, statement, values);
    }
    const byId = new Map(found.map((row) => [row.id, row]));
    for (const w of batch) {
      // A row that cannot be read fails its own call, never the others of the batch.
      try {
        const row = byId.get(w.input);
        w.resolve(row === undefined ? null : toSession(row));
      } catch (error) {
        w.reject(error);
      }
    }
  }
}

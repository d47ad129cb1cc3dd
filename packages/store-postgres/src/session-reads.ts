// The PostgreSQL store's reads of one session by id: the reads of one event-loop turn share one
// statement (see `SessionReads`).
import { REFRESH_COLUMNS } from '@svc/core/sql-rows';
import { type RefreshRow, type SessionRecord, toSession } from '@svc/core/store';
import type { Pool } from 'pg';
import { type Named, rows } from './sql.js';
import { paddedKeys, statementsByArity, TurnBatch, type Waiting } from './turn-batch.js';

/** The most sessions one statement reads; a busier turn sends several. */
const READ_BATCH_MAX = 256;

/** A session's row with its refresh columns: what `getSession` answers, and what a rotation plans on. */
const READ_SESSION: Named = { name: 'svc_read_session', text: `SELECT ${REFRESH_COLUMNS} FROM sessions WHERE id = $1` };

/** The same for 2 to {@link READ_BATCH_MAX} ids (see `statementsByArity`). */
const READ_SESSIONS = statementsByArity(
  'svc_read_sessions',
  READ_BATCH_MAX,
  1,
  (list) => `SELECT ${REFRESH_COLUMNS} FROM sessions WHERE id IN (${list})`,
);

/**
 * `getSession` of the PostgreSQL store. Every refresh read its session first (whether it is
 * bound to a device key, for the DPoP proof; since store contract 12 the rotation's own read
 * decides that), one statement that was a round trip of its own per refresh, and unnamed, so
 * planned anew each time (docs/performance.md, 2026-11-29). Now the
 * reads of one event-loop turn share one named statement (see `TurnBatch`); each gets its own
 * row, or null. The statement is sent after every read of the batch was asked for: a change
 * committed before a read was asked for is seen, as before.
 *
 * A rotation reads its session's refresh columns the same way, without a lock, and plans on
 * them (`rotateRefreshToken` in sessions.ts): both kinds of read share the turn's statement.
 *
 * @example
 * const session = await new SessionReads(pool).get(id);
 */
export class SessionReads {
  readonly #pool: Pool;
  readonly #reads: TurnBatch<string, RefreshRow | null>;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.#reads = new TurnBatch(READ_BATCH_MAX, (batch) => this.#read(batch));
  }

  async get(id: string): Promise<SessionRecord | null> {
    const row = await this.#reads.add(id);
    return row === null ? null : toSession(row);
  }

  /** The session's row as committed when the turn's statement ran, refresh columns included; unlocked. */
  row(id: string): Promise<RefreshRow | null> {
    return this.#reads.add(id);
  }

  async #read(batch: readonly Waiting<string, RefreshRow | null>[]): Promise<void> {
    const ids = [...new Set(batch.map((w) => w.input))];
    let found: RefreshRow[];
    if (ids.length === 1) found = await rows<RefreshRow>(this.#pool, READ_SESSION, ids);
    else {
      const { statement, values } = paddedKeys(READ_SESSIONS, ids);
      found = await rows<RefreshRow>(this.#pool, statement, values);
    }
    // Calls of the same id get the same row object: frozen, so none can change it for another.
    const byId = new Map(found.map((row) => [row.id, Object.freeze(row)]));
    for (const w of batch) w.resolve(byId.get(w.input) ?? null);
  }
}

import { attemptWindowSql, storedAttemptWindow } from '@svc/core/sql-rows';
import { type AttemptReservation, type AttemptWindow, decideAttemptWindow, type Store } from '@svc/core/store';
import type { Pool } from 'pg';
import { rows, run } from './sql.js';
import { TurnBatch, type Waiting } from './turn-batch.js';

/** The most settlements one statement makes; a busier turn sends several. */
const SETTLE_BATCH_MAX = 256;

/**
 * The attempt budget of the PostgreSQL store (`reserveAttempts`, `settleAttempts`), shared by
 * every node, on a pool of its own (see `budgetPoolConfig`).
 *
 * @example
 * const budget = new AttemptBudget(budgetPool);
 * const reservation = await budget.reserve({ keys: ['ip:203.0.113.7'], now, windowMs, max, leaseMs });
 */
export class AttemptBudget {
  readonly #pool: Pool;
  #reservations = 0;
  readonly #settles: TurnBatch<Parameters<Store['settleAttempts']>[0], void>;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.#settles = new TurnBatch(SETTLE_BATCH_MAX, (batch) => this.#settle(batch));
  }

  async reserve(input: Parameters<Store['reserveAttempts']>[0]): Promise<AttemptReservation> {
    const keys = [...new Set(input.keys)].sort();
    if (keys.length === 0) return { reserved: true, shared: true, windows: [] };
    for (let pass = 0; ; pass++) {
      // One statement decides and reserves (core's `attemptWindowSql`): it locks every row of
      // `keys` in key order (two reservations never wait on each other in a cycle), reads the
      // counts as the latest commit left them, and moves every window only when every key
      // reserves. Its row locks last for this statement alone, never across a round trip, so the
      // budget of one busy address is not a queue of transactions. It answers the rows as
      // locked, each with the window it moved it to (null when it moved none).
      const locked = await rows<{
        key: string;
        window_start: number;
        failures: number;
        pending: number;
        pending_since: number;
        moved_start: number | null;
        moved_failures: number | null;
        moved_pending: number | null;
        moved_pending_since: number | null;
      }>(
        this.#pool,
        {
          name: 'svc_reserve_attempt_windows',
          text: `WITH locked AS (
             SELECT key, window_start, failures, pending, pending_since FROM attempt_budget WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE
           ), decided AS (
             SELECT key, window_start, failures, pending, pending_since,
                    ${attemptWindowSql({ now: '$2::bigint', windowMs: '$3::bigint', max: '$4::int', leaseMs: '$5::bigint' })}
             FROM locked
           ), moved AS (
             UPDATE attempt_budget AS b
             SET window_start = d.new_start, failures = d.new_failures, pending = d.new_pending, pending_since = d.new_pending_since
             FROM decided AS d
             WHERE b.key = d.key AND (SELECT count(*) = cardinality($1::text[]) AND bool_and(reserve) FROM decided)
             RETURNING b.key, b.window_start, b.failures, b.pending, b.pending_since
           )
           SELECT d.key, d.window_start, d.failures, d.pending, d.pending_since,
                  m.window_start AS moved_start, m.failures AS moved_failures, m.pending AS moved_pending,
                  m.pending_since AS moved_pending_since
           FROM decided AS d LEFT JOIN moved AS m ON m.key = d.key ORDER BY d.key`,
        },
        [keys, input.now, input.windowMs, input.max, input.leaseMs],
      );
      if (locked.length < keys.length) {
        // A key seen for the first time (or pruned since): its row is created empty, and the
        // statement runs again. Another node creating it meanwhile is the same row.
        if (pass >= 2) throw new Error('attempt_budget rows were deleted while they were being reserved');
        await run(
          this.#pool,
          {
            name: 'svc_open_attempt_windows',
            text: 'INSERT INTO attempt_budget (key, window_start, failures, pending, pending_since) SELECT k, $2, 0, 0, $2 FROM unnest($1::text[]) AS k ON CONFLICT (key) DO NOTHING',
          },
          [keys, input.now],
        );
        continue;
      }
      // The rule is core's: decided again here on the rows as the statement locked them.
      const windows: AttemptWindow[] = [];
      let retryAfterMs = 0;
      let busy = false;
      for (const r of locked) {
        const d = decideAttemptWindow(r.key, storedAttemptWindow(r), input);
        if (d.kind === 'refuse') retryAfterMs = Math.max(retryAfterMs, d.retryAfterMs);
        else if (d.kind === 'busy') busy = true;
        else windows.push(d.window);
      }
      // Fail closed if the SQL form and the rule ever drift apart: no attempt runs on a
      // reservation the rule would not have made, or whose window settling would not find.
      const reserved = windows.length === keys.length;
      const agrees = locked.every((r, i) => {
        const w = windows[i];
        return reserved && w !== undefined
          ? r.moved_start === w.start &&
              r.moved_failures === w.failures &&
              r.moved_pending === w.pending &&
              r.moved_pending_since === w.pendingSince
          : r.moved_start === null;
      });
      if (!agrees) throw new Error('attempt_budget: the reservation statement and decideAttemptWindow disagree');
      // Windows that ended long ago are clutter: every 64th reservation of this node sweeps a
      // few away, never waiting on a lock. Not awaited: the reservation has committed, and a
      // sweep that fails (a busy pool, an outage) must not turn it into an error whose windows
      // the caller could never settle; the next sweep takes over.
      if (++this.#reservations % 64 === 0) {
        run(
          this.#pool,
          `DELETE FROM attempt_budget WHERE key = ANY(ARRAY(
             SELECT key FROM attempt_budget WHERE window_start < $1 ORDER BY window_start LIMIT 500 FOR UPDATE SKIP LOCKED))`,
          [input.now - 2 * input.windowMs],
        ).catch(() => undefined);
      }
      if (retryAfterMs > 0) return { reserved: false, busy: false, retryAfterMs };
      if (busy) return { reserved: false, busy: true, retryAfterMs: 1000 };
      return { reserved: true, shared: true, windows };
    }
  }

  /**
   * Settles reserved attempts. The settlements of one event-loop turn go as one statement (see
   * `TurnBatch`): every sign-in and refresh settles one, and each round trip costs the node a
   * socket write that wakes a backend. Its windows are counted per key, window and lease period
   * first, since two attempts from one address settle the same window.
   */
  settle(input: Parameters<Store['settleAttempts']>[0]): Promise<void> {
    if (input.windows.length === 0) return Promise.resolve();
    return this.#settles.add(input);
  }

  async #settle(batch: readonly Waiting<Parameters<Store['settleAttempts']>[0], void>[]): Promise<void> {
    try {
      await this.#settleAll(batch);
    } catch (error) {
      if (batch.length === 1) throw error;
      // The statement rolled back (a lock wait that ended in a timeout, say): each settles alone,
      // so one address's trouble never leaves the others' attempts pending until their lease ends.
      await Promise.all(batch.map((w) => this.#settleAll([w]).catch((e: unknown) => w.reject(e))));
    }
  }

  /** Makes the settlements of `batch` in one statement, and answers each. */
  async #settleAll(batch: readonly Waiting<Parameters<Store['settleAttempts']>[0], void>[]): Promise<void> {
    const counted = new Map<string, { key: string; start: number; since: number; settles: number; failures: number }>();
    for (const { input } of batch) {
      for (const w of input.windows) {
        const id = `${w.key}\n${w.start}\n${w.pendingSince}`;
        const c = counted.get(id) ?? { key: w.key, start: w.start, since: w.pendingSince, settles: 0, failures: 0 };
        c.settles += 1;
        if (input.failed) c.failures += 1;
        counted.set(id, c);
      }
    }
    const all = [...counted.values()];
    // Only a window that is still the one reserved in changes; a newer one owes nothing. The
    // count of pending attempts drops only for settlements of the row's current lease period.
    // The rows are locked in key order first, as a reservation locks them, so a settle and a
    // reservation of the same keys (a refresh: its address and its session) never deadlock.
    await run(
      this.#pool,
      {
        name: 'svc_settle_attempts',
        text: `WITH w AS (
           SELECT * FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::int[], $6::int[]) AS w (key, start, since, settles, failures)
         ), locked AS (
           SELECT key, window_start, pending_since FROM attempt_budget WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE
         ), settled AS (
           SELECT l.key, COALESCE(sum(w.settles) FILTER (WHERE w.since = l.pending_since), 0) AS released, sum(w.failures) AS failed
             FROM locked AS l JOIN w ON w.key = l.key AND w.start = l.window_start
            GROUP BY l.key
         )
         UPDATE attempt_budget AS b
         SET pending = GREATEST(b.pending - s.released, 0), failures = b.failures + s.failed
         FROM settled AS s WHERE b.key = s.key`,
      },
      [
        [...new Set(all.map((c) => c.key))].sort(),
        all.map((c) => c.key),
        all.map((c) => c.start),
        all.map((c) => c.since),
        all.map((c) => c.settles),
        all.map((c) => c.failures),
      ],
    );
    for (const w of batch) w.resolve();
  }
}

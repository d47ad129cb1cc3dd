import { attemptWindowSql, storedAttemptWindow } from '@svc/core/sql-rows';
import { type AttemptReservation, type AttemptWindow, decideAttemptWindow, type Store } from '@svc/core/store';
import type { Pool } from 'pg';
import { callsGoAlone, type Named, rows, run } from './sql.js';
import { TurnBatch, type Waiting } from './turn-batch.js';

/** The most settlements one statement makes; a busier turn sends several. */
const SETTLE_BATCH_MAX = 256;

type ReserveInput = Parameters<Store['reserveAttempts']>[0];

/** A key's window as a reservation statement locked it, and the window it moved it to (null when it moved none). */
interface LockedWindow {
  key: string;
  window_start: number;
  failures: number;
  pending: number;
  pending_since: number;
  moved_start: number | null;
  moved_failures: number | null;
  moved_pending: number | null;
  moved_pending_since: number | null;
}

/** One call of a batch reservation (`ord`, from 1, its place in the batch), as {@link LockedWindow}. */
type ReserveStep = LockedWindow & { ord: number };

/**
 * The most reservations one statement makes; a busier turn sends several. Its steps hold a row per
 * key of the batch each, so its work grows with calls times keys: 64 calls of two keys each (one
 * address, each its own session) took 11 ms of a generic plan against 50,000 windows, 256 took
 * 141 ms, all of it under the rows' locks.
 */
const RESERVE_BATCH_MAX = 64;

/** Creates the empty windows of keys `$1` at `$2`; another node creating one meanwhile is the same row. */
const OPEN_WINDOWS: Named = {
  name: 'svc_open_attempt_windows',
  text: 'INSERT INTO attempt_budget (key, window_start, failures, pending, pending_since) SELECT k, $2, 0, 0, $2 FROM unnest($1::text[]) AS k ON CONFLICT (key) DO NOTHING',
};

/** In a step of `RESERVE_BATCH`: whether every key of the step's call reserves (`m` its keys' rows, `d` the decisions). */
const EVERY_KEY_RESERVES = 'bool_and(m.key IS NULL OR d.reserve) OVER ()';

/**
 * The reservations of a batch, one statement: `$1` and `$2` every call's keys and the call's
 * place in the batch (from 1), then each call's time, window, limit and lease. The rows of the
 * batch's keys are locked in key order, as one reservation locks them; then the calls are
 * decided one after another in the batch's order (a recursive step per call, over the windows
 * of every key of the batch): each on the windows the calls before it left, by core's
 * `attemptWindowSql` at its own time and limits, moving its keys' windows only when every one
 * of them reserves (all or none, as one reservation). Then each key a call reserved (`touched`,
 * carried through the steps: a key is looked up in no other step) has its row moved to its last
 * window. Answers each key of each call with the window the call found and the one it moved it
 * to (null when it reserved nothing), by call; when a key has no row yet, it answers fewer rows
 * and moves no window at all (the batch runs again once the missing rows exist).
 */
const RESERVE_BATCH: Named = {
  name: 'svc_reserve_attempt_batch',
  text: `WITH RECURSIVE members AS (
       SELECT * FROM unnest($1::text[], $2::int[]) AS m (key, ord)
     ), calls AS (
       SELECT * FROM unnest($3::bigint[], $4::bigint[], $5::int[], $6::bigint[]) WITH ORDINALITY
         AS c (now, window_ms, max, lease_ms, ord)
     ), locked AS (
       SELECT key, window_start, failures, pending, pending_since FROM attempt_budget
        WHERE key IN (SELECT key FROM members) ORDER BY key FOR UPDATE
     ), steps (j, key, member, reserved, touched, window_start, failures, pending, pending_since,
               found_start, found_failures, found_pending, found_since) AS (
       SELECT 0::bigint, key, false, false, false, window_start, failures, pending, pending_since,
              window_start, failures, pending, pending_since
         FROM locked
       UNION ALL
       -- Call j + 1 over every key's window: its own keys reserve together or not at all.
       SELECT c.ord, s.key, m.key IS NOT NULL, m.key IS NOT NULL AND ${EVERY_KEY_RESERVES},
              s.touched OR (m.key IS NOT NULL AND ${EVERY_KEY_RESERVES}),
              CASE WHEN m.key IS NOT NULL AND ${EVERY_KEY_RESERVES} THEN d.new_start ELSE s.window_start END,
              CASE WHEN m.key IS NOT NULL AND ${EVERY_KEY_RESERVES} THEN d.new_failures ELSE s.failures END,
              CASE WHEN m.key IS NOT NULL AND ${EVERY_KEY_RESERVES} THEN d.new_pending ELSE s.pending END,
              CASE WHEN m.key IS NOT NULL AND ${EVERY_KEY_RESERVES} THEN d.new_pending_since ELSE s.pending_since END,
              s.window_start, s.failures, s.pending, s.pending_since
         FROM steps AS s JOIN calls AS c ON c.ord = s.j + 1
         LEFT JOIN members AS m ON m.ord = c.ord AND m.key = s.key
        CROSS JOIN LATERAL (
          SELECT ${attemptWindowSql({ now: 'c.now', windowMs: 'c.window_ms', max: 'c.max', leaseMs: 'c.lease_ms' }, 's.')}
        ) AS d
     ), moved AS (
       UPDATE attempt_budget AS b
          SET window_start = l.window_start, failures = l.failures, pending = l.pending, pending_since = l.pending_since
         FROM steps AS l
        WHERE l.j = (SELECT count(*) FROM calls) AND l.touched AND b.key = l.key
          AND (SELECT count(*) FROM locked) = (SELECT count(DISTINCT key) FROM members)
     )
     SELECT j::int AS ord, key, found_start AS window_start, found_failures AS failures, found_pending AS pending,
            found_since AS pending_since,
            CASE WHEN reserved THEN window_start END AS moved_start, CASE WHEN reserved THEN failures END AS moved_failures,
            CASE WHEN reserved THEN pending END AS moved_pending, CASE WHEN reserved THEN pending_since END AS moved_pending_since
       FROM steps WHERE member ORDER BY j, key`,
};

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
  readonly #reserves: TurnBatch<ReserveInput, AttemptReservation>;
  readonly #settles: TurnBatch<Parameters<Store['settleAttempts']>[0], void>;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.#reserves = new TurnBatch(RESERVE_BATCH_MAX, (batch) => this.#reserveBatch(batch));
    this.#settles = new TurnBatch(SETTLE_BATCH_MAX, (batch) => this.#settle(batch));
  }

  /**
   * Reserves an attempt of every one of `input.keys`, all or none. The reservations of one
   * event-loop turn (a sign-in's address; a refresh's address and session) go as one statement
   * (see {@link AttemptBudget.#reserveBatch}).
   */
  reserve(input: ReserveInput): Promise<AttemptReservation> {
    const keys = [...new Set(input.keys)].sort();
    if (keys.length === 0) return Promise.resolve({ reserved: true, shared: true, windows: [] });
    return this.#reserves.add({ ...input, keys });
  }

  /** The reservation of `input.keys` (distinct, sorted) as one statement of its own. */
  async #reserveAlone(input: ReserveInput): Promise<AttemptReservation> {
    const keys = input.keys;
    for (let pass = 0; ; pass++) {
      // One statement decides and reserves (core's `attemptWindowSql`): it locks every row of
      // `keys` in key order (two reservations never wait on each other in a cycle), reads the
      // counts as the latest commit left them, and moves every window only when every key
      // reserves. Its row locks last for this statement alone, never across a round trip, so the
      // budget of one busy address is not a queue of transactions. It answers the rows as
      // locked, each with the window it moved it to (null when it moved none).
      const locked = await rows<LockedWindow>(
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
        await run(this.#pool, OPEN_WINDOWS, [keys, input.now]);
        continue;
      }
      return this.#decided(input, locked);
    }
  }

  /**
   * The answer to `input` from the rows of its keys as the statement locked them (in key order),
   * each with the window it moved it to (null when it moved none). The rule is core's: decided
   * again here, and the reservation fails closed if the SQL form and the rule ever drift apart:
   * no attempt runs on a reservation the rule would not have made, or whose window settling
   * would not find.
   */
  #decided(input: ReserveInput, locked: readonly LockedWindow[]): AttemptReservation {
    const windows: AttemptWindow[] = [];
    let retryAfterMs = 0;
    let busy = false;
    for (const r of locked) {
      const d = decideAttemptWindow(r.key, storedAttemptWindow(r), input);
      if (d.kind === 'refuse') retryAfterMs = Math.max(retryAfterMs, d.retryAfterMs);
      else if (d.kind === 'busy') busy = true;
      else windows.push(d.window);
    }
    const reserved = windows.length === input.keys.length;
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
    this.#counted(input);
    if (retryAfterMs > 0) return { reserved: false, busy: false, retryAfterMs };
    if (busy) return { reserved: false, busy: true, retryAfterMs: 1000 };
    return { reserved: true, shared: true, windows };
  }

  /**
   * Counts a reservation of this node: windows that ended long ago are clutter, and every 64th
   * reservation sweeps a few away, never waiting on a lock. Not awaited: the reservation has
   * committed, and a sweep that fails (a busy pool, an outage) must not turn it into an error
   * whose windows the caller could never settle; the next sweep takes over.
   */
  #counted(input: ReserveInput): void {
    if (++this.#reservations % 64 !== 0) return;
    run(
      this.#pool,
      `DELETE FROM attempt_budget WHERE key = ANY(ARRAY(
         SELECT key FROM attempt_budget WHERE window_start < $1 ORDER BY window_start LIMIT 500 FOR UPDATE SKIP LOCKED))`,
      [input.now - 2 * input.windowMs],
    ).catch(() => undefined);
  }

  /**
   * The reservations of a turn as one statement (`RESERVE_BATCH`): every sign-in reserves an
   * attempt of its address, every refresh of its address and session, and a round trip each
   * cost the node a socket write that wakes a sleeping backend (docs/performance.md, 2026-11-29).
   * The statement locks the batch's keys in key order, as one reservation does, and decides the
   * calls one after another, in the batch's order, each at its own time and limits, on the
   * windows the calls before it left: what the calls one at a time would have decided, with no
   * other reservation between them. Each answer is decided again here by core's rule on the
   * windows the call found (fail closed on any drift), as one reservation is. Keys seen for the
   * first time get their rows and the batch runs again; a statement that fails for its locks
   * (class 40, 55P03: one call's row held past `lock_timeout`) leaves nothing reserved, and each
   * call goes alone.
   */
  async #reserveBatch(batch: readonly Waiting<ReserveInput, AttemptReservation>[]): Promise<void> {
    if (batch.length === 1) {
      const w = batch[0] as Waiting<ReserveInput, AttemptReservation>;
      return this.#reserveAlone(w.input).then(w.resolve, w.reject);
    }
    const members = batch.flatMap((w, i) => w.input.keys.map((key) => ({ key, ord: i + 1 })));
    let steps: ReserveStep[] = [];
    try {
      for (let pass = 0; ; pass++) {
        steps = await rows<ReserveStep>(this.#pool, RESERVE_BATCH, [
          members.map((m) => m.key),
          members.map((m) => m.ord),
          batch.map((w) => w.input.now),
          batch.map((w) => w.input.windowMs),
          batch.map((w) => w.input.max),
          batch.map((w) => w.input.leaseMs),
        ]);
        if (steps.length === members.length) break;
        if (pass >= 2) throw new Error('attempt_budget rows were deleted while they were being reserved');
        const keys = [...new Set(members.map((m) => m.key))].sort();
        await run(this.#pool, OPEN_WINDOWS, [keys, Math.min(...batch.map((w) => w.input.now))]);
      }
    } catch (error) {
      if (!callsGoAlone(error)) throw error;
      await Promise.all(batch.map((w) => this.#reserveAlone(w.input).then(w.resolve, w.reject)));
      return;
    }
    const byCall = new Map<number, ReserveStep[]>();
    for (const step of steps) byCall.set(step.ord, [...(byCall.get(step.ord) ?? []), step]);
    for (const [i, w] of batch.entries()) {
      try {
        const found = byCall.get(i + 1) ?? [];
        if (found.length !== w.input.keys.length) throw new Error('attempt_budget: the batch reservation answered another call');
        w.resolve(this.#decided(w.input, found));
      } catch (error) {
        w.reject(error);
      }
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
      if (batch.length === 1 || !callsGoAlone(error)) throw error;
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

import { type StoreFault, StoreUnavailableError } from '@svc/core/store';
import type Database from 'better-sqlite3';
import { sqliteFault } from './faults.js';

/** How long, in total, a write waits for another process's write lock by default before it fails with 503. */
export const DEFAULT_LOCK_WAIT_MS = 5000;

/** Pauses between attempts to take the write lock: short at first, then every 50 ms. */
const LOCK_RETRY_DELAYS_MS = [2, 5, 10, 20, 50] as const;

interface QueuedWrite {
  readonly fn: () => unknown;
  readonly critical: boolean;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  /** When it stops waiting for the write lock (Date.now() based: a real wait, not domain time). */
  readonly deadline: number;
}

/**
 * The write path of the SQLite store on one connection: group commit, the asynchronous wait
 * for another process's write lock, fsync for critical writes, and the fault the last write
 * ran into (see {@link WriteQueue.run}).
 *
 * @example
 * const writes = new WriteQueue(db, 'normal', DEFAULT_LOCK_WAIT_MS, () => undefined);
 * await writes.run(() => statements.insertProject.run(id, now), true);
 */
export class WriteQueue {
  /** One transaction wrapper for every write, built once; `.immediate` makes it BEGIN IMMEDIATE. */
  readonly tx: Database.Transaction<(fn: () => unknown) => unknown>;
  /**
   * The fault the last write ran into (locked, disk full, I/O), until a write commits again or
   * health's probe finds it gone: health reports it instead of a reassuring "ok".
   */
  fault: StoreFault | null = null;
  /**
   * The audit chain's head while a write transaction holds the lock (nobody else can append
   * then); forgotten when the transaction ends or a savepoint that may have appended rolls back.
   */
  head: { seq: number; hash: string } | undefined;
  readonly #db: Database.Database;
  readonly #durability: 'normal' | 'full';
  readonly #lockWaitMs: number;
  readonly #onCommit: () => void;
  #queue: QueuedWrite[] = [];
  // Set while writes wait (asynchronously) for another process's write lock.
  #retryTimer: NodeJS.Timeout | undefined;
  #lockAttempts = 0;
  #lockWaitSince: number | undefined;
  // Counts the write transactions begun (each attempt of a batch is one).
  #serial = 0;
  // What the writes of the open transaction asked to run once it commits (see afterCommit).
  #afterCommit: (() => void)[] = [];

  /** `onCommit` runs after each committed batch. */
  constructor(db: Database.Database, durability: 'normal' | 'full', lockWaitMs: number, onCommit: () => void) {
    this.#db = db;
    this.#durability = durability;
    this.#lockWaitMs = lockWaitMs;
    this.#onCommit = onCommit;
    this.tx = db.transaction((fn: () => unknown) => fn());
  }

  /**
   * The number of the write transaction a write runs in: it changes with every transaction
   * begun, also when a batch runs again after a rollback. What a write keeps beside its statements
   * for the rest of its transaction is tied to this number (see {@link WriteQueue.afterCommit}).
   */
  get serial(): number {
    return this.#serial;
  }

  /**
   * From inside a write: runs `fn` once the transaction it runs in has committed, before any of
   * its writes is answered. Never when that transaction rolls back, or when the write's own
   * savepoint does (a write that threw): what a write learned in a transaction that did not
   * commit is not kept. `fn` must not throw.
   */
  afterCommit(fn: () => void): void {
    this.#afterCommit.push(fn);
  }

  /** Since when (Date.now()) writes have been waiting for another process's lock, or undefined. */
  get lockWaitSince(): number | undefined {
    return this.#lockWaitSince;
  }

  /**
   * Runs `fn` as one atomic write and resolves after its commit. Writes issued together are
   * group-committed: they queue until the event loop is free, then run one after another in a
   * single BEGIN IMMEDIATE transaction (the write lock is taken up front, never upgraded). If one
   * of them throws, that transaction rolls back and the batch runs again with each write in its
   * own savepoint, so a write that throws rolls back alone and the others still commit. Each
   * caller is answered only once the commit is done: the same guarantees as one transaction per
   * write, with the commit cost shared. (Savepoints only on that second run: a savepoint copies
   * every page its write changes into its journal and costs two statements, about 4% of a
   * sign-in's CPU, for a rollback that almost never happens. A write may therefore run twice
   * before it commits once; what it does beside its statements must bear that, as dropping a
   * cache entry does.)
   *
   * A `critical` write in `normal` durability makes its batch commit with `synchronous = FULL`
   * (SQLite only lets the safety level change between transactions), so an enrollment, a
   * revocation, a device removal, a detected reuse or a used-up bootstrap token or pairing code
   * is on disk before it is acknowledged, while sign-ins and rotations stay `NORMAL`: on power
   * loss the last of those may roll back, which only ever un-issues tokens.
   */
  run<T>(fn: () => T, critical = false): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const deadline = Date.now() + this.#lockWaitMs;
      this.#queue.push({ fn, critical, resolve: resolve as (value: unknown) => void, reject, deadline });
      // While writes wait for the lock, the retry timer flushes whatever has queued meanwhile.
      if (this.#queue.length === 1 && this.#retryTimer === undefined) setImmediate(() => this.#flush());
    });
  }

  /**
   * Another process holds the write lock and nothing of `batch` ran. SQLite's own busy wait
   * would block the event loop (every request, health, the other listener) for as long as it
   * waits, so the connection's busy timeout is tiny and the waiting happens here, between
   * attempts, on timers. Writes past their deadline fail with `503 store_unavailable` (locked).
   */
  #waitForLock(batch: readonly QueuedWrite[], error: unknown): void {
    const now = Date.now();
    const waiting: QueuedWrite[] = [];
    for (const w of batch) {
      if (w.deadline <= now) {
        this.fault = 'locked';
        w.reject(new StoreUnavailableError('locked', { cause: error }));
      } else {
        waiting.push(w);
      }
    }
    this.#queue = [...waiting, ...this.#queue];
    if (this.#queue.length === 0) {
      this.#lockWaitSince = undefined;
      this.#lockAttempts = 0;
      return;
    }
    this.#lockWaitSince ??= now;
    const delay = LOCK_RETRY_DELAYS_MS[Math.min(this.#lockAttempts, LOCK_RETRY_DELAYS_MS.length - 1)] as number;
    this.#lockAttempts++;
    this.#retryTimer = setTimeout(() => this.#flush(), delay);
  }

  #flush(): void {
    this.#retryTimer = undefined;
    const batch = this.#queue;
    this.#queue = [];
    if (batch.length === 0) return;
    const raise = this.#durability === 'normal' && batch.some((w) => w.critical);
    let results: WriteResult[] = [];
    let began = false;
    const attempt = (isolated: boolean): WriteResult[] =>
      this.tx.immediate(() => {
        began = true;
        this.#serial++;
        this.#afterCommit = [];
        return this.#apply(batch, isolated);
      }) as WriteResult[];
    try {
      if (raise) this.#db.pragma('synchronous = FULL');
      try {
        results = attempt(false);
      } catch (error) {
        if (!(error instanceof WriteThrew)) throw error;
        // The transaction rolled back whole: nothing of the batch has happened.
        this.head = undefined;
        this.#afterCommit = [];
        if (batch.length === 1) {
          results = [{ ok: false, value: error.cause }];
        } else {
          began = false;
          results = attempt(true);
        }
      }
    } catch (error) {
      this.head = undefined;
      this.#afterCommit = [];
      if (raise) this.#db.pragma('synchronous = NORMAL');
      const fault = sqliteFault(error);
      if (!began && fault === 'locked') {
        this.#waitForLock(batch, error);
        return;
      }
      // BEGIN or COMMIT failed (disk full, I/O): nothing of the batch happened.
      this.fault = fault ?? this.fault;
      for (const w of batch) w.reject(error);
      this.#lockWaitSince = undefined;
      this.#lockAttempts = 0;
      return;
    } finally {
      this.head = undefined;
    }
    const committed = this.#afterCommit;
    this.#afterCommit = [];
    for (const fn of committed) fn();
    if (raise) this.#db.pragma('synchronous = NORMAL');
    this.#lockWaitSince = undefined;
    this.#lockAttempts = 0;
    // The store starts its background thread after a few commits (a process that keeps writing).
    this.#onCommit();
    // Committed: a fault is over unless a write of this batch still ran into one (disk full).
    let fault: StoreFault | null = null;
    for (const r of results) if (!r.ok) fault = sqliteFault(r.value) ?? fault;
    this.fault = fault;
    batch.forEach((w, i) => {
      const r = results[i] as WriteResult;
      if (r.ok) w.resolve(r.value);
      else w.reject(r.value);
    });
  }

  /**
   * Runs the writes of `batch` inside the transaction begun for it. `isolated`: each in its own
   * savepoint (the same wrapper, nested, runs `fn` in a SAVEPOINT), one that throws rolled back
   * alone and answered with its error. Otherwise straight through, and the first that throws
   * ends the attempt with {@link WriteThrew}.
   */
  #apply(batch: readonly QueuedWrite[], isolated: boolean): WriteResult[] {
    const results: WriteResult[] = [];
    for (const w of batch) {
      if (!isolated) {
        let value: unknown;
        try {
          value = w.fn();
        } catch (error) {
          throw new WriteThrew(error);
        }
        results.push({ ok: true, value });
        continue;
      }
      const kept = this.#afterCommit.length;
      try {
        results.push({ ok: true, value: this.tx(w.fn) });
      } catch (error) {
        this.head = undefined;
        this.#afterCommit.length = kept;
        // Some errors (a full disk, an I/O error, no memory) make SQLite roll back the whole
        // transaction, not only the savepoint: the writes after it would run outside it, without
        // the write lock. The attempt ends here, and nothing of the batch has happened.
        if (!this.#db.inTransaction) throw error;
        results.push({ ok: false, value: error });
      }
    }
    return results;
  }
}

/** What one write of a batch came to: its value, or what it threw. */
interface WriteResult {
  readonly ok: boolean;
  readonly value: unknown;
}

/**
 * A write threw while its batch ran without savepoints: thrown out of the transaction so that
 * it rolls back whole, and caught in `#flush`, which runs the batch again (see
 * {@link WriteQueue.run}). Never leaves the queue, so not an `Error` with a code of its own.
 */
class WriteThrew {
  readonly cause: unknown;
  constructor(cause: unknown) {
    this.cause = cause;
  }
}

import type Database from 'better-sqlite3';
import type { WriteQueue } from './write-queue.js';

/** Every this many uses of this connection (and the first), up to {@link PRUNE_ROWS} expired rows go. */
const PRUNE_EVERY = 64;
/** How many expired rows one prune deletes at most. */
const PRUNE_ROWS = 512;

interface LogRow {
  readonly seq: number;
  readonly proof_key: string;
  readonly expires_at: number;
}

/**
 * The DPoP replay cache of the SQLite store (`useDpopProof`, `hasDpopRecord`): an append-only
 * log on disk, `dpop_replay_log`, and the live keys in memory.
 *
 * Why not a table keyed by the proof's key, as it was: the keys are SHA-256 digests, so each use
 * wrote into a random leaf of that B-tree, and its expired record's deletion into another one.
 * A batch of uses (one write transaction) then rewrote about two pages per use, 4 KiB each into
 * the WAL, and the checkpoint copied them again. Appended rows share their pages, and so do the
 * entries of the log's expiry index (expiries grow with time).
 *
 * What decides a use is the set of live keys in memory, kept exact across processes on the same
 * file and across restarts:
 * - The store reads the whole log when it opens, outside any write transaction.
 * - Inside a write transaction (which holds the write lock, so no other process appends
 *   meanwhile), the first use reads every row other processes appended since the last one this
 *   connection knows (`seq` only grows: AUTOINCREMENT never hands out a committed number again).
 * - A use is kept in memory only once its transaction has committed, and only if its own write
 *   did not roll back ({@link WriteQueue.afterCommit}): a batch that rolls back and runs again
 *   does not find its first run's uses, and a number handed out to a use that rolled back is never
 *   taken for a committed one.
 * - An expired key (`expires_at <= now`) does not refuse its key: it is used again, a new row.
 *
 * Expired rows are deleted with the first use and every {@link PRUNE_EVERY}th (at most
 * {@link PRUNE_ROWS}, found by the expiry index); expired keys leave memory by the second they
 * expire in. Every key lives at most as long as a proof is accepted (61 s) or a server nonce
 * (120 s), so memory holds the keys of about the last minute of DPoP-checked requests (about 150
 * bytes each).
 *
 * @example
 * const replay = new DpopReplayLog(db, writes);
 * await writes.run(() => replay.use(key, expiresAt, now)); // false: replayed
 */
export class DpopReplayLog {
  readonly #writes: WriteQueue;
  readonly #s: {
    readonly newer: Database.Statement<[number], LogRow>;
    readonly append: Database.Statement<[string, number]>;
    readonly prune: Database.Statement<[number, number]>;
  };
  /** Live keys (this connection's committed uses, and other processes' as read), by key: their expiry. */
  readonly #known = new Map<string, number>();
  /** The keys of {@link #known} by the second their expiry falls in (rounded up): how they leave. */
  readonly #bySecond = new Map<number, string[]>();
  /** The highest `seq` this connection read or committed. */
  #seen = 0;
  /** The write transaction whose first use read the rows of other processes, and what it used. */
  #open: { readonly serial: number; readonly used: Map<string, number> } | null = null;
  #uses = 0;
  #learned = 0;

  constructor(db: Database.Database, writes: WriteQueue) {
    this.#writes = writes;
    this.#s = {
      newer: db.prepare<[number], LogRow>('SELECT seq, proof_key, expires_at FROM dpop_replay_log WHERE seq > ? ORDER BY seq'),
      append: db.prepare<[string, number]>('INSERT INTO dpop_replay_log (proof_key, expires_at) VALUES (?, ?)'),
      prune: db.prepare<[number, number]>(
        `DELETE FROM dpop_replay_log
         WHERE seq IN (SELECT seq FROM dpop_replay_log WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`,
      ),
    };
    // The live log, read now rather than inside the first write transaction (which would hold
    // the write lock of every process on the file while it reads).
    this.#catchUp(Number.NEGATIVE_INFINITY);
  }

  /**
   * Inside a write only: records `key` until `expiresAt` and answers true, unless a live record
   * of it exists (`expiresAt > now`), here or in another process: false.
   */
  use(key: string, expiresAt: number, now: number): boolean {
    const open = this.#transaction(now);
    if (Math.max(open.used.get(key) ?? Number.NEGATIVE_INFINITY, this.#known.get(key) ?? Number.NEGATIVE_INFINITY) > now) {
      return false;
    }
    // The statements first: memory changes only once neither of them can throw any more. (A
    // prune that fails fails its use alone: the next one is not due.)
    if (this.#uses++ % PRUNE_EVERY === 0) this.#s.prune.run(now, PRUNE_ROWS);
    const seq = Number(this.#s.append.run(key, expiresAt).lastInsertRowid);
    open.used.set(key, Math.max(expiresAt, open.used.get(key) ?? Number.NEGATIVE_INFINITY));
    // Dropped with this write's savepoint if it rolls back, with the transaction if that does.
    this.#writes.afterCommit(() => {
      this.#learn(key, expiresAt, now);
      if (seq > this.#seen) this.#seen = seq;
    });
    return true;
  }

  /**
   * Whether this connection already knows a live record of `key` (no I/O: what it committed and
   * read so far). True is final; false may still be refused by {@link use}.
   */
  knownLive(key: string, now: number): boolean {
    return (this.#known.get(key) ?? Number.NEGATIVE_INFINITY) > now;
  }

  /** Whether a live record of `key` exists (read only, outside a write). */
  has(key: string, now: number): boolean {
    this.#catchUp(now);
    return (this.#known.get(key) ?? Number.NEGATIVE_INFINITY) > now;
  }

  /** The uses of the write transaction this use runs in; its first use reads what other processes appended. */
  #transaction(now: number): { readonly used: Map<string, number> } {
    const serial = this.#writes.serial;
    if (this.#open?.serial === serial) return this.#open;
    // The write lock is held: every row another process appended has committed, and this
    // connection's own committed rows are known (none of this transaction's yet).
    this.#catchUp(now);
    this.#open = { serial, used: new Map() };
    return this.#open;
  }

  /** Reads the rows appended since the last one this connection knows. */
  #catchUp(now: number): void {
    for (const row of this.#s.newer.iterate(this.#seen)) {
      this.#learn(row.proof_key, row.expires_at, now);
      this.#seen = row.seq;
    }
  }

  #learn(key: string, expiresAt: number, now: number): void {
    const known = this.#known.get(key);
    if (known === undefined || expiresAt > known) {
      this.#known.set(key, expiresAt);
      const second = Math.ceil(expiresAt / 1000);
      const keys = this.#bySecond.get(second);
      if (keys === undefined) this.#bySecond.set(second, [key]);
      else keys.push(key);
    }
    if (this.#learned++ % PRUNE_EVERY === 0) this.#forgetExpired(now);
  }

  /** Forgets the keys of every second that has fully passed (a few hundred seconds at most hold keys). */
  #forgetExpired(now: number): void {
    for (const [second, keys] of this.#bySecond) {
      if (second * 1000 > now) continue;
      for (const key of keys) if ((this.#known.get(key) ?? Number.POSITIVE_INFINITY) <= now) this.#known.delete(key);
      this.#bySecond.delete(second);
    }
  }
}

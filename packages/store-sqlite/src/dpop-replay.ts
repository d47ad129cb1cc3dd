import type Database from 'better-sqlite3';
import type { WriteQueue } from './write-queue.js';

/** Every this many uses of this connection (and the first), the expired rows at the log's start go. */
const PRUNE_EVERY = 64;
/** How many of the oldest rows (and of the oldest keys in memory) one prune looks at. */
const PRUNE_WINDOW = 512;

interface LogRow {
  readonly seq: number;
  readonly proof_key: string;
  readonly expires_at: number;
}

/** The keys one write transaction recorded, kept once it commits. */
interface OpenTransaction {
  readonly serial: number;
  readonly recorded: Map<string, number>;
  last: number;
  now: number;
}

/**
 * The DPoP replay cache of the SQLite store (`useDpopProof`, `hasDpopRecord`): an append-only
 * log on disk, `dpop_replay_log`, and the live keys in memory.
 *
 * Why not a table keyed by the proof's key, as it was: the keys are SHA-256 digests, so each use
 * wrote into a random leaf of that B-tree, and its expired record's deletion into another one.
 * A batch of uses (one write transaction) then rewrote about two pages per use, 4 KiB each into
 * the WAL, and the checkpoint copied them again. Appended rows share their pages.
 *
 * What decides a use is the set of live keys in memory, kept exact across processes on the same
 * file and across restarts:
 * - Inside the write transaction (which holds the write lock, so no other process appends
 *   meanwhile), the first use reads every row other processes appended since the last one this
 *   connection knows (`seq` only grows: AUTOINCREMENT never hands out a committed number again).
 *   A connection that opens reads the whole live log that way.
 * - The keys a transaction records are kept in memory only once it commits
 *   ({@link WriteQueue.afterCommit}): a batch that rolls back and runs again does not find its
 *   own uses of the first run.
 * - An expired key (`expires_at <= now`) does not refuse its key: it is used again, a new row.
 *
 * Expired rows are deleted from the log's start, the oldest {@link PRUNE_WINDOW} rows looked at
 * with every {@link PRUNE_EVERY}th use; expired keys leave memory the same way. Every key lives
 * at most as long as a proof is accepted (61 s) or a server nonce (120 s), so memory holds the
 * keys of about the last minute of DPoP-checked requests (about 150 bytes each).
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
  /** The highest `seq` this connection read or committed. */
  #seen = 0;
  #open: OpenTransaction | null = null;
  #uses = 0;
  #learned = 0;

  constructor(db: Database.Database, writes: WriteQueue) {
    this.#writes = writes;
    this.#s = {
      newer: db.prepare<[number], LogRow>('SELECT seq, proof_key, expires_at FROM dpop_replay_log WHERE seq > ? ORDER BY seq'),
      append: db.prepare<[string, number]>('INSERT INTO dpop_replay_log (proof_key, expires_at) VALUES (?, ?)'),
      prune: db.prepare<[number, number]>(
        `DELETE FROM dpop_replay_log
         WHERE seq IN (SELECT seq FROM dpop_replay_log ORDER BY seq LIMIT ?) AND expires_at <= ?`,
      ),
    };
  }

  /**
   * Inside a write transaction only: records `key` until `expiresAt` and answers true, unless a
   * live record of it exists (`expiresAt > now`), here or in another process: false.
   */
  use(key: string, expiresAt: number, now: number): boolean {
    const open = this.#transaction(now);
    if (Math.max(open.recorded.get(key) ?? Number.NEGATIVE_INFINITY, this.#known.get(key) ?? Number.NEGATIVE_INFINITY) > now) {
      return false;
    }
    open.last = Number(this.#s.append.run(key, expiresAt).lastInsertRowid);
    open.recorded.set(key, Math.max(expiresAt, open.recorded.get(key) ?? Number.NEGATIVE_INFINITY));
    open.now = now;
    if (this.#uses++ % PRUNE_EVERY === 0) this.#s.prune.run(PRUNE_WINDOW, now);
    return true;
  }

  /** Whether a live record of `key` exists (read only, outside a write). */
  has(key: string, now: number): boolean {
    this.#catchUp(now);
    return (this.#known.get(key) ?? Number.NEGATIVE_INFINITY) > now;
  }

  /** The write transaction this use runs in; its first use reads what other processes appended. */
  #transaction(now: number): OpenTransaction {
    const serial = this.#writes.serial;
    if (this.#open !== null && this.#open.serial === serial) return this.#open;
    // The write lock is held: every row another process appended has committed.
    this.#catchUp(now);
    const open: OpenTransaction = { serial, recorded: new Map(), last: 0, now };
    this.#open = open;
    this.#writes.afterCommit(() => {
      for (const [key, expiresAt] of open.recorded) this.#learn(key, expiresAt, open.now);
      // This transaction's rows follow every row read at its start, with no gap.
      if (open.last > this.#seen) this.#seen = open.last;
      if (this.#open === open) this.#open = null;
    });
    return open;
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
    if (known === undefined || expiresAt > known) this.#known.set(key, expiresAt);
    if (this.#learned++ % PRUNE_EVERY !== 0) return;
    // The oldest keys first (a Map keeps the order they were first learned in).
    let looked = 0;
    for (const [k, e] of this.#known) {
      if (looked++ >= PRUNE_WINDOW) break;
      if (e <= now) this.#known.delete(k);
    }
  }
}

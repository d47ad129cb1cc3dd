import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { StoreStats } from '@svc/core/store';
import type Database from 'better-sqlite3';
import type { CheckpointPlan } from './checkpoint.js';
import { readStats } from './stats-queries.js';

/**
 * The store's background thread (diagnostics counters, WAL checkpoints; see store-worker.ts),
 * with its own connection to the same file, started on first need and never keeping the
 * process alive. In-memory databases, or a build without the worker file, have none: their
 * counters are read on the caller's connection.
 *
 * @example
 * const background = new BackgroundThread(db, file, DEFAULT_CHECKPOINT_PLAN);
 * const stats = await background.stats(Date.now());
 * await background.stop();
 */
export class BackgroundThread {
  readonly #db: Database.Database;
  readonly #file: string;
  readonly #plan: CheckpointPlan;
  #worker: Worker | undefined;
  #seq = 0;
  readonly #pending = new Map<number, { resolve: (stats: StoreStats) => void; reject: (error: unknown) => void }>();

  constructor(db: Database.Database, file: string, plan: CheckpointPlan) {
    this.#db = db;
    this.#file = file;
    this.#plan = plan;
  }

  /**
   * The diagnostics counters, read on the thread (one read transaction, so they describe a
   * single moment): counting live sessions scans them, and on the caller's thread that scan
   * would stall every request while it runs.
   */
  stats(now: number): Promise<StoreStats> {
    const worker = this.start();
    if (worker === null) return Promise.resolve().then(() => readStats(this.#db, now));
    const id = ++this.#seq;
    return new Promise<StoreStats>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      worker.postMessage({ id, now });
    });
  }

  /** Starts the thread unless it runs (or cannot run: then null). */
  start(): Worker | null {
    if (this.#worker !== undefined) return this.#worker;
    const script = new URL('./store-worker.js', import.meta.url);
    if (this.#file === ':memory:' || this.#file === '' || !existsSync(fileURLToPath(script))) return null;
    const worker = new Worker(script, { workerData: { file: this.#file, plan: this.#plan } });
    // Never keeps the process alive; stop() ends it.
    worker.unref();
    const failAll = (error: unknown) => {
      for (const p of this.#pending.values()) p.reject(error);
      this.#pending.clear();
      if (this.#worker === worker) this.#worker = undefined;
    };
    worker.on('message', (msg: { id: number; ok: boolean; stats?: StoreStats; code?: string; message?: string }) => {
      const pending = this.#pending.get(msg.id);
      if (pending === undefined) return;
      this.#pending.delete(msg.id);
      if (msg.ok) pending.resolve(msg.stats as StoreStats);
      else pending.reject(Object.assign(new Error(msg.message ?? 'stats failed'), { code: msg.code }));
    });
    worker.on('error', failAll);
    worker.on('exit', () => failAll(new Error("the store's background thread exited")));
    this.#worker = worker;
    return worker;
  }

  /** Ends the thread (if it runs). */
  async stop(): Promise<void> {
    const worker = this.#worker;
    this.#worker = undefined;
    if (worker !== undefined) await worker.terminate();
  }
}

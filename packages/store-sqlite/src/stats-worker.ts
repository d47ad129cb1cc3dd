// The store's diagnostics counters on a thread of their own: counting live sessions scans
// them, and on the main thread (better-sqlite3 is synchronous) that scan would stall every
// request for as long as it takes. Own connection to the same file; WAL lets it read while
// the main connection writes.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { readStats } from './stats-queries.js';

const db = new Database((workerData as { file: string }).file, { fileMustExist: true, timeout: 2000 });
parentPort?.on('message', (msg: { id: number; now: number }) => {
  try {
    parentPort?.postMessage({ id: msg.id, ok: true, stats: readStats(db, msg.now) });
  } catch (error) {
    const e = error as { code?: unknown; message?: unknown };
    parentPort?.postMessage({ id: msg.id, ok: false, code: typeof e.code === 'string' ? e.code : undefined, message: String(e.message) });
  }
});

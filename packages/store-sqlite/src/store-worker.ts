// The store's background thread, with its own connection to the same file (WAL lets it read
// and checkpoint while the main connection writes). better-sqlite3 is synchronous, so anything
// slow on the main thread stalls every request; two such things run here instead:
// - the diagnostics counters: counting live sessions scans them;
// - WAL checkpoints: copying the WAL back into the database file and syncing it took 130-180 ms
//   per checkpoint on the main thread (the main connection's automatic checkpoint).
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { type CheckpointPlan, checkpointStep } from './checkpoint.js';
import { readStats } from './stats-queries.js';

const { file, plan } = workerData as { file: string; plan: CheckpointPlan };
const db = new Database(file, { fileMustExist: true, timeout: 2000 });

parentPort?.on('message', (msg: { id: number; now: number }) => {
  try {
    parentPort?.postMessage({ id: msg.id, ok: true, stats: readStats(db, msg.now) });
  } catch (error) {
    const e = error as { code?: unknown; message?: unknown };
    parentPort?.postMessage({ id: msg.id, ok: false, code: typeof e.code === 'string' ? e.code : undefined, message: String(e.message) });
  }
});

let lastFrames = 0;
setInterval(() => {
  try {
    lastFrames = checkpointStep(db, plan, lastFrames);
  } catch {
    // Busy or an I/O fault: the main connection reports faults on its own writes; the next
    // tick tries again, and the main connection's own checkpoint is the backstop meanwhile.
  }
}, plan.everyMs);

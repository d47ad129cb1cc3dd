import type Database from 'better-sqlite3';

/** When the background thread checkpoints the WAL (see `checkpointStep`). */
export interface CheckpointPlan {
  /** How often it copies what the WAL holds into the database file, in milliseconds. */
  readonly everyMs: number;
  /** WAL frames (pages) past which it also makes the next write start the WAL over. */
  readonly restartAtFrames: number;
  /**
   * The main connection's own automatic checkpoint (SQLite's `wal_autocheckpoint`), above
   * `restartAtFrames`: it stalls the event loop for the copy, so it is only the backstop for
   * when the background thread is not running (a one-off CLI command, or the thread is gone).
   */
  readonly backstopFrames: number;
}

/**
 * The background thread's checkpoints: often, and never where a request waits.
 *
 * Every `everyMs` (50) it copies the WAL's new pages into the database file (`PASSIVE`: it never
 * blocks a reader or a writer). Under a steady stream of writes that alone does not make the WAL
 * start over (measured: after a `RESTART` checkpoint the next writes still appended), so once the
 * WAL holds more than `restartAtFrames` pages a `TRUNCATE` checkpoint copies the little the
 * passive pass left over, holding new writes back meanwhile (the main thread's writes wait on
 * timers, never in a blocking busy loop), and empties the WAL itself.
 *
 * The main connection keeps SQLite's automatic checkpoint at `backstopFrames`, above this bound:
 * it only acts when this thread is not running.
 */
export const DEFAULT_CHECKPOINT_PLAN: CheckpointPlan = { everyMs: 50, restartAtFrames: 4000, backstopFrames: 10_000 };

/**
 * One tick of the background checkpointer on its own connection `db`; returns the WAL's frame
 * count, to be passed back as `lastFrames` next tick (a restart is only worth its lock while the
 * WAL grows).
 *
 * @example
 * let frames = 0;
 * setInterval(() => { frames = checkpointStep(db, plan, frames); }, plan.everyMs);
 */
export function checkpointStep(db: Database.Database, plan: CheckpointPlan, lastFrames: number): number {
  const [passive] = db.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
  const frames = passive?.log ?? 0;
  if (frames >= plan.restartAtFrames && frames !== lastFrames) {
    db.pragma('wal_checkpoint(TRUNCATE)');
  }
  return frames;
}

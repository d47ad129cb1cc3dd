import { statsSql } from '@svc/core/sql-rows';
import { type RealmCountRow, type StoreStats, toStoreStats } from '@svc/core/store';
import type Database from 'better-sqlite3';

/** The diagnostics counters' queries (core's, plus this store's audit head), shared by the store and its stats worker. */
export const STATS_SQL = {
  ...statsSql('@now'),
  head: 'SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1',
} as const;

/**
 * Reads every counter in one read transaction on `db`, so they describe a single moment.
 * The live-session count scans the live sessions: its cost grows with them, which is why the
 * store runs this on a worker thread (see `SqliteStore.stats`).
 */
export function readStats(db: Database.Database, now: number): StoreStats {
  const run = db.transaction(
    (): StoreStats =>
      toStoreStats({
        devices: db.prepare<[], RealmCountRow>(STATS_SQL.devices).all(),
        activeSessions: db.prepare<{ now: number }, RealmCountRow>(STATS_SQL.sessions).all({ now }),
        events: db.prepare<[], { type: string; n: number }>(STATS_SQL.events).all(),
        head: db.prepare<[], { seq: number; hash: string }>(STATS_SQL.head).get(),
      }),
  );
  return run.deferred();
}

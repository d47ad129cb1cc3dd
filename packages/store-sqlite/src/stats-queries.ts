import { GENESIS_HASH, type Realm } from '@svc/core';
import { activeSessionSql } from '@svc/core/sql-rows';
import type { StoreStats } from '@svc/core/store';
import type Database from 'better-sqlite3';

/** The diagnostics counters' queries, shared by the store and its stats worker. */
export const STATS_SQL = {
  devices: 'SELECT realm, COUNT(*) AS n FROM devices WHERE removed_at IS NULL GROUP BY realm',
  sessions: `SELECT realm, COUNT(*) AS n FROM sessions WHERE ${activeSessionSql('@now')} GROUP BY realm`,
  // Kept counts (migration 006): a GROUP BY over the whole trail grew with every event.
  events: 'SELECT type, n FROM audit_counts',
  head: 'SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1',
} as const;

/**
 * Reads every counter in one read transaction on `db`, so they describe a single moment.
 * The live-session count scans the live sessions: its cost grows with them, which is why the
 * store runs this on a worker thread (see `SqliteStore.stats`).
 */
export function readStats(db: Database.Database, now: number): StoreStats {
  const run = db.transaction((): StoreStats => {
    const devices: Record<Realm, number> = { management: 0, application: 0 };
    for (const r of db.prepare<[], { realm: Realm; n: number }>(STATS_SQL.devices).all()) devices[r.realm] = r.n;
    const activeSessions: Record<Realm, number> = { management: 0, application: 0 };
    for (const r of db.prepare<{ now: number }, { realm: Realm; n: number }>(STATS_SQL.sessions).all({ now }))
      activeSessions[r.realm] = r.n;
    const events: Record<string, number> = {};
    for (const r of db.prepare<[], { type: string; n: number }>(STATS_SQL.events).all()) events[r.type] = r.n;
    const head = db.prepare<[], { seq: number; hash: string }>(STATS_SQL.head).get();
    return { devices, activeSessions, events, auditLength: head?.seq ?? 0, auditHead: head?.hash ?? GENESIS_HASH };
  });
  return run.deferred();
}

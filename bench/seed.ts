// Seeds a throwaway benchmark control database with many live sessions, straight through
// SQL in one transaction: the benchmark needs a big store fast, and these rows are never
// audited because the database is deleted with the run. Not for real databases.
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';

/** Inserts `count` live sessions (random digests) owned by the first enrolled device. */
export function seedSessions(file: string, count: number): void {
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    const device = db.prepare('SELECT id, subject FROM devices WHERE removed_at IS NULL LIMIT 1').get() as
      | { id: string; subject: string }
      | undefined;
    if (device === undefined) throw new Error('seed: no device enrolled');
    const now = Date.now();
    const insert = db.prepare(
      `INSERT INTO sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at,
         refresh_digest, refresh_expires_at, generation)
       VALUES (?, 'management', ?, ?, ?, ?, ?, ?, ?, ?, 0)`,
    );
    const batch = db.transaction((from: number, to: number) => {
      for (let i = from; i < to; i++) {
        const r = randomBytes(64).toString('hex');
        insert.run(
          `ses_SEED${i.toString().padStart(22, '0')}`,
          device.subject,
          device.id,
          now,
          now + 86_400_000,
          r.slice(0, 64),
          now + 900_000,
          r.slice(64),
          now + 86_400_000,
        );
      }
    });
    for (let i = 0; i < count; i += 100_000) batch(i, Math.min(count, i + 100_000));
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
}

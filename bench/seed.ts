// Seeds a throwaway benchmark control database with many live sessions, straight through
// SQL in one transaction per 100,000 rows: the benchmark needs a big store fast, and these rows
// are never audited because the database is deleted with the run. Not for real databases.
import { randomBytes } from 'node:crypto';
import { digestToken } from '@svc/core';
import Database from 'better-sqlite3';

/**
 * Inserts live sessions number `from` to `to - 1`, owned by the first enrolled device, each with
 * a real access token (a split token naming its session), and returns the access tokens of
 * `sample` of them, spread evenly over the range so that checking them walks the whole table.
 */
export function seedSessions(file: string, range: { readonly from: number; readonly to: number }, sample: number): string[] {
  const db = new Database(file);
  const tokens: string[] = [];
  const every = Math.max(1, Math.floor((range.to - range.from) / Math.max(1, sample)));
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
      // One CSPRNG call per batch: 64 bytes per session (access and refresh secrets).
      const secrets = randomBytes(64 * (to - from));
      for (let i = from; i < to; i++) {
        // A valid ULID body: "SEED" and 22 digits (Crockford base32 has them all).
        const selector = `SEED${i.toString().padStart(22, '0')}`;
        const at = (i - from) * 64;
        const access = `svca_${selector}${secrets.subarray(at, at + 32).toString('base64url')}`;
        const refresh = `svcr_${selector}${secrets.subarray(at + 32, at + 64).toString('base64url')}`;
        if ((i - range.from) % every === 0 && tokens.length < sample) tokens.push(access);
        insert.run(
          `ses_${selector}`,
          device.subject,
          device.id,
          now,
          now + 86_400_000,
          digestToken(access),
          now + 86_400_000,
          digestToken(refresh),
          now + 86_400_000,
        );
      }
    });
    for (let i = range.from; i < range.to; i += 100_000) batch(i, Math.min(range.to, i + 100_000));
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
  return tokens;
}

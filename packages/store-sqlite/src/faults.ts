import type { StoreFault } from '@svc/core/store';

/**
 * The store fault a better-sqlite3 error means, or null when it is not an outage (a constraint
 * violation, a bug): `SQLITE_BUSY*`/`SQLITE_LOCKED*` (another process holds the lock) are
 * `locked`, `SQLITE_FULL` is `disk_full`, and `SQLITE_IOERR*`, `SQLITE_CANTOPEN*`,
 * `SQLITE_READONLY*`, `SQLITE_NOMEM`, `SQLITE_CORRUPT*` and `SQLITE_NOTADB` (the file or the disk
 * failing) are `io_error`.
 */
export function sqliteFault(err: unknown): StoreFault | null {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return null;
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return 'locked';
  if (code === 'SQLITE_FULL') return 'disk_full';
  if (
    code.startsWith('SQLITE_IOERR') ||
    code.startsWith('SQLITE_CANTOPEN') ||
    code.startsWith('SQLITE_READONLY') ||
    code.startsWith('SQLITE_CORRUPT') ||
    code === 'SQLITE_NOMEM' ||
    code === 'SQLITE_NOTADB'
  ) {
    return 'io_error';
  }
  return null;
}

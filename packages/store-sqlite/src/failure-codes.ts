import { defineFailureCodes } from '@svc/core';

/**
 * The failure codes of svc-store-sqlite's error classes (not HTTP answers). Registered with core
 * on load, so `errorCodeOf` recognises them; the CLI merges this table for exit codes and
 * `--json` problems, the docs generator for `docs/errors.md`.
 */
export const STORE_SQLITE_FAILURE_CODES = defineFailureCodes({
  store_backup_refused: {
    raisedBy: 'StoreBackupError (svc-store-sqlite)',
    exit: 1,
    meaning:
      'a backup, restore or backup check of the embedded store was refused: the file is not a SQLite database, not a control database, holds no project, is in use by another process (the service is running), or cannot be read; `problem` says which',
  },
});

/** A failure code of this package's classes. */
export type StoreSqliteFailureCode = keyof typeof STORE_SQLITE_FAILURE_CODES;

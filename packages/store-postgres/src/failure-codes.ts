import { defineFailureCodes } from '@svc/core';

/**
 * The failure codes of svc-store-postgres's error classes (not HTTP answers). Registered with core on load, so `errorCodeOf` recognises them; the CLI merges
 * this table for exit codes and `--json` problems, the docs generator for `docs/errors.md`.
 */
export const STORE_POSTGRES_FAILURE_CODES = defineFailureCodes({
  store_schema_newer: {
    raisedBy: 'NewerSchemaError (svc-store-postgres)',
    exit: 1,
    meaning: 'the PostgreSQL schema is newer than this store package knows (reported to callers as `store_open_failed`)',
  },
  store_in_use: {
    raisedBy: 'StoreInUseError (svc-store-postgres)',
    exit: 1,
    meaning: 'a move between stores was refused: other processes (running nodes) are connected to the PostgreSQL schema',
  },
});

/** A failure code of this package's classes. */
export type StorePostgresFailureCode = keyof typeof STORE_POSTGRES_FAILURE_CODES;

import { SqliteStore } from './sqlite-store.js';

/**
 * The operation set this store implements, as its `:svc/store` export declares it: the public
 * methods of {@link SqliteStore}, read from the class itself so the declaration cannot drift from
 * the code. Loading the addon compares it with core's `STORE_OPERATIONS`.
 */
export const SQLITE_STORE_OPERATIONS: readonly string[] = Object.freeze(
  Object.getOwnPropertyNames(SqliteStore.prototype)
    .filter((name) => name !== 'constructor')
    .sort(),
);

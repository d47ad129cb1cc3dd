import { PostgresStore } from './postgres-store.js';

/**
 * The operation set this store implements, as its `:svc/store` export declares it: the public
 * methods of {@link PostgresStore}, read from the class itself so the declaration cannot drift from
 * the code. Loading the addon compares it with core's `STORE_OPERATIONS`.
 */
export const POSTGRES_STORE_OPERATIONS: readonly string[] = Object.freeze(
  Object.getOwnPropertyNames(PostgresStore.prototype)
    .filter((name) => name !== 'constructor')
    .sort(),
);

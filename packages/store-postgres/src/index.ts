export { StoreOpenError } from '@svc/core';
export { svcStore } from './addon-export.js';
export { StoreInUseError } from './control-state.js';
export { STORE_POSTGRES_FAILURE_CODES, type StorePostgresFailureCode } from './failure-codes.js';
export {
  DEFAULT_SCHEMA,
  DEFAULT_TIMEOUTS,
  openPostgresStore,
  type PostgresStoreOptions,
  type PostgresTimeouts,
  UNAUTHENTICATED_STORE_EVENT,
} from './open-postgres-store.js';
export { POSTGRES_STORE_OPERATIONS } from './operations.js';
export { PostgresStore } from './postgres-store.js';

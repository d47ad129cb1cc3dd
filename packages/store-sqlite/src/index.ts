export { StoreOpenError } from '@svc/core';
export { svcStore } from './addon-export.js';
export {
  backupSqliteStore,
  lockSqliteStore,
  readSqliteAccountedState,
  readSqliteBackupInfo,
  type SqliteBackupInfo,
  type SqliteBackupVerdict,
  type SqliteStoreLock,
  StoreBackupError,
  type StoreBackupProblem,
  settleSqliteFile,
  verifySqliteBackup,
} from './backup.js';
export { type CheckpointPlan, DEFAULT_CHECKPOINT_PLAN } from './checkpoint.js';
export { STORE_SQLITE_FAILURE_CODES, type StoreSqliteFailureCode } from './failure-codes.js';
export { CONTROL_STORE_APPLICATION_ID, openSqliteStore, type SqliteStoreOptions } from './open-sqlite-store.js';
export { SQLITE_STORE_OPERATIONS } from './operations.js';
export { SqliteStore } from './sqlite-store.js';

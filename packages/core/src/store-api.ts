// `@svc/core/store`: what a store author needs, by name. The Store contract and its records,
// the rules a store applies (pure decisions: the store reads, calls them, writes what they
// say), the rows those decisions read with their mapping to records, the fault classification
// every store shares, and the contract of a store addon. The audit chain a store appends to
// (`sealAuditEvent`, `GENESIS_HASH`), realms and token digests are domain names of `@svc/core`.
// SQL text (column lists, WHERE fragments) is in `@svc/core/sql-rows`, for the SQL stores only.

export type { StoreAddonContext, StoreAddonExport } from './addon.js';
export { type AttemptWindow, type AttemptWindowDecision, decideAttemptWindow } from './attempt-budget.js';
export {
  decideRetiredPresentation,
  decideRotation,
  gracePairEnded,
  openSuccessor,
  planRotation,
  type RefreshRow,
  type RotationDecision,
  type RotationPlan,
  sealSuccessor,
} from './refresh-rotation.js';
export {
  type AttemptReservation,
  type BootstrapOutcome,
  type ChallengeRecord,
  type DeviceRecord,
  type FlowRecord,
  type LinkRecord,
  type LinkSessionOutcome,
  type PairingCompletion,
  type PairingIntentRecord,
  type RotationOutcome,
  type SessionRecord,
  STORE_CONTRACT_VERSION,
  STORE_OPERATIONS,
  type Store,
  type StoreOperation,
  type StoreStats,
  type TokenPairDigests,
} from './store.js';
export { classifyStoreErrors, type StoreFault, StoreUnavailableError, storeFaultOf } from './store-fault.js';
export {
  type Migration,
  type MigrationDriver,
  type MigrationDriverOf,
  migrationsFrom,
  runMigrations,
  runMigrationsSync,
  type SyncMigrationDriver,
} from './store-migrations.js';
export {
  type AccessRow,
  amrText,
  type ChallengeRow,
  type DeviceRow,
  type EventRow,
  type FlowRow,
  type IntentRow,
  type LinkRow,
  type RealmCountRow,
  type RotationRow,
  rotatedSession,
  type SessionRow,
  toChallenge,
  toDevice,
  toEvent,
  toFlow,
  toIntent,
  toLink,
  toSession,
  toStoreStats,
} from './store-rows.js';
export {
  auditPage,
  type BootstrapTokenState,
  type ChallengeState,
  clampPairToSession,
  decideBootstrapConsumption,
  decideDeviceRemoval,
  decidePairingCompletion,
  decidePairingFailure,
  type FlowState,
  type IntentState,
  isChallengeConsumable,
  isCounterAdvance,
  isFlowConsumable,
  isSessionActive,
  isSessionLive,
  latestTrustedTime,
  newSessionRecord,
  REVOKED_DEVICE_REMOVED,
  REVOKED_LINK_REMOVED,
  REVOKED_REFRESH_REUSED,
} from './store-rules.js';

/**
 * `@svc/runtime`: the running svc auth service as a library. {@link openService} loads a
 * project and returns a service to `start()`, `reload()` and `stop()`; the rest are the
 * operations on a project that the `svc` CLI (or any embedding program) calls: open it for an
 * offline command, create it, back it up and restore it, rotate its keys. Nothing here prints:
 * errors carry a code ({@link RUNTIME_FAILURE_CODES}) and the service logs through its logger.
 */

export {
  ASSERTION_KEYS_POLL_MS,
  type AssertionKeyProject,
  assertionKeyCustody,
  assertionKeysFile,
  ensureProjectAssertionKeys,
  gatewayAssertionSigner,
  type LiveAssertionKeys,
  liveClusterAssertionKeys,
  readAssertionKeys,
  rotateProjectAssertionKeys,
} from './assertion-keys.js';
export { appendCheckpointLine, CHECKPOINT_FILE_ENV, CHECKPOINT_SECONDS_ENV, reviewExportedCheckpoints } from './audit-checkpoints.js';
export { allAuditEvents } from './audit-events.js';
export { AuditSinkError, auditCursorFile, readAuditCursor } from './audit-shipping.js';
export {
  type BackupResult,
  backupProject,
  backupSignatureFile,
  type RestoreOptions,
  type RestoreResult,
  restoreProject,
} from './backup.js';
export { type BundledAddon, bundledAddon, bundledSqliteAddon, installBundledStoreIfPinned } from './bundled-addons.js';
export {
  assertNotWritableByOthers,
  assertOwnerOnly,
  controlStoreLocation,
  dependenciesDir,
  embeddedStoreFile,
  ensureControlDir,
  ensureNodeIdentity,
  ensureNodeKey,
  initProjectId,
  makeDeps,
  mkdirOwnerOnly,
  openControlStore,
  packagesDirOf,
  resolveSecret,
  writeSecretFile,
} from './control.js';
export { formatProblem, parseEdn } from './edn.js';
export { ListenRefusedError, RUNTIME_FAILURE_CODES, RuntimeError, type RuntimeFailureCode } from './errors.js';
export { LISTEN_ENV, type ListenAddress, type ListenerName, resolveListen } from './listen.js';
export { createLogger, REDACT_PATHS } from './logger.js';
export { migrateProjectStore, type StoreMigration } from './migrate-store.js';
export { nodeKeyHistoryFile, readNodeKeyHistory, writeFileAtomic } from './node-key-history.js';
export { loadNodeIdentity, rotateNodeKey } from './node-keys.js';
export { type InstalledPackage, installPackage } from './package-install.js';
export { signProviderPackage } from './package-sign.js';
export { chosenProfile, defaultProjectEdn, loadProject, type Project, projectNameFor } from './project.js';
export {
  type AuditVerification,
  type InitializedProject,
  initProject,
  rotateProjectAssertionKey,
  rotateProjectNodeKey,
  verifyProjectAudit,
} from './project-operations.js';
export { openService, PRUNE_INTERVAL_MS, type Service, type ServiceOptions } from './service.js';
export { type OpenProject, withProject } from './session.js';
export { shellQuote } from './shell-quote.js';

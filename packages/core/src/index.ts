// The public API of @svc/core, by name: the use cases and what they take and return, the
// domain types, tokens, audit chain, keys and errors. Store authors import `@svc/core/store`
// (the Store contract, the rules a store applies, its rows); configuration is
// `@svc/core/config`; SQL text shared by the two SQL stores is `@svc/core/sql-rows`.

export { ADDON_MANIFEST_FILE, type StoreAddonContext, type StoreAddonExport } from './addon.js';
export {
  AUDIT_EVENT_TYPES,
  type AuditData,
  type AuditEvent,
  type AuditEventDraft,
  type AuditEventType,
  auditEventToJson,
  type ChainVerdict,
  GENESIS_HASH,
  sealAuditEvent,
  verifyAuditChain,
} from './audit.js';
export {
  AUDIT_CHECKPOINT_TYPE,
  type AuditCheckpointPayload,
  type CheckpointVerdict,
  checkAuditCheckpoint,
  type SignedAuditCheckpoint,
  signAuditCheckpoint,
} from './audit-checkpoint.js';
export { canonicalJson, type JsonValue } from './canonical-json.js';
export {
  type AuthDeps,
  type AuthSettings,
  type Clock,
  DEFAULT_AUTH_SETTINGS,
  type Logger,
  type RandomBytes,
  silentLogger,
} from './deps.js';
export { parsePublicKeyHex, publicKeyHexOf, verifyEd25519, verifyEd25519Async } from './ed25519.js';
export { AuthError, ConfigError, type ConfigProblem, ERROR_CODES, type ErrorCode } from './errors.js';
export { type IdKind, isIdOfKind, newId } from './ids.js';
export { isValidNodeId, NODE_ID_PATTERN, nodeIdOf, normalizeNodeId } from './node-id.js';
export { makePrincipal, type Principal, type PrincipalClaims } from './principal.js';
export { isRealm, type Realm } from './realm.js';
export {
  type AttemptReservation,
  type BootstrapOutcome,
  type ChallengeRecord,
  type DeviceRecord,
  type PairingCompletion,
  type PairingIntentRecord,
  type RotationOutcome,
  type SessionRecord,
  STORE_CONTRACT_VERSION,
  STORE_OPERATIONS,
  type Store,
  type StoreStats,
  type TokenPairDigests,
} from './store.js';
export { type StoreFault, StoreUnavailableError, storeFaultOf } from './store-fault.js';
export { rfc3339, secondsUntil } from './time.js';
export {
  digestsEqual,
  digestToken,
  isTokenOfKind,
  mintSessionToken,
  mintToken,
  type PresentedSessionToken,
  parseSessionToken,
  type SessionTokenKind,
  sha256Hex,
  type TokenKind,
} from './tokens.js';
export { authenticate } from './use-cases/authenticate.js';
export { challengeString, createChallenge } from './use-cases/create-challenge.js';
export { createSession } from './use-cases/create-session.js';
export { enrollWithBootstrapToken } from './use-cases/enroll-with-bootstrap-token.js';
export { auditDraft } from './use-cases/event.js';
export { type BootstrapReason, type IssuedBootstrapToken, issueBootstrapToken } from './use-cases/issue-bootstrap-token.js';
export {
  completePairing,
  normalizePairingCode,
  PAIRING_MAX_FAILURES,
  type PreparedPairing,
  pairingProofString,
  preparePairing,
} from './use-cases/pairing.js';
export { removeDevice } from './use-cases/remove-device.js';
export { revokeExposedSession, revokeSession } from './use-cases/revoke-session.js';
export { rotateRefreshToken, rotationAuditDraft } from './use-cases/rotate-refresh-token.js';
export { type DeviceJson, deviceToJson, type SessionJson, sessionToJson, type TokenPairJson } from './wire.js';

// The public API of @svc/core, by name: the use cases and what they take and return, the
// domain types, tokens, audit chain, keys, errors and wire shapes. Each name has one face:
// store authors import `@svc/core/store` (the Store contract, its records, the rules a store
// applies, its rows, store faults); reading `project.edn` is `@svc/core/config`; the settings
// table with every default and limit is `@svc/core/settings`; SQL text shared by the two SQL
// stores is `@svc/core/sql-rows`.

export { ADDON_MANIFEST_FILE } from './addon.js';
export { DEFAULT_APP_GATEWAY_CONFIG } from './app-config.js';
export {
  ASSERTION_TYP,
  type AssertionClaims,
  type AssertionKeyJson,
  type AssertionKeyRotation,
  type AssertionKeySetJson,
  type AssertionPublicJwk,
  assertionAudienceOf,
  assertionClaims,
  assertionHtu,
  assertionKeyId,
  assertionSigningKey,
  type FreshAssertionKey,
  firstAssertionKeySet,
  parseAssertionKeySet,
  pruneAssertionKeySet,
  publishedAssertionKeys,
  rotateAssertionKeySet,
} from './assertion-keys.js';
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
export { type AuditShippingHealth, type AuditSinkName, auditShippingAfter } from './audit-shipping-health.js';
export { type SinkPathStat, sinkDirectoryRefusal, sinkFileRefusal } from './audit-sink-rules.js';
export {
  type AccountingEvent,
  BACKUP_SIGNATURE_TYPE,
  type BackupSignaturePayload,
  type BackupSignatureVerdict,
  type BackupState,
  checkBackupSignature,
  type SignedBackup,
  signBackup,
  unaccountedState,
} from './backup.js';
export {
  type BrowserCookieNames,
  browserCookieNames,
  type CsrfInput,
  canonicalOrigin,
  csrfRefusal,
  isBrowserSessionCookie,
  isSafeMethod,
  MAX_RETURN_PATH_LENGTH,
  PLAIN_COOKIE_NAMES,
  safeReturnPath,
  TLS_COOKIE_NAMES,
} from './browser-policy.js';
export { canonicalJson, type JsonValue, rfc8785Json } from './canonical-json.js';
export type { AuthDeps } from './deps.js';
export {
  accessTokenHash,
  bindsRefresh,
  DPOP_NONCE_ROTATE_SECONDS,
  DPOP_NONCE_TTL_SECONDS,
  DPOP_PROOF_CHALLENGE,
  DPOP_TYP,
  type DpopExpectation,
  dpopNonceKey,
  dpopReplayed,
  dpopReplayKey,
  type Ed25519PublicJwk,
  jwkThumbprint,
  normalizedHtu,
  publicJwkOfHex,
  thumbprintOfPublicKeyHex,
  useDpopNonce,
  type VerifiedDpopProof,
  verifyDpopProof,
} from './dpop.js';
export { parsePublicKeyHex, publicKeyHexOf, verifyEd25519, verifyEd25519Async } from './ed25519.js';
export {
  AuthError,
  CORE_FAILURE_CODES,
  type CoreFailureCode,
  defineFailureCodes,
  ERROR_CODES,
  type ErrorCode,
  errorCodeOf,
  type FailureCodeEntry,
  type FailureCodeTable,
  type FailureExit,
  failureCodeEntry,
  HTTP_ERROR_CLASSES,
  isErrorCode,
  isFailureCode,
  StoreOpenError,
} from './errors.js';
export {
  FRAMING_HEADER_NAMES,
  framingRefusal,
  IDENTITY_HEADER_NAMES,
  IDENTITY_HEADER_PREFIXES,
  identityHeaderPredicate,
  isCanonicalReservedTarget,
  isIdentityHeader,
  isPublicPath,
  isReservedPath,
  isSvcCredential,
  normalizeHeaderName,
  pathMatches,
  RESERVED_PREFIX,
  type RelayedSessionEnd,
  relayedSessionEnd,
  requirementCovers,
  requirementFor,
  type UpgradeRequestHead,
  unambiguousPath,
  unmetRequirement,
  upgradeRefusal,
  WEBSOCKET_SESSION_CHECK_SECONDS,
} from './gateway-policy.js';
export { type IdKind, isIdOfKind, newId } from './ids.js';
export { DEVICE_KEY_PROVIDER_KIND, type NodeHealthFacts, type NodeHealthVerdict, nodeHealthVerdict } from './node-health-verdict.js';
export { isValidNodeId, NODE_ID_PATTERN, nodeIdOf, normalizeNodeId } from './node-id.js';
export { type NodeKeySetJson, nodeKeyValidAt } from './node-keys.js';
export { type Clock, type Logger, type RandomBytes, silentLogger } from './ports.js';
export { makePrincipal, type Principal, type PrincipalClaims } from './principal.js';
export {
  type AuthProvider,
  type ExternalIdentity,
  PROVIDER_CONTRACT_VERSION,
  type ProviderBeginResult,
  type ProviderContext,
  type ProviderFinishResult,
  type ProviderHandle,
  type ProviderHealth,
  type ProviderIntent,
  type ProviderJson,
  type ProviderPolicy,
  type ProviderReply,
  type ProviderRequest,
  type StoredCredential,
} from './provider.js';
export {
  BUNDLED_PASSKEY_PACKAGE,
  DEFINITE_REFUSAL_CODES,
  IDENTITY_PROVIDER_FAILURE_CODES,
  IDENTITY_PROVIDER_RETRY_SECONDS,
  jitRefusal,
  PROVIDER_FLOW_TTL_SECONDS,
  PROVIDER_UNAVAILABLE_RETRY_SECONDS,
  providerAmr,
  providerOutageOf,
  providerStartRefusal,
  refusalMayBeOutage,
  refusalOutageOf,
  SVC_PUBLISHER_KEY,
} from './provider-decisions.js';
export {
  CLAIM_NAME_MAX_CHARS,
  CLAIM_VALUE_MAX_CHARS,
  CLAIMS_MAX_COUNT,
  checkProviderIdentity,
  IDENTITY_MAX_CHARS,
} from './provider-policy.js';
export { isRealm, type Realm } from './realm.js';
export { SENDER_CONSTRAINTS, type SenderConstraint, type SenderConstraints } from './sender-constraint.js';
export { type SessionClientInput, sessionClient, USER_AGENT_MAX_CHARS } from './session-client.js';
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
// The header rules of the gateway's upstream mode.
export {
  connectionNamedHeaders,
  FORWARDED_PREFIX,
  GATEWAY_MADE_REQUEST_HEADERS,
  HOP_BY_HOP_HEADERS,
  relaysRequestHeader,
  relaysResponseHeader,
  upstreamHeaderName,
} from './upstream-headers.js';
export { authenticate, principalKeyBinding } from './use-cases/authenticate.js';
export { checkDpopProof, type DpopRequest } from './use-cases/check-dpop-proof.js';
export { challengeString, createChallenge } from './use-cases/create-challenge.js';
export { createSession } from './use-cases/create-session.js';
export { enrollWithBootstrapToken } from './use-cases/enroll-with-bootstrap-token.js';
export { auditDraft } from './use-cases/event.js';
export { type BootstrapReason, type IssuedBootstrapToken, issueBootstrapToken } from './use-cases/issue-bootstrap-token.js';
export { linkToJson, listLinks, unlinkIdentity } from './use-cases/links.js';
export {
  checkLinkPairing,
  completePairing,
  type LinkableProvider,
  normalizePairingCode,
  type PreparedPairing,
  pairingProofString,
  prepareLinkPairing,
  preparePairing,
} from './use-cases/pairing.js';
export {
  finishProviderFlow,
  PROVIDER_STATE_MAX_CHARS,
  type ProviderFlowOutcome,
  providerCallbackUrl,
  startProviderFlow,
} from './use-cases/provider-flow.js';
export { removeDevice } from './use-cases/remove-device.js';
export { revokeExposedSession, revokeOtherSessions, revokeSession } from './use-cases/revoke-session.js';
export { rotateRefreshToken, rotationAuditDraft } from './use-cases/rotate-refresh-token.js';
export {
  type LinkJson,
  type LinkListJson,
  type LinkRemovedJson,
  linkListResponse,
  linkRemovedResponse,
  linkSchema,
} from './wire/links.js';
// The wire shapes of the management API and the node surface (schemas and their derived types), shared by the server and the client SDK.
export {
  type AuditEventJson,
  type AuditPageJson,
  type AuditQuery,
  auditEventSchema,
  auditPageResponse,
  auditQuery,
  type ChallengeBody,
  type ChallengeJson,
  challengeBody,
  challengeResponse,
  type DegradedHealthProblemJson,
  type DeviceJson,
  type DeviceListJson,
  type DeviceParams,
  type DeviceRemovedJson,
  type DeviceResponseJson,
  degradedHealthProblem,
  deviceListResponse,
  deviceParams,
  deviceRemovedResponse,
  deviceResponse,
  deviceSchema,
  type EnrollBody,
  emptyBody,
  enrollBody,
  type HealthJson,
  healthResponse,
  noQuery,
  type PrincipalJson,
  principalResponse,
  type RealmQuery,
  type RefreshBody,
  type RevokeBody,
  type RevokedJson,
  type RevokeOthersJson,
  realmQuery,
  realmSchema,
  refreshBody,
  revokeBody,
  revokeOthersResponse,
  revokeResponse,
  type SessionBody,
  type SessionJson,
  type SessionListJson,
  sessionBody,
  sessionListResponse,
  sessionSchema,
  storeFaultSchema,
  type TokenPairJson,
  tokenPairResponse,
} from './wire/management.js';
export {
  type CompleteBody,
  type ComponentHealthJson,
  completeBody,
  componentHealthSchema,
  DIAGNOSTICS_TYPE,
  type DiagnosticsBody,
  type DiagnosticsPayload,
  diagnosticsBody,
  diagnosticsPayloadSchema,
  discoveryResponse,
  type ModuleStatusJson,
  moduleStatusSchema,
  NONCE_PATTERN,
  type NodeDiscoveryJson,
  type NodeHealthJson,
  type NodeRouteJson,
  type NodeStatusJson,
  nodeHealthResponse,
  nodeRouteSchema,
  nodeStatusResponse,
  type PrepareBody,
  type PreparedPairingJson,
  prepareBody,
  preparedPairingResponse,
  type RetiredNodeKeyJson,
  retiredNodeKeySchema,
  type SignedDiagnosticsJson,
  type StoreAddonStatusJson,
  signedDiagnosticsResponse,
  storeAddonStatusSchema,
} from './wire/node.js';
export { PROBLEM_SCHEMA_ID, type ProblemJson, problemSchema } from './wire/problem.js';
export type { WireType } from './wire/wire-type.js';
export { deviceToJson, sessionToJson } from './wire.js';

// The public API of @svc/core, by name: the use cases and what they take and return, the
// domain types, tokens, audit chain, keys, errors and wire shapes. Each name has one face:
// store authors import `@svc/core/store` (the Store contract, its records, the rules a store
// applies, its rows, store faults); reading `project.edn` is `@svc/core/config`; the settings
// table with every default and limit is `@svc/core/settings`; SQL text shared by the two SQL
// stores is `@svc/core/sql-rows`.

export { ADDON_MANIFEST_FILE } from './addon.js';
export { type AppRoute, type AppRouteTable, appRouteTable, requestOrigin } from './app-routes.js';
export {
  AssertionKeySealError,
  type KeyEncryptionKey,
  type OpenedAssertionKeySet,
  openAssertionKeySet,
  parseKeyEncryptionKey,
  sealAssertionKeySet,
} from './assertion-key-seal.js';
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
  assertionSigningKey,
  assertionSigningKeyUntil,
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
  type AuditCheckpointPayload,
  type CheckpointVerdict,
  checkAuditCheckpoint,
  reviewAuditCheckpoints,
  type SignedAuditCheckpoint,
  signAuditCheckpoint,
} from './audit-checkpoint.js';
export { type AuditShippingHealth, type AuditSinkName, auditShippingAfter } from './audit-shipping-health.js';
export {
  AUDIT_SINK_NODE_PLACEHOLDER,
  auditSinkPathFor,
  type SinkPathStat,
  sinkDirectoryRefusal,
  sinkFileRefusal,
} from './audit-sink-rules.js';
export {
  type AccountingEvent,
  type BackupSignaturePayload,
  type BackupSignatureVerdict,
  type BackupState,
  checkBackupSignature,
  type SignedBackup,
  signBackup,
  unaccountedState,
} from './backup.js';
export {
  ACCOUNT_PAGE_PATH,
  type BrowserCookieNames,
  browserCookieNames,
  type CsrfInput,
  canonicalOrigin,
  csrfRefusal,
  isBrowserSessionCookie,
  PLAIN_COOKIE_NAMES,
  safeReturnPath,
  TLS_COOKIE_NAMES,
} from './browser-policy.js';
export { canonicalJson, type JsonValue, rfc8785Json } from './canonical-json.js';
export type { AuthDeps } from './deps.js';
export {
  accessTokenHash,
  DPOP_NONCE_ROTATE_SECONDS,
  DPOP_NONCE_TTL_SECONDS,
  DPOP_TYP,
  type DpopExpectation,
  dpopNonceKey,
  type Ed25519PublicJwk,
  publicJwkOfHex,
  thumbprintOfPublicKeyHex,
  type VerifiedDpopProof,
} from './dpop.js';
export { parsePublicKeyHex, publicKeyHexOf, verifyEd25519 } from './ed25519.js';
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
  StoreOpenError,
} from './errors.js';
export {
  framingRefusal,
  IDENTITY_HEADER_NAMES,
  IDENTITY_HEADER_PREFIXES,
  identityHeaderPredicate,
  isCanonicalReservedTarget,
  isPublicPath,
  isReservedPath,
  isSvcCredential,
  normalizeHeaderName,
  RESERVED_PREFIX,
  type RelayedSessionEnd,
  relayedSessionEnd,
  requirementFor,
  requirementNeeds,
  type UpgradeRequestHead,
  unambiguousPath,
  unmetRequirement,
  upgradeRefusal,
  WEBSOCKET_SESSION_CHECK_SECONDS,
} from './gateway-policy.js';
export {
  decideHandoff,
  HANDOFF_CODE_TTL_SECONDS,
  handoffReturn,
  isHandoffCode,
  isHandoffState,
  SSO_AUTHORIZE_PATH,
  SSO_CALLBACK_PATH,
  SSO_START_PATH,
} from './handoff.js';
export { type IdKind, isIdOfKind, newId } from './ids.js';
export { type NodeHealthFacts, type NodeHealthVerdict, nodeHealthVerdict } from './node-health-verdict.js';
export { CLUSTER_ID_PATTERN, clusterIdOf, isValidNodeId, nodeIdOf, normalizeNodeId } from './node-id.js';
export { type NodeKeySetJson, nodeKeyValidAt } from './node-keys.js';
export { type Clock, type Logger, type RandomBytes, silentLogger } from './ports.js';
export { makePrincipal, type Principal, type PrincipalClaims } from './principal.js';
export {
  type AuthProvider,
  type ExternalIdentity,
  PROVIDER_CONTRACT_VERSION,
  type ProviderBeginResult,
  type ProviderClaim,
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
export { BUNDLED_PASSKEY_PACKAGE, providerAmr, providerOutageOf, SVC_PUBLISHER_KEY } from './provider-decisions.js';
export { checkProviderIdentity } from './provider-policy.js';
export { isRealm, type Realm } from './realm.js';
// SCIM 2.0 provisioning (docs/scim.md): the mapping rules, the use cases and SCIM tokens.
export {
  applyScimGroupPatch,
  applyScimUserPatch,
  parseScimFilter,
  SCIM_BASE_PATH,
  SCIM_PAGE_DEFAULT,
  SCIM_PAGE_MAX,
  SCIM_PATCH_MAX_OPERATIONS,
  SCIM_REALM,
  SCIM_SCHEMA,
  ScimError,
  type ScimErrorJson,
  type ScimFilter,
  type ScimGroupState,
  type ScimType,
  type ScimUserState,
  scimErrorJson,
  scimErrorOf,
  scimGroup,
  scimGroupInput,
  scimListFilter,
  scimListResponse,
  scimPage,
  scimPatchOperations,
  scimResourceTypes,
  scimSameEmail,
  scimSchemas,
  scimServiceProviderConfig,
  scimShownUserName,
  scimUser,
  scimUserAttributes,
  scimUserChanges,
  scimUserInput,
  scimUserNameMatches,
  scimUserState,
} from './scim.js';
export type { SenderConstraint, SenderConstraints } from './sender-constraint.js';
export { rfc3339, secondsUntil } from './time.js';
export {
  digestsEqual,
  digestToken,
  mintSessionToken,
  mintToken,
  type PresentedSessionToken,
  parseSessionToken,
  type SessionTokenKind,
  sha256Hex,
  type TokenKind,
} from './tokens.js';
// The header rules of the gateway's upstream mode.
export { connectionNamedHeaders, relaysRequestHeader, relaysResponseHeader, upstreamHeaderName } from './upstream-headers.js';
export { removeOwnLink, renameOwnLink, selfServiceData, signInMethodWords } from './use-cases/account.js';
export {
  type AssertionKeyCustody,
  type ClusterAssertionKeyRotation,
  type ClusterAssertionKeys,
  type EnsuredAssertionKeys,
  ensureClusterAssertionKeys,
  readClusterAssertionKeys,
  rotateClusterAssertionKeys,
} from './use-cases/assertion-keys.js';
export { authenticate, principalKeyBinding } from './use-cases/authenticate.js';
export type { DpopRequest } from './use-cases/check-dpop-proof.js';
export {
  CONSOLE_AMR,
  CONSOLE_FLOW_PROVIDER,
  CONSOLE_LINK_TTL_SECONDS,
  createConsoleLink,
  redeemConsoleLink,
} from './use-cases/console-link.js';
export { createChallenge } from './use-cases/create-challenge.js';
export { createSession } from './use-cases/create-session.js';
export { enrollWithBootstrapToken } from './use-cases/enroll-with-bootstrap-token.js';
export { auditDraft } from './use-cases/event.js';
export { handoffBinding, mintHandoffCode, redeemHandoffCode } from './use-cases/handoff.js';
export { type BootstrapReason, type IssuedBootstrapToken, issueBootstrapToken } from './use-cases/issue-bootstrap-token.js';
export { listLinks, unlinkIdentity } from './use-cases/links.js';
export {
  completePairing,
  type LinkableProvider,
  normalizePairingCode,
  type PreparedPairing,
  pairingProofString,
  prepareLinkPairing,
  preparePairing,
} from './use-cases/pairing.js';
export { finishProviderFlow, type ProviderFlowOutcome, startProviderFlow } from './use-cases/provider-flow.js';
export { removeDevice } from './use-cases/remove-device.js';
export { endReplacedSession, revokeExposedSession, revokeOtherSessions, revokeSession } from './use-cases/revoke-session.js';
export { rotateRefreshToken, rotationAuditDraft } from './use-cases/rotate-refresh-token.js';
export {
  scimActor,
  scimCreateGroup,
  scimCreateUser,
  scimDeleteGroup,
  scimDeleteUser,
  scimGetGroup,
  scimGetUser,
  scimGroupMembers,
  scimGroupRefs,
  scimListGroups,
  scimListUsers,
  scimPatchGroup,
  scimPatchUser,
  scimReplaceGroup,
  scimReplaceUser,
} from './use-cases/scim.js';
export {
  authenticateScimToken,
  createScimToken,
  listScimTokens,
  revokeScimToken,
  SCIM_TOKEN_NAME_MAX_CHARS,
  type ScimTokenActor,
  scimTokenToJson,
} from './use-cases/scim-tokens.js';
export {
  addUser,
  decideUserUpdate,
  getUser,
  identityAttributesFromClaims,
  listGroups,
  listUsers,
  type ProvidedAttributes,
  refreshedUser,
  removeUser,
  USERS_PAGE_DEFAULT,
  USERS_PAGE_MAX,
  type UserActor,
  type UserAttributesInput,
  updateUser,
  updateUserCounting,
  userToJson,
} from './use-cases/users.js';
export {
  type AttributeSource,
  checkDisplayName,
  checkEmail,
  checkGroups,
  checkUserName,
  DISPLAY_NAME_MAX_CHARS,
  EMAIL_MAX_CHARS,
  emailDomainOf,
  GROUP_NAME_PATTERN,
  groupNameProblem,
  type IdentityAttributes,
  identityAttributesOf,
  identityHeaders,
  isAttributeSource,
  MAX_USER_GROUPS,
  normalizeEmailDomain,
  USER_STATUSES,
  type UserStatus,
} from './users.js';
export type { LinkJson, LinkListJson, LinkRemovedJson } from './wire/links.js';
// The wire shapes of the management API and the node surface (schemas and their derived types), shared by the server and the client SDK.
export {
  type AuditCheckpointReviewJson,
  type AuditCheckpointsJson,
  type AuditCheckpointsQuery,
  type AuditEventJson,
  type AuditPageJson,
  type AuditQuery,
  auditCheckpointReviewSchema,
  auditCheckpointsQuery,
  auditCheckpointsResponse,
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
  refreshBody,
  revokeBody,
  revokeOthersResponse,
  revokeResponse,
  type SessionBody,
  type SessionJson,
  type SessionListJson,
  sessionBody,
  sessionListResponse,
  type TokenPairJson,
  tokenPairResponse,
} from './wire/management.js';
export {
  type CompleteBody,
  type ComponentHealthJson,
  completeBody,
  DIAGNOSTICS_TYPE,
  type DiagnosticsBody,
  type DiagnosticsPayload,
  diagnosticsBody,
  discoveryResponse,
  type ModuleStatusJson,
  type NodeDiscoveryJson,
  type NodeHealthJson,
  type NodeRouteJson,
  type NodeStatusJson,
  nodeHealthResponse,
  nodeStatusResponse,
  type PairedDeviceJson,
  type PrepareBody,
  type PreparedPairingJson,
  pairedDeviceResponse,
  prepareBody,
  preparedPairingResponse,
  type RetiredNodeKeyJson,
  type SignedDiagnosticsJson,
  type StoreAddonStatusJson,
  signedDiagnosticsResponse,
} from './wire/node.js';
export { PROBLEM_SCHEMA_ID, type ProblemJson, problemSchema } from './wire/problem.js';
export {
  type ScimTokenCreateBody,
  type ScimTokenCreatedJson,
  type ScimTokenJson,
  type ScimTokenListJson,
  type ScimTokenParams,
  type ScimTokenRevokedJson,
  scimTokenCreateBody,
  scimTokenCreatedResponse,
  scimTokenListResponse,
  scimTokenParams,
  scimTokenRevokedResponse,
  scimTokenSchema,
} from './wire/scim-tokens.js';
export {
  type GroupJson,
  type GroupListJson,
  type GroupListQuery,
  groupListQuery,
  groupListResponse,
  groupSchema,
  type UserChangeBody,
  type UserCreateBody,
  type UserJson,
  type UserListQuery,
  type UserPageJson,
  type UserParams,
  type UserRemovedJson,
  type UserResponseJson,
  type UserStatusJson,
  userChangeBody,
  userCreateBody,
  userListQuery,
  userPageSchema,
  userParams,
  userRemovedSchema,
  userResponse,
  userSchema,
  userStatusResponse,
} from './wire/users.js';
export type { WireType } from './wire/wire-type.js';
export { deviceToJson, sessionToJson } from './wire.js';

export { ApiError, ApiUnreachableError } from './api-error.js';
export { assertMayCarryBearer, InsecureBearerUrlError, mayCarryBearer } from './bearer-transport.js';
export {
  type CredentialContext,
  type CredentialStore,
  type Credentials,
  contextNameFor,
  createCredentialStore,
  credentialsFromTokenPair,
  defaultCredentialsPath,
  defaultDeviceKeyPath,
  isContextName,
} from './credential-store.js';
export { type DeviceKey, generateDeviceKey, loadDeviceKey } from './device-key.js';
export { createDpopProof, type DpopProofInput } from './dpop-proof.js';
export { CLIENT_FAILURE_CODES, CLIENT_HTTP_ERROR_CLASSES, type ClientFailureCode } from './failure-codes.js';
export { login } from './login.js';
export {
  type AuditEventJson,
  type AuditPageJson,
  type ChallengeJson,
  type ConsoleLinkJson,
  createApplicationClient,
  createManagementClient,
  createSignInClient,
  type GroupJson,
  type GroupListJson,
  type ManagementClient,
  type ManagementClientOptions,
  SIGN_IN_PREFIXES,
  type SignInClient,
  type UserJson,
  type UserPageJson,
  type UserQuery,
  type UserRemovedJson,
  type UserResponseJson,
  type UserStatusJson,
} from './management-client.js';
export {
  type DeviceSession,
  type ManagementSession,
  type ManagementSessionOptions,
  openManagementSession,
  openSession,
} from './management-session.js';
export {
  checkedNodeId,
  createNodeClient,
  type NodeClient,
  type NodeClientOptions,
  type NodeDiscoveryJson,
  type NodeHealthJson,
  NodeIdentityError,
  type NodeRouteJson,
  type NodeStatusJson,
  NodeUnreachableError,
  type PreparedPairingJson,
  pairDevice,
  type SignedDiagnosticsJson,
  verifyDiagnostics,
} from './node-client.js';

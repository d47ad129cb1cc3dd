export { ApiError, ApiUnreachableError } from './api-error.js';
export { assertMayCarryBearer, InsecureBearerUrlError, mayCarryBearer } from './bearer-transport.js';
export {
  type CredentialStore,
  type Credentials,
  createCredentialStore,
  credentialsFromTokenPair,
  defaultCredentialsPath,
  defaultDeviceKeyPath,
} from './credential-store.js';
export { type DeviceKey, generateDeviceKey, loadDeviceKey } from './device-key.js';
export { login } from './login.js';
export {
  type AuditEventJson,
  type AuditPageJson,
  type ChallengeJson,
  createManagementClient,
  type ManagementClient,
  type ManagementClientOptions,
} from './management-client.js';
export { type ManagementSession, type ManagementSessionOptions, openManagementSession } from './management-session.js';
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

export { buildNodeApp, type NodeAppOptions } from './app.js';
export {
  type ComponentStatus,
  ed25519KeyProvider,
  type ModuleStatusJson,
  type NodeProvider,
  type StoreAddonStatusJson,
} from './components.js';
export {
  DIAGNOSTICS_TYPE,
  type DiagnosticsPayload,
  diagnosticsPayload,
  type SignedDiagnosticsJson,
  signDiagnostics,
} from './diagnostics.js';
export type { DiscoveryJson } from './discovery-routes.js';
export type { ComponentHealthJson, NodeHealthJson } from './health-routes.js';
export { createNodeIdentity, currentIdentity, type NodeIdentity, type NodeIdentitySource } from './identity.js';
export { DEFAULT_NODE_LISTEN, NODE_LISTEN_ENV, parseNodeListenAddress, resolveNodeListen } from './listen-address.js';
export { NODE_API_VERSION, NODE_PATHS, NODE_ROUTES, type NodeRoute, type NodeRouteAuth } from './routes.js';
export type { NodeStatusJson } from './status-routes.js';

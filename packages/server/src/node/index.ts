export { buildNodeApp, type NodeAppOptions } from './app.js';
export { type ComponentStatus, ed25519KeyProvider, type NodeProvider } from './components.js';
export { diagnosticsPayload, signDiagnostics } from './diagnostics.js';
export { createNodeIdentity, type NodeIdentity } from './identity.js';
export { DEFAULT_NODE_LISTEN, NODE_LISTEN_ENV, parseNodeListenAddress, resolveNodeListen } from './listen-address.js';
export { NODE_API_VERSION, NODE_PATHS, NODE_ROUTES, type NodeRoute, type NodeRouteAuth } from './routes.js';

// The public API of @svc/server, by name: what the composition root (the `svc` CLI), the docs
// generator and the tests build the surfaces with. Route plugins, hooks and the HTTP hardening
// stay inside the package; its own tests import those from their modules.

// The application gateway (may bind a network address).
export {
  APPLICATION_AUTH_PREFIX,
  buildGatewayApp,
  INSUFFICIENT_SCOPE_CHALLENGE,
  isReservedPath,
  JWKS_PATH,
  RESERVED_PREFIX,
  upgradePrincipal,
} from './gateway/app.js';
export {
  type AssertionRequest,
  type AssertionSigner,
  type AssertionSignerOptions,
  createAssertionSigner,
  svcIdentityHeaders,
} from './gateway/assertion.js';
// Module mode: application modules behind the gateway, after identity.
export {
  type AppModule,
  MODULE_HOST_DEFAULTS,
  type ModuleHost,
  ModuleHostError,
  type ModuleHostLog,
  type ModuleHostOptions,
  moduleHostNodeArgs,
  startModuleHost,
} from './gateway/module-host.js';
export { moduleHostAttach } from './gateway/modules.js';
export type {
  GatewayAppOptions,
  GatewayAttach,
  GatewayPolicy,
  UpstreamAttachOptions,
  UpstreamIdentityHeaders,
} from './gateway/options.js';
export { onUpgradeSessionEnd, SESSION_END_CLOSE_GRACE_MS } from './gateway/session-watch.js';
// Upstream mode: every authenticated request proxied to the application.
export { DEFAULT_UPSTREAM_TIMEOUTS, type UpstreamTimeouts, upstreamAttach } from './gateway/upstream.js';
export {
  APPLICATION_CONNECTION_LIMITS,
  type ConnectionLimits,
  type ConnectionPlan,
  DEFAULT_UPSTREAM_CONNECTIONS,
  DESCRIPTOR_RESERVE,
  type DescriptorLimit,
  descriptorsForDefaults,
  MANAGEMENT_CONNECTION_LIMITS,
  METRICS_CONNECTION_LIMITS,
  NODE_CONNECTION_LIMITS,
  openDescriptors,
  parseDescriptorLimit,
  planConnectionLimits,
  readDescriptorLimit,
} from './http/connection-limits.js';
export { ListenAddressError } from './http/listen-address-error.js';
export { parseIPv4 } from './http/loopback.js';
// Listeners that may bind a network address (the node surface, the application gateway).
export {
  APP_LISTEN_ENV,
  APP_LISTEN_NAMES,
  cleartextExposed,
  isLoopbackHost,
  type NetworkListenNames,
  parseNetworkListenAddress,
  resolveAppListen,
  resolveNetworkListen,
} from './http/network-listen.js';
// The management API (loopback only).
export { buildManagementApp, type ManagementAppOptions } from './management/app.js';
export {
  DEFAULT_MANAGEMENT_LISTEN,
  MANAGEMENT_LISTEN_ENV,
  parseListenAddress,
  resolveManagementListen,
} from './management/listen-address.js';
// The metrics listener and the instruments behind it.
export { buildMetricsApp, type MetricsAppOptions } from './metrics/app.js';
export { instrumentStore } from './metrics/instrument-store.js';
export { METRICS_LISTEN_ENV, type MetricsListen, resolveMetricsListen } from './metrics/listen-address.js';
export { type BearerCacheCounters, createServiceMetrics, type MetricsSources, type ServiceMetrics } from './metrics/metrics.js';
// The node surface (may bind a network address).
export { buildNodeApp, type NodeAppOptions } from './node/app.js';
export { type ComponentStatus, ed25519KeyProvider, type NodeProvider, providerPackageOf } from './node/components.js';
export { createNodeIdentity, type NodeIdentity } from './node/identity.js';
export { DEFAULT_NODE_LISTEN, NODE_LISTEN_ENV, parseNodeListenAddress, resolveNodeListen } from './node/listen-address.js';
export { NODE_ROUTES, type NodeRoute, type NodeRouteAuth } from './node/routes.js';

// The OpenAPI document of both surfaces.
export { buildOpenApiDocument, type OpenApiDocument, renderOpenApiDocument } from './openapi/document.js';
export { OPENAPI_PATH } from './openapi/route.js';

// The public API of @svc/server: what a program that runs svc's surfaces needs (the composition
// root, the docs generator, the bench), by name, and the types of their options. Route plugins,
// hooks, the HTTP hardening, the address parsers and the default caps stay inside the package;
// its own tests import those from their modules.

export { SERVER_FAILURE_CODES, type ServerFailureCode } from './failure-codes.js';
// The application gateway (may bind a network address) and the ways the application is attached.
export { buildGatewayApp } from './gateway/app.js';
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
  type ModuleHost,
  ModuleHostError,
  type ModuleHostLog,
  type ModuleHostOptions,
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
// Upstream mode: every authenticated request proxied to the application.
export { type GatewayRouting, gatewayRouting, routeOf } from './gateway/routing.js';
export { type UpstreamTimeouts, upstreamAttach } from './gateway/upstream.js';
// Connection caps of every listener, sized to the process's descriptor limit.
export {
  type ConnectionLimits,
  type ConnectionPlan,
  DESCRIPTOR_RESERVE,
  type DescriptorLimit,
  descriptorsForDefaults,
  openDescriptors,
  planConnectionLimits,
  readDescriptorLimit,
} from './http/connection-limits.js';
// Where each listener binds: flag, environment, configuration, default; refused before binding.
export { ListenAddressError } from './http/listen-address-error.js';
export { cleartextExposed, isLoopbackHost, resolveAppListen } from './http/network-listen.js';
// The management API (loopback only).
export { buildManagementApp, type ManagementAppOptions } from './management/app.js';
export type { ConsoleOptions } from './management/console/console-routes.js';
export { resolveManagementListen } from './management/listen-address.js';
// The metrics listener and the instruments behind it.
export { buildMetricsApp, type MetricsAppOptions } from './metrics/app.js';
export { instrumentStore } from './metrics/instrument-store.js';
export { type MetricsListen, resolveMetricsListen } from './metrics/listen-address.js';
export { type BearerCacheCounters, createServiceMetrics, type MetricsSources, type ServiceMetrics } from './metrics/metrics.js';
// The node surface (may bind a network address) and the node's key.
export { buildNodeApp, type NodeAppOptions } from './node/app.js';
export { type ComponentStatus, ed25519KeyProvider, type NodeProvider } from './node/components.js';
export { createNodeIdentity, type NodeIdentity } from './node/identity.js';
export { resolveNodeListen } from './node/listen-address.js';

// The OpenAPI document of the surfaces, as `npm run docs` writes it.
export { renderOpenApiDocument } from './openapi/document.js';

// The house layout's brand (`:svc/app-brand`), for the runtime to hand to the gateway's pages.
export { DEFAULT_BRAND, type PageBrand } from './pages/layout.js';

import type { AuditShippingHealth } from '@svc/core';
import type { FastifyInstance } from 'fastify';
import type { FailureLimiter } from '../http/failure-limiter.js';
import { decoratePrincipal } from '../http/principal.js';
import type { ComponentStatus } from './components.js';
import { diagnosticsRoutes } from './diagnostics-routes.js';
import { discoveryRoutes } from './discovery-routes.js';
import { healthRoutes } from './health-routes.js';
import { currentIdentity, type NodeIdentitySource } from './identity.js';
import { pairingRoutes } from './pairing-routes.js';
import type { NodeRouteOptions } from './route-options.js';
import { statusRoutes } from './status-routes.js';

/** What {@link registerNodeRoutes} needs besides the shared route options. */
export interface NodeRoutesOptions extends Omit<NodeRouteOptions, 'identity'> {
  readonly identity: NodeIdentitySource;
  readonly components: () => ComponentStatus | Promise<ComponentStatus>;
  readonly checkTimeoutMs: number;
  readonly limiter: FailureLimiter;
  /** How audit shipping is doing (null when no sink is configured); default none. */
  readonly auditShipping?: () => AuditShippingHealth | null;
}

/**
 * Registers every route of the node surface on `app`: the one list both the running surface
 * and the OpenAPI generator use.
 *
 * @example
 * await registerNodeRoutes(app, { deps, identity, providers, components, checkTimeoutMs: 2000, limiter });
 */
export async function registerNodeRoutes(app: FastifyInstance, opts: NodeRoutesOptions): Promise<void> {
  const source = opts.identity;
  const base = { deps: opts.deps, identity: () => currentIdentity(source), providers: opts.providers };
  decoratePrincipal(app);
  await app.register(discoveryRoutes, base);
  await app.register(healthRoutes, { ...base, checkTimeoutMs: opts.checkTimeoutMs, auditShipping: opts.auditShipping ?? (() => null) });
  await app.register(statusRoutes, { ...base, components: opts.components });
  await app.register(diagnosticsRoutes, base);
  await app.register(pairingRoutes, { ...base, limiter: opts.limiter });
}

import type { AuditShippingHealth, AuthDeps } from '@svc/core';
import type { FailureLimiter } from '../http/failure-limiter.js';
import type { ComponentStatus, NodeProvider } from './components.js';
import type { NodeIdentity } from './identity.js';

/** What every node route plugin receives. */
export interface NodeRouteOptions {
  readonly deps: AuthDeps;
  /** Read once per request: the key may be rotated while the node runs. */
  readonly identity: () => NodeIdentity;
  readonly providers: readonly NodeProvider[];
}

/** What the status route receives besides: the composition root's view of the installed components. */
export interface StatusRouteOptions extends NodeRouteOptions {
  readonly components: () => ComponentStatus | Promise<ComponentStatus>;
}

/** What the health route receives besides: how long a check may take before it counts as failed. */
export interface HealthRouteOptions extends NodeRouteOptions {
  readonly checkTimeoutMs: number;
  /** How audit shipping is doing, read per request; null when no sink is configured. */
  readonly auditShipping: () => AuditShippingHealth | null;
}

/** What the pairing routes receive besides: the per-client counter of failed completions. */
export interface PairingRouteOptions extends NodeRouteOptions {
  readonly limiter: FailureLimiter;
}

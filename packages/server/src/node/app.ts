import type { AuditShippingHealth, AuthDeps, ProviderHandle } from '@svc/core';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { type ConnectionLimits, installConnectionLimits, NODE_CONNECTION_LIMITS } from '../http/connection-limits.js';
import { installDpopNonces } from '../http/dpop-nonce.js';
import { createFailureLimiter } from '../http/failure-limiter.js';
import { hardenSurface } from '../http/harden.js';
import { serverOptions } from '../http/server-options.js';
import { instrumentHttp } from '../metrics/instrument-http.js';
import type { ServiceMetrics } from '../metrics/metrics.js';
import { type ComponentStatus, ed25519KeyProvider, type NodeProvider, providerPackageOf } from './components.js';
import type { NodeIdentitySource } from './identity.js';
import { registerNodeRoutes } from './route-plugins.js';
import { NODE_ROUTES } from './routes.js';

/** Options of {@link buildNodeApp}. */
export interface NodeAppOptions {
  /** Store, clock, randomness, log, project id and settings of the auth module (shared with the management API). */
  deps: AuthDeps;
  /** The node's Ed25519 identity (see {@link createNodeIdentity}), or a function read per request when its key may be rotated while it runs. */
  identity: NodeIdentitySource;
  /** The installed components as the composition root knows them; called on every status request. */
  components: () => ComponentStatus | Promise<ComponentStatus>;
  /** The authentication providers to report and health-check. Default: the built-in Ed25519 provider. */
  providers?: readonly NodeProvider[];
  /**
   * The provider packages the service runs confined (`startProviderHost` of `@svc/provider-host`):
   * listed by status (package, version, signer, verification, realms), health-checked with their
   * own `health()`, and named in discovery as data. They add no route to this surface.
   */
  providerPackages?: readonly ProviderHandle[];
  /** Failed pairing completions allowed per client IP and window. Default: 10 per 60 s. */
  pairingFailureLimit?: { readonly maxFailures?: number; readonly windowSeconds?: number };
  /** How long a health check may take before it counts as failed. Default 2000 ms. */
  healthCheckTimeoutMs?: number;
  /** How audit shipping is doing, read per health request: a stall makes health degraded. None by default. */
  auditShipping?: () => AuditShippingHealth | null;
  /** A pino logger (passed to Fastify as `loggerInstance`, behind redaction), or no logging. */
  logger?: FastifyBaseLogger | false;
  /** Connection caps of this listener. Default {@link NODE_CONNECTION_LIMITS}: 256 in all, 32 per peer address. */
  connectionLimits?: ConnectionLimits;
  /** Where to count and time the requests this surface answers (see {@link instrumentHttp}); none by default. */
  metrics?: ServiceMetrics;
}

/**
 * Builds the node HTTP surface: discovery, health, status, signed diagnostics and device
 * pairing, with the shared hardening of every svc surface (problem+json errors, JSON-only
 * bodies of at most 64 KiB, `Cache-Control: no-store`, a close that drains in-flight requests).
 * This surface may listen on a network address, so the DNS-rebinding guard applies only to the
 * requests that arrive on a loopback address, management-realm bearer tokens are accepted only
 * from loopback peers, and its connections are capped in total and per peer so it cannot
 * starve the management API of the same process. Exactly the
 * routes of {@link NODE_ROUTES} are installed (checked here), so discovery cannot advertise a
 * route that does not exist or miss one that does; anything else is `404 not_found`.
 *
 * @throws {TypeError} when the installed routes differ from {@link NODE_ROUTES} (a programming mistake).
 * @example
 * const app = await buildNodeApp({ deps, identity: createNodeIdentity(pem), components: () => status });
 * await app.listen(resolveNodeListen({ flag: args.listen, env: process.env.SVC_NODE_LISTEN, config: project.config.nodeListen }));
 */
export async function buildNodeApp(opts: NodeAppOptions): Promise<FastifyInstance> {
  const { deps, identity, components } = opts;
  const providers = [...(opts.providers ?? [ed25519KeyProvider]), ...(opts.providerPackages ?? []).map(providerPackageOf)];
  const names = providers.map((p) => p.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice !== undefined) throw new TypeError(`two providers are named ${twice}: status and health could not tell them apart`);
  const app: FastifyInstance = Fastify(serverOptions(opts.logger));
  hardenSurface(app, { loopbackOnly: false });
  installDpopNonces(app, opts.deps);
  installConnectionLimits(app, opts.connectionLimits ?? NODE_CONNECTION_LIMITS);
  if (opts.metrics !== undefined) instrumentHttp(app, opts.metrics, 'node');

  const installed: string[] = [];
  app.addHook('onRoute', (route) => {
    for (const m of Array.isArray(route.method) ? route.method : [route.method]) {
      if (m !== 'HEAD') installed.push(`${m} ${route.url}`);
    }
  });

  const limiter = createFailureLimiter({
    clock: deps.clock,
    store: deps.store,
    scope: 'pairing',
    maxFailures: opts.pairingFailureLimit?.maxFailures ?? 10,
    windowSeconds: opts.pairingFailureLimit?.windowSeconds ?? 60,
  });
  await registerNodeRoutes(app, {
    deps,
    identity,
    providers,
    components,
    checkTimeoutMs: opts.healthCheckTimeoutMs ?? 2000,
    limiter,
    auditShipping: opts.auditShipping ?? (() => null),
  });

  const advertised = NODE_ROUTES.map((r) => `${r.method} ${r.path}`).sort();
  if (installed.sort().join('\n') !== advertised.join('\n')) {
    await app.close();
    throw new TypeError(`the node surface installed [${installed.join(', ')}] but advertises [${advertised.join(', ')}]`);
  }
  return app;
}

import { type AuditShippingHealth, AuthError, type NodeHealthFacts, nodeHealthVerdict } from '@svc/core';
import type { Store } from '@svc/core/store';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { installConnectionLimits, METRICS_CONNECTION_LIMITS } from '../http/connection-limits.js';
import { hardenSurface } from '../http/harden.js';
import { serverOptions } from '../http/server-options.js';
import { ed25519KeyProvider, type NodeProvider } from '../node/components.js';
import type { ServiceMetrics } from './metrics.js';

/** Options of {@link buildMetricsApp}. */
export interface MetricsAppOptions {
  /** The registry to expose on `GET /metrics`. */
  metrics: ServiceMetrics;
  /** The open control store: `GET /readyz` answers 200 only while its `ping()` succeeds. */
  store: Pick<Store, 'ping'>;
  /** How audit shipping is doing: `GET /readyz` answers 503 while it is stalled. None by default. */
  auditShipping?: () => AuditShippingHealth | null;
  /**
   * The node's own providers, checked by `GET /readyz` as node health checks them (a failed
   * device-key provider makes the node not ready). Default: the built-in Ed25519 provider.
   * Provider packages are not given here: their failure is an outside outage, never unreadiness.
   */
  providers?: readonly NodeProvider[];
  /** Whether the listener is on a network address (then the loopback Host-header guard is off). */
  exposed: boolean;
  /** How long the readiness ping may take before it counts as failed. Default 2000 ms. */
  readinessTimeoutMs?: number;
  /** A pino logger, or no logging. */
  logger?: FastifyBaseLogger | false;
}

/** The routes of the metrics listener. */
export const METRICS_ROUTES = ['GET /metrics', 'GET /livez', 'GET /readyz'] as const;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Builds the metrics listener: `GET /metrics` (Prometheus text exposition), `GET /livez`
 * (200 while the process answers HTTP) and `GET /readyz`, which applies core's
 * `nodeHealthVerdict`: 200 when the control store, which the service opened, verified and
 * migrated before any listener started, answers `ping()`, audit shipping is not stalled and the
 * node's own providers (the built-in Ed25519 key provider) pass their checks; 503
 * `store_unavailable` when the store does not answer; else 503
 * `{"status":"not_ready","audit_shipping"?:{...},"providers"?:[...]}`, a report like node health's. No authentication: it carries aggregates only, never per-user
 * labels, and binds loopback unless `project.edn` says otherwise. On a loopback address the
 * Host-header guard of the management API applies (no DNS rebinding).
 *
 * @example
 * const app = await buildMetricsApp({ metrics, store, exposed: false });
 * await app.listen({ host: '127.0.0.1', port: 9464 });
 */
export async function buildMetricsApp(opts: MetricsAppOptions): Promise<FastifyInstance> {
  const { metrics, store } = opts;
  const timeoutMs = opts.readinessTimeoutMs ?? 2000;
  const app: FastifyInstance = Fastify(serverOptions(opts.logger));
  hardenSurface(app, { loopbackOnly: !opts.exposed });
  // Capped like every listener: uncapped, a flood of it took every descriptor of the process.
  installConnectionLimits(app, METRICS_CONNECTION_LIMITS);
  app.get('/metrics', async (_req, reply) => {
    const text = await metrics.registry.metrics();
    return reply.type(metrics.registry.contentType).send(text);
  });
  app.get('/livez', async () => ({ status: 'live' }));
  const providers = opts.providers ?? [ed25519KeyProvider];
  app.get('/readyz', async (req, reply) => {
    try {
      await withTimeout(store.ping(), timeoutMs);
    } catch (err) {
      req.log.error({ err }, 'readiness: the control store does not answer');
      throw new AuthError('store_unavailable', 'the control store cannot be reached');
    }
    const checked = await Promise.all(
      providers.map(async (p) => {
        try {
          await withTimeout(p.check(), timeoutMs);
          return { name: p.name, kind: p.kind, status: 'ok' as const };
        } catch (err) {
          req.log.error({ err, component: `provider ${p.name}` }, 'readiness: a provider check failed');
          return { name: p.name, kind: p.kind, status: 'failed' as const };
        }
      }),
    );
    const shipping = opts.auditShipping?.() ?? null;
    const facts: NodeHealthFacts = {
      store: { status: 'ok' },
      audit_shipping: shipping === null ? undefined : { status: shipping.stalled ? 'failed' : 'ok' },
      providers: checked,
    };
    // The one rule (core's nodeHealthVerdict), which the container HEALTHCHECK mirrors.
    if (nodeHealthVerdict(facts).healthy) return { status: 'ready' };
    const failedProviders = checked.filter((p) => p.status === 'failed');
    return reply.code(503).send({
      status: 'not_ready',
      ...(shipping?.stalled === true ? { audit_shipping: { status: 'failed', code: shipping.code } } : {}),
      ...(failedProviders.length === 0 ? {} : { providers: failedProviders }),
    });
  });
  return app;
}

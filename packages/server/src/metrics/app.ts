import { type AuditShippingHealth, AuthError, type Store } from '@svc/core';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { installConnectionLimits, METRICS_CONNECTION_LIMITS } from '../http/connection-limits.js';
import { hardenSurface } from '../http/harden.js';
import { serverOptions } from '../http/server-options.js';
import type { ServiceMetrics } from './metrics.js';

/** Options of {@link buildMetricsApp}. */
export interface MetricsAppOptions {
  /** The registry to expose on `GET /metrics`. */
  metrics: ServiceMetrics;
  /** The open control store: `GET /readyz` answers 200 only while its `ping()` succeeds. */
  store: Pick<Store, 'ping'>;
  /** How audit shipping is doing: `GET /readyz` answers 503 while it is stalled. None by default. */
  auditShipping?: () => AuditShippingHealth | null;
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
 * (200 while the process answers HTTP) and `GET /readyz` (200 when the control store, which the
 * service opened, verified and migrated before any listener started, answers `ping()`; 503
 * `store_unavailable` otherwise; and 503 `{"status":"not_ready","audit_shipping":{...}}` while
 * audit shipping is stalled, a report like node health's). No authentication: it carries aggregates only, never per-user
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
  app.get('/readyz', async (req, reply) => {
    try {
      await withTimeout(store.ping(), timeoutMs);
    } catch (err) {
      req.log.error({ err }, 'readiness: the control store does not answer');
      throw new AuthError('store_unavailable', 'the control store cannot be reached');
    }
    // A node whose sinks fall behind the trail is not ready: the audit copy is part of its job.
    const shipping = opts.auditShipping?.() ?? null;
    if (shipping?.stalled === true) {
      return reply.code(503).send({ status: 'not_ready', audit_shipping: { status: 'failed', code: shipping.code } });
    }
    return { status: 'ready' };
  });
  return app;
}

import type { AuditShippingHealth } from '@svc/core';
import type { Store } from '@svc/core/store';
import { type BearerCacheCounters, buildMetricsApp, createServiceMetrics, type MetricsListen, type ServiceMetrics } from '@svc/server';
import { listenOn } from './listen-on.js';
import type { Surface } from './surface.js';

/** The counters of a store's bearer-check cache, when it keeps one (the SQLite store does: `bearerCache`). */
function bearerCacheOf(store: Store | undefined): BearerCacheCounters | undefined {
  const counters = (store as { bearerCache?: unknown } | undefined)?.bearerCache as Partial<BearerCacheCounters> | undefined;
  return typeof counters?.hits === 'number' && typeof counters.misses === 'number'
    ? { hits: counters.hits, misses: counters.misses }
    : undefined;
}

/** The metrics listener as a surface, with the registry the other surfaces record into. */
export interface MetricsSurface extends Surface {
  readonly metrics: ServiceMetrics;
}

/**
 * The Prometheus metrics and probes listener (`/metrics`, `/livez`, `/readyz`) as a surface of
 * the foreground service. Its registry exists before any surface starts, so the management API
 * and the node surface record into it; the store it reports on is the one the service opened.
 * Start it after the other surfaces, so readiness is only answered once they listen. On a
 * network address (only from `:svc/metrics-listen`) it warns that anyone who reaches it reads
 * the service's counters.
 *
 * @example
 * const m = metricsSurface({ host: '127.0.0.1', port: 9464, exposed: false }, { flag: '--metrics-listen' });
 */
export function metricsSurface(listen: MetricsListen, opts: { readonly flag?: string | undefined }): MetricsSurface {
  let store: Store | undefined;
  let auditShipping: () => AuditShippingHealth | null = () => null;
  const metrics = createServiceMetrics({
    store: {
      auditHead: async () => (store === undefined ? null : store.auditHead()),
    },
    bearerCache: () => bearerCacheOf(store),
    auditShipping: () => auditShipping(),
  });
  return {
    kind: 'metrics',
    metrics,
    async start(ctx) {
      const { deps, log } = ctx;
      store = deps.store;
      auditShipping = ctx.auditShipping;
      const app = await buildMetricsApp({ metrics, store: deps.store, auditShipping, exposed: listen.exposed, logger: log });
      const url = await listenOn(app, listen, { what: 'the metrics listener', flag: opts.flag, env: 'SVC_METRICS_LISTEN' });
      if (listen.exposed) {
        log.warn(
          { event: 'metrics_exposed', url },
          'the metrics listener is on a network address (from :svc/metrics-listen): anyone who reaches it reads the service counters and probes; restrict it to the scraper with a firewall or network policy',
        );
      }
      log.info({ event: 'listening', surface: 'metrics', url }, 'metrics listener listening');
      return {
        url,
        close: () => app.close(),
      };
    },
  };
}

export { buildMetricsApp, METRICS_ROUTES, type MetricsAppOptions } from './app.js';
export { instrumentHttp, UNMATCHED_ROUTE } from './instrument-http.js';
export { instrumentStore } from './instrument-store.js';
export { isLoopbackHost, METRICS_LISTEN_ENV, type MetricsListen, resolveMetricsListen } from './listen-address.js';
export { type BearerCacheCounters, createServiceMetrics, type MetricsSources, type ServiceMetrics } from './metrics.js';

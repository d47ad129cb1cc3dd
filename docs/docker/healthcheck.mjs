// The container HEALTHCHECK: node only (the slim image has no curl). Exits 0 when the node
// surface answers GET /edge/0-alpha/health with 200 (store and providers ok), 1 otherwise
// (503 degraded, no answer within 4 s, refused connection).
//
// It probes the node surface on loopback at the port of SVC_NODE_LISTEN (default 9091); when
// the node surface is off (SVC_NODE_LISTEN=off) it probes the management API's /health at
// SVC_MANAGEMENT_LISTEN (default 127.0.0.1:9090). When SVC_METRICS_LISTEN sets the metrics
// listener, it probes that listener's readiness, /readyz (200 only while the control store,
// opened, verified and migrated, answers). SVC_HEALTH_URL overrides all of them.
const DEFAULT_NODE = '127.0.0.1:9091';
const DEFAULT_MANAGEMENT = '127.0.0.1:9090';

/** `host:port` or `[v6]:port` to a loopback URL base on the same port and address family. */
function loopbackBase(listen) {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(listen.trim());
  if (m === null) throw new Error(`cannot read the address ${JSON.stringify(listen)} (expected HOST:PORT)`);
  const v6 = m[1] !== undefined;
  const host = v6 ? m[1] : m[2];
  const unspecified = host === '' || host === '0.0.0.0' || host === '::';
  const loopback = unspecified ? (v6 ? '[::1]' : '127.0.0.1') : v6 ? `[${host}]` : host;
  return `http://${loopback}:${m[3]}`;
}

function target(env) {
  if (env.SVC_HEALTH_URL) return env.SVC_HEALTH_URL;
  const metrics = env.SVC_METRICS_LISTEN;
  if (metrics && metrics.trim().toLowerCase() !== 'off') return `${loopbackBase(metrics)}/readyz`;
  const node = env.SVC_NODE_LISTEN || DEFAULT_NODE;
  if (node !== 'off') return `${loopbackBase(node)}/edge/0-alpha/health`;
  return `${loopbackBase(env.SVC_MANAGEMENT_LISTEN || DEFAULT_MANAGEMENT)}/health`;
}

try {
  const url = target(process.env);
  const res = await fetch(url, { signal: AbortSignal.timeout(4000) });
  await res.arrayBuffer();
  if (res.status !== 200) {
    console.error(`unhealthy: ${url} answered ${res.status}`);
    process.exit(1);
  }
  process.exit(0);
} catch (err) {
  console.error(`unhealthy: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}

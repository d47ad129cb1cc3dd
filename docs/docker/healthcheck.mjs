// The container HEALTHCHECK: node only (the slim image has no curl). Exits 0 when the node is
// healthy, 1 otherwise (no answer within 4 s, refused connection, an unreadable answer).
//
// Healthy means what /readyz means: this node can do its job. Its own parts are the control
// store, audit shipping (when :svc/audit-sinks is set) and the built-in device-key provider. A
// provider package that reports `failed` is usually an outside outage (its IdP is down): node
// health then answers 503 degraded naming it, but restarting or rerouting this container would
// not bring the IdP back, so the check stays healthy and only says which provider failed.
//
// It probes the node surface on loopback at the port of SVC_NODE_LISTEN (default 9091),
// GET /edge/0-alpha/health, and reads its body on a 503. When the node surface is off
// (SVC_NODE_LISTEN=off) it probes the management API's /health at SVC_MANAGEMENT_LISTEN
// (default 127.0.0.1:9090; the store only). When SVC_METRICS_LISTEN sets the metrics listener,
// it probes that listener's readiness, /readyz (the store and audit shipping; 200 or not).
// SVC_HEALTH_URL overrides all of them (200 or not).
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

/** Where to ask, and whether the answer is node health (whose 503 body is read). */
function target(env) {
  if (env.SVC_HEALTH_URL) return { url: env.SVC_HEALTH_URL, nodeHealth: false };
  const metrics = env.SVC_METRICS_LISTEN;
  if (metrics && metrics.trim().toLowerCase() !== 'off') return { url: `${loopbackBase(metrics)}/readyz`, nodeHealth: false };
  const node = env.SVC_NODE_LISTEN || DEFAULT_NODE;
  if (node !== 'off') return { url: `${loopbackBase(node)}/edge/0-alpha/health`, nodeHealth: true };
  return { url: `${loopbackBase(env.SVC_MANAGEMENT_LISTEN || DEFAULT_MANAGEMENT)}/health`, nodeHealth: false };
}

/**
 * The provider packages a degraded node health blames, when nothing of the node's own failed
 * (store, audit shipping, the built-in device-key provider); null when the node itself is
 * unhealthy or the body is not node health.
 */
function outsideFailures(text) {
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    return null;
  }
  if (body?.store?.status !== 'ok' || body.audit_shipping?.status === 'failed' || !Array.isArray(body.providers)) return null;
  const failed = body.providers.filter((p) => p?.status !== 'ok');
  if (failed.length === 0 || failed.some((p) => p?.kind === 'device-key')) return null;
  return failed.map((p) => String(p.name));
}

try {
  const { url, nodeHealth } = target(process.env);
  const res = await fetch(url, { signal: AbortSignal.timeout(4000) });
  const text = await res.text();
  if (res.status === 200) process.exit(0);
  const outside = nodeHealth && res.status === 503 ? outsideFailures(text) : null;
  if (outside !== null) {
    console.log(`healthy: provider ${outside.join(', ')} reports failed (an outside dependency such as its IdP; this node is fine)`);
    process.exit(0);
  }
  console.error(`unhealthy: ${url} answered ${res.status}`);
  process.exit(1);
} catch (err) {
  console.error(`unhealthy: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}

// The container HEALTHCHECK: node only (the slim image has no curl). Exits 0 when the node is
// healthy, 1 otherwise (no answer within 4 s, refused connection, an unreadable answer).
//
// Healthy means what /readyz means, one rule (core's nodeHealthVerdict, mirrored below): the
// node is unhealthy when its control store fails, audit shipping is stalled (when
// :svc/audit-sinks is set) or the built-in device-key provider fails. A provider package that
// reports `failed` is usually an outside outage (its IdP is down): node health then answers 503
// degraded naming it, but restarting or rerouting this container would not bring the IdP back,
// so the check stays healthy and only says which provider failed; /readyz stays 200 then too.
//
// When SVC_METRICS_LISTEN sets the metrics listener, it simply asks that listener's /readyz
// (200 or not), which applies the rule itself. Otherwise it probes the node surface on loopback
// at the port of SVC_NODE_LISTEN (default 9091), GET /edge/0-alpha/health, and applies the rule
// to its body on a 503. When the node surface is off too (SVC_NODE_LISTEN=off) it probes the
// management API's /health at SVC_MANAGEMENT_LISTEN (default 127.0.0.1:9090; the store only).
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
 * The one rule of what makes a node unhealthy, mirrored from core's `nodeHealthVerdict`
 * (packages/core/src/node-health-verdict.ts; this file runs alone in the image and cannot import
 * it; a test feeds both the same bodies and a real /readyz): unhealthy when the store failed,
 * audit shipping is stalled, or a device-key provider (the built-in Ed25519 check) failed. A
 * failed provider package is an outside outage. Returns `{ healthy, failed, outside }`, or null
 * when the body is not node health.
 */
function nodeHealthVerdict(body) {
  if (typeof body !== 'object' || body === null || typeof body.store !== 'object' || !Array.isArray(body.providers)) return null;
  const failed = [];
  const outside = [];
  if (body.store?.status !== 'ok') failed.push('store');
  if (body.audit_shipping !== undefined && body.audit_shipping?.status !== 'ok') failed.push('audit_shipping');
  for (const p of body.providers) {
    if (p?.status === 'ok') continue;
    if (p?.kind === 'device-key') failed.push(`provider ${p?.name}`);
    else outside.push(String(p?.name));
  }
  return { healthy: failed.length === 0, failed, outside };
}

/** The verdict on a degraded node health answer: healthy only when nothing of the node's own failed. */
function verdictOf(text) {
  try {
    return nodeHealthVerdict(JSON.parse(text));
  } catch {
    return null;
  }
}

try {
  const { url, nodeHealth } = target(process.env);
  const res = await fetch(url, { signal: AbortSignal.timeout(4000) });
  const text = await res.text();
  if (res.status === 200) process.exit(0);
  const verdict = nodeHealth && res.status === 503 ? verdictOf(text) : null;
  if (verdict?.healthy === true && verdict.outside.length > 0) {
    console.log(
      `healthy: provider ${verdict.outside.join(', ')} reports failed (an outside dependency such as its IdP; this node is fine)`,
    );
    process.exit(0);
  }
  const why = verdict !== null && verdict.failed.length > 0 ? ` (${verdict.failed.join(', ')} failed)` : '';
  console.error(`unhealthy: ${url} answered ${res.status}${why}`);
  process.exit(1);
} catch (err) {
  console.error(`unhealthy: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}

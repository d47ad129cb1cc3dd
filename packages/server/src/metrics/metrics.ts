import type { AuditEventDraft, AuditShippingHealth } from '@svc/core';
import type { Store } from '@svc/core/store';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** Hit and miss counts of a store's bearer-check cache, for stores that keep one. */
export interface BearerCacheCounters {
  readonly hits: number;
  readonly misses: number;
}

/** What the metrics read from the store at scrape time. */
export interface MetricsSources {
  /** The store whose audit chain length is reported (read with `auditHead()` at scrape time). */
  readonly store: Pick<Store, 'auditHead'>;
  /** The bearer-check cache's counters, when the store has one. */
  readonly bearerCache?: (() => BearerCacheCounters | undefined) | undefined;
  /** How audit shipping is doing (null or absent when no sink is configured): read at scrape time. */
  readonly auditShipping?: (() => AuditShippingHealth | null) | undefined;
}

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/**
 * The service's Prometheus metrics in one registry of their own. Labels are bounded sets
 * (surface, method, route pattern, status, error code, realm, event type, store operation):
 * never a user, device, session, token or raw URL.
 */
export interface ServiceMetrics {
  readonly registry: Registry;
  /** One answered HTTP request: `route` is the route pattern (`/v1/auth/devices/:id`), never the URL. */
  observeRequest(r: {
    readonly surface: string;
    readonly method: string;
    readonly route: string;
    readonly status: number;
    readonly seconds: number;
    readonly code?: string | undefined;
  }): void;
  /** One store operation, and whether it threw. */
  observeStoreOperation(operation: string, seconds: number, failed: boolean): void;
  /** One audit event the store committed: sign-ins, rotations, reuses, revocations and failures are counted from these. */
  recordAuditEvent(event: Pick<AuditEventDraft, 'type' | 'realm' | 'data'>): void;
}

const REVOCATION_REASONS = new Set(['logout', 'revoked_by_admin', 'revoked_by_owner', 'refresh_token_reused', 'device_removed']);

/**
 * Creates the metrics registry: request counts and latency per surface, route and status;
 * failures by error code; rate-limit refusals; domain counters (sign-ins, failed sign-ins,
 * rotations, grace rotations, reuses, revocations, every audit event by type); store operation
 * latency; the audit chain length and bearer-cache hits/misses (read at scrape time); and the
 * process metrics of prom-client (`process_*`, `nodejs_*`).
 *
 * @example
 * const metrics = createServiceMetrics({ store });
 * const text = await metrics.registry.metrics();
 */
export function createServiceMetrics(sources: MetricsSources): ServiceMetrics {
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry });

  const requests = new Counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests answered, by surface, method, route pattern and status',
    labelNames: ['surface', 'method', 'route', 'status'] as const,
    registers,
  });
  const duration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP request latency, by surface, method, route pattern and status',
    labelNames: ['surface', 'method', 'route', 'status'] as const,
    buckets: SECONDS,
    registers,
  });
  const failures = new Counter({
    name: 'svc_http_failures_total',
    help: 'HTTP requests refused with an application/problem+json error, by surface and error code',
    labelNames: ['surface', 'code'] as const,
    registers,
  });
  const rateLimited = new Counter({
    name: 'svc_rate_limit_refusals_total',
    help: 'requests refused with 429 rate_limited, by surface and route pattern',
    labelNames: ['surface', 'route'] as const,
    registers,
  });
  const signIns = new Counter({
    name: 'svc_signins_total',
    help: 'sessions created by a successful sign-in, by realm',
    labelNames: ['realm'] as const,
    registers,
  });
  const signInFailures = new Counter({
    name: 'svc_signin_failures_total',
    help: 'refused sign-ins (bad challenge or signature), by realm and reason',
    labelNames: ['realm', 'reason'] as const,
    registers,
  });
  const rotations = new Counter({
    name: 'svc_refresh_rotations_total',
    help: 'refresh-token rotations, by realm',
    labelNames: ['realm'] as const,
    registers,
  });
  const graceRotations = new Counter({
    name: 'svc_refresh_grace_rotations_total',
    help: 'refresh tokens answered again within the reuse grace interval, by realm',
    labelNames: ['realm'] as const,
    registers,
  });
  const reuses = new Counter({
    name: 'svc_refresh_reuses_total',
    help: 'retired refresh tokens presented again (each revokes its session), by realm',
    labelNames: ['realm'] as const,
    registers,
  });
  const revocations = new Counter({
    name: 'svc_session_revocations_total',
    help: 'sessions revoked, by realm and reason (logout, revoked_by_admin, refresh_token_reused, ...)',
    labelNames: ['realm', 'reason'] as const,
    registers,
  });
  const auditEvents = new Counter({
    name: 'svc_audit_events_total',
    help: 'audit events committed by this process, by type',
    labelNames: ['type'] as const,
    registers,
  });
  const storeDuration = new Histogram({
    name: 'svc_store_operation_duration_seconds',
    help: 'control store operation latency, by operation and outcome (ok, error)',
    labelNames: ['operation', 'outcome'] as const,
    buckets: SECONDS,
    registers,
  });
  new Gauge({
    name: 'svc_audit_chain_length',
    help: 'events in the audit chain (the sequence number of its head)',
    registers,
    async collect() {
      const head = await sources.store.auditHead();
      this.set(head?.seq ?? 0);
    },
  });
  new Gauge({
    name: 'svc_audit_shipping_stalled',
    help: 'whether the last audit shipping attempt failed (1) or delivered (0), by configured sink; absent without :svc/audit-sinks',
    labelNames: ['sink'] as const,
    registers,
    collect() {
      this.reset();
      const health = sources.auditShipping?.();
      if (health == null) return;
      for (const sink of health.sinks) this.set({ sink }, health.stalled ? 1 : 0);
    },
  });
  new Gauge({
    name: 'svc_audit_shipping_error',
    help: 'while audit shipping is stalled: 1 for the error code of its last failed attempt (audit_ship_stalled, audit_sink_refused, store_unavailable, audit_ship_failed), by sink',
    labelNames: ['sink', 'code'] as const,
    registers,
    collect() {
      this.reset();
      const health = sources.auditShipping?.();
      if (health == null || !health.stalled || health.code === null) return;
      for (const sink of health.sinks) this.set({ sink, code: health.code }, 1);
    },
  });
  // The store keeps running totals; the counter catches up with them at each scrape.
  const seen = { hits: 0, misses: 0 };
  const cacheLookups: Counter<'result'> = new Counter({
    name: 'svc_bearer_cache_lookups_total',
    help: 'bearer checks answered from the in-memory session cache (result="hit") or read from the store (result="miss"); hit ratio = hit / (hit + miss). Absent for stores without a cache',
    labelNames: ['result'] as const,
    registers,
    collect() {
      const counters = sources.bearerCache?.();
      if (counters === undefined) return;
      if (counters.hits > seen.hits) cacheLookups.inc({ result: 'hit' }, counters.hits - seen.hits);
      if (counters.misses > seen.misses) cacheLookups.inc({ result: 'miss' }, counters.misses - seen.misses);
      seen.hits = Math.max(seen.hits, counters.hits);
      seen.misses = Math.max(seen.misses, counters.misses);
    },
  });

  return {
    registry,
    observeRequest(r) {
      const labels = { surface: r.surface, method: r.method, route: r.route, status: String(r.status) };
      requests.inc(labels);
      duration.observe(labels, r.seconds);
      if (r.code !== undefined) {
        failures.inc({ surface: r.surface, code: r.code });
        if (r.code === 'rate_limited') rateLimited.inc({ surface: r.surface, route: r.route });
      }
    },
    observeStoreOperation(operation, seconds, failed) {
      storeDuration.observe({ operation, outcome: failed ? 'error' : 'ok' }, seconds);
    },
    recordAuditEvent(event) {
      const realm = event.realm ?? 'none';
      auditEvents.inc({ type: event.type });
      switch (event.type) {
        case 'session.created':
          signIns.inc({ realm });
          break;
        case 'signin.failed': {
          const reason = typeof event.data.reason === 'string' && /^[a-z_]{1,40}$/.test(event.data.reason) ? event.data.reason : 'other';
          signInFailures.inc({ realm, reason });
          break;
        }
        case 'session.rotated':
          rotations.inc({ realm });
          break;
        case 'session.rotated_in_grace':
          graceRotations.inc({ realm });
          break;
        case 'session.refresh_reused':
          reuses.inc({ realm });
          revocations.inc({ realm, reason: 'refresh_token_reused' });
          break;
        case 'session.revoked': {
          const reason = typeof event.data.reason === 'string' && REVOCATION_REASONS.has(event.data.reason) ? event.data.reason : 'other';
          revocations.inc({ realm, reason });
          break;
        }
        default:
          break;
      }
    },
  };
}

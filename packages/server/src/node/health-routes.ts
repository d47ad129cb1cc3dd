import { type ComponentHealthJson, type NodeHealthJson, rfc3339 } from '@svc/core';
import { StoreUnavailableError, storeFaultOf } from '@svc/core/store';
import type { FastifyBaseLogger, FastifyPluginAsync } from 'fastify';
import { documented, problemResponses } from '../http/problem-schema.js';
import type { HealthRouteOptions } from './route-options.js';
import { NODE_PATHS } from './routes.js';
import { nodeHealthResponse } from './schemas.js';

/** Runs `check`, failing it when it rejects or takes longer than `timeoutMs`; the reason goes to the log only. */
async function probe(check: () => Promise<void>, timeoutMs: number, log: FastifyBaseLogger, what: string): Promise<ComponentHealthJson> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new StoreUnavailableError('timeout', { cause: new Error(`no answer within ${timeoutMs} ms`) })),
      timeoutMs,
    );
    timer.unref();
  });
  try {
    await Promise.race([check(), timeout]);
    return { status: 'ok' };
  } catch (err) {
    log.error({ err, component: what }, 'health check failed');
    // Only the fixed vocabulary of store faults reaches the body; any message stays in the log.
    const fault = storeFaultOf(err);
    return fault === null ? { status: 'failed' } : { status: 'failed', reason: fault };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `GET /edge/0-alpha/health` (public): the health of each authentication provider (the built-in
 * Ed25519 provider runs a known-answer test) and whether the control store answers
 * (`store.ping()`), each bounded by a timeout; and, when `:svc/audit-sinks` is set, whether
 * audit shipping delivers (`audit_shipping`, with the error code of a stall).
 *
 * Degraded answers `503` with the SAME JSON body and `"status": "degraded"`, not a
 * problem+json: health is a report, not a refusal of the request. A probe or load balancer
 * needs only the status code; a person or a monitor reads which component failed from one
 * schema in both states. Failure reasons go to the log only.
 *
 * @example
 * await app.register(healthRoutes, { deps, identity, providers, checkTimeoutMs: 2000 });
 */
export const healthRoutes: FastifyPluginAsync<HealthRouteOptions> = async (
  app,
  { deps, identity, providers, checkTimeoutMs, auditShipping },
) => {
  const schema = documented({
    summary: 'The health of the control store and of each provider',
    response: {
      200: { description: 'Every component is healthy', ...nodeHealthResponse },
      503: { description: 'Degraded: the same body, naming the failed components', ...nodeHealthResponse },
      ...problemResponses(),
    },
  });
  app.get(NODE_PATHS.health, { schema }, async (req, reply) => {
    const [store, ...checked] = await Promise.all([
      probe(() => deps.store.ping(), checkTimeoutMs, req.log, 'store'),
      ...providers.map((p) => probe(() => p.check(), checkTimeoutMs, req.log, `provider ${p.name}`)),
    ]);
    const providerHealth = providers.map((p, i) => ({ name: p.name, kind: p.kind, status: checked[i]?.status ?? 'failed' }));
    const shipping = auditShipping();
    const shippingHealth =
      shipping === null
        ? undefined
        : shipping.stalled
          ? { status: 'failed' as const, code: shipping.code ?? 'audit_ship_failed' }
          : { status: 'ok' as const };
    const healthy = store?.status === 'ok' && providerHealth.every((p) => p.status === 'ok') && shippingHealth?.status !== 'failed';
    const body: NodeHealthJson = {
      status: healthy ? 'ok' : 'degraded',
      node_id: identity().nodeId,
      checked_at: rfc3339(deps.clock.now()),
      store: store ?? { status: 'failed' },
      providers: providerHealth,
      ...(shippingHealth === undefined ? {} : { audit_shipping: shippingHealth }),
    };
    return reply.code(healthy ? 200 : 503).send(body);
  });
};

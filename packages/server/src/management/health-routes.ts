import { AuthError, type DegradedHealthProblemJson, degradedHealthProblem } from '@svc/core';
import { StoreUnavailableError, storeFaultOf } from '@svc/core/store';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { PROBLEM_CONTENT_TYPE, problemJson } from '../http/problem.js';
import { documented, problemResponses } from '../http/problem-schema.js';
import type { ManagementRouteOptions } from './route-options.js';
import { healthResponse, LOOPBACK_GUARD } from './schemas.js';

/** How long the store may take to answer health's check before it counts as failed (`timeout`). */
const HEALTH_CHECK_TIMEOUT_MS = 2000;

/**
 * `GET /health`: exactly the contract's `200 {"status":"ok"}` when the control store can serve,
 * otherwise `503 store_unavailable` (problem+json, with `Retry-After` when the fault is known)
 * plus `"health": "degraded"` and `"reason"`: `connection`, `timeout`, `locked`, `disk_full`,
 * `io_error`, or `unavailable` when the cause is not one of those. A probe sees a store that
 * cannot serve, not just a live process, and turns healthy by itself when the fault ends.
 *
 * @example
 * await app.register(healthRoutes, { deps });
 */
export const healthRoutes: FastifyPluginAsync<ManagementRouteOptions> = async (app, { deps }) => {
  app.get(
    '/health',
    {
      schema: documented({
        summary: 'Whether the control store can serve (503 store_unavailable, health degraded, with the reason, when not)',
        response: {
          200: { description: 'The control store answers', ...healthResponse },
          ...problemResponses(LOOPBACK_GUARD),
          503: {
            description: 'Service Unavailable: `store_unavailable`, with `health` degraded and the `reason`',
            content: { [PROBLEM_CONTENT_TYPE]: { schema: degradedHealthProblem } },
          },
        },
      }),
    },
    async (req, reply) => {
      let timer: NodeJS.Timeout | undefined;
      try {
        // Bounded like the node surface's check: a store that does not answer is degraded now,
        // not after the store's own (longer) timeouts.
        await Promise.race([
          deps.store.ping(),
          new Promise<never>((_resolve, reject) => {
            timer = setTimeout(() => reject(new StoreUnavailableError('timeout')), HEALTH_CHECK_TIMEOUT_MS);
            timer.unref();
          }),
        ]);
      } catch (err) {
        req.log.error({ err }, 'control store ping failed');
        const fault = storeFaultOf(err);
        const refusal = fault === null ? new AuthError('store_unavailable', 'the control store cannot be reached') : (err as AuthError);
        // The problem+json of the refusal, plus what a monitor needs: degraded, and why (a fixed word).
        const degraded = reply as unknown as FastifyReply;
        for (const [name, value] of Object.entries(refusal.headers)) degraded.header(name, value);
        const body: DegradedHealthProblemJson = { ...problemJson(refusal), health: 'degraded', reason: fault ?? 'unavailable' };
        return degraded.code(503).type(PROBLEM_CONTENT_TYPE).send(JSON.stringify(body));
      } finally {
        clearTimeout(timer);
      }
      return { status: 'ok' };
    },
  );
};

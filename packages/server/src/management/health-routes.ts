import { AuthError } from '@svc/core';
import type { FastifyPluginAsync } from 'fastify';
import { documented, problemResponses } from '../http/problem-schema.js';
import type { ManagementRouteOptions } from './route-options.js';
import { healthResponse, LOOPBACK_GUARD } from './schemas.js';

/**
 * `GET /health`: exactly the contract's `200 {"status":"ok"}` when the control store answers a trivial
 * query, `503 store_unavailable` when it does not (so a probe sees a dead store, not just a
 * live process).
 *
 * @example
 * await app.register(healthRoutes, { deps });
 */
export const healthRoutes: FastifyPluginAsync<ManagementRouteOptions> = async (app, { deps }) => {
  app.get(
    '/health',
    {
      schema: documented({
        summary: 'Whether the control store answers',
        response: { 200: { description: 'The control store answers', ...healthResponse }, ...problemResponses(LOOPBACK_GUARD, 503) },
      }),
    },
    async (req) => {
      try {
        await deps.store.ping();
      } catch (err) {
        req.log.error({ err }, 'control store ping failed');
        throw new AuthError('store_unavailable', 'the control store cannot be reached');
      }
      return { status: 'ok' };
    },
  );
};

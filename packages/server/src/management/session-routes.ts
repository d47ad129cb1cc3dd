import { revokeSession } from '@svc/core';
import type { FastifyPluginAsync } from 'fastify';
import { type ManagementRouteOptions, managementPrincipal, principalOf, requireManagementPrincipal } from './route-options.js';
import { principalResponse, type RevokeBody, revokeBody, revokeResponse } from './schemas.js';

/**
 * The bearer routes of the contract: `GET /v1/auth/me` (the principal; one store lookup, the
 * hot path) and `POST /v1/auth/revoke` (logout with `{}` or no body, or revoke another session
 * with `{"session_id"}`; effective from the next request on).
 *
 * @example
 * await app.register(sessionRoutes, { deps });
 */
export const sessionRoutes: FastifyPluginAsync<ManagementRouteOptions> = async (app, { deps }) => {
  app.get('/v1/auth/me', { schema: { response: { 200: principalResponse } } }, (req) => managementPrincipal(deps, req));

  app.post<{ Body: RevokeBody }>(
    '/v1/auth/revoke',
    {
      onRequest: requireManagementPrincipal(deps),
      // A logout needs nothing but the bearer token: a POST without a body means `{}`.
      preValidation: (req, _reply, done) => {
        if (req.body === undefined) req.body = {};
        done();
      },
      schema: { body: revokeBody, response: { 200: revokeResponse } },
    },
    async (req) => revokeSession(deps, { principal: principalOf(req), sessionId: req.body.session_id }),
  );
};

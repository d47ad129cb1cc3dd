import { revokeSession } from '@svc/core';
import type { FastifyPluginAsync } from 'fastify';
import { documented, problemResponses } from '../http/problem-schema.js';
import { type ManagementRouteOptions, managementPrincipal, principalOf, requireManagementPrincipal } from './route-options.js';
import {
  BODY_PROBLEMS,
  LOOPBACK_GUARD,
  MANAGEMENT_BEARER,
  principalResponse,
  type RevokeBody,
  revokeBody,
  revokeResponse,
} from './schemas.js';

/**
 * The bearer routes of the contract: `GET /v1/auth/me` (the principal; one store lookup, the
 * hot path) and `POST /v1/auth/revoke` (logout with `{}` or no body, or revoke another session
 * with `{"session_id"}`; effective from the next request on).
 *
 * @example
 * await app.register(sessionRoutes, { deps });
 */
export const sessionRoutes: FastifyPluginAsync<ManagementRouteOptions> = async (app, { deps }) => {
  app.get(
    '/v1/auth/me',
    {
      schema: documented({
        summary: 'The principal of the bearer token',
        security: MANAGEMENT_BEARER,
        response: { 200: { description: 'The principal', ...principalResponse }, ...problemResponses(LOOPBACK_GUARD, 401, 503) },
      }),
    },
    (req) => managementPrincipal(deps, req),
  );

  app.post<{ Body: RevokeBody }>(
    '/v1/auth/revoke',
    {
      onRequest: requireManagementPrincipal(deps),
      // A logout needs nothing but the bearer token: a POST without a body means `{}`.
      preValidation: (req, _reply, done) => {
        if (req.body === undefined) req.body = {};
        done();
      },
      schema: documented({
        summary: 'Log out, or revoke another session',
        security: MANAGEMENT_BEARER,
        body: revokeBody,
        response: {
          200: { description: 'The revoked session', ...revokeResponse },
          ...problemResponses(LOOPBACK_GUARD, ...BODY_PROBLEMS, 401, 404, 503),
        },
      }),
    },
    async (req) => revokeSession(deps, { principal: principalOf(req), sessionId: req.body.session_id }),
  );
};

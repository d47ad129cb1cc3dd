import { createConsoleLink, rfc3339 } from '@svc/core';
import type { FastifyPluginAsync } from 'fastify';
import { principalOf, requireManagementPrincipal } from '../http/principal.js';
import { BODY_PROBLEMS, documented, problemResponses } from '../http/problem-schema.js';
import type { ManagementRouteOptions } from './route-options.js';
import { emptyBody, LOOPBACK_GUARD, MANAGEMENT_BEARER } from './schemas.js';

const consoleLinkResponse = {
  type: 'object',
  required: ['url', 'expires_at', 'expires_in'],
  properties: {
    url: { type: 'string', description: 'open it in a browser on this machine: single use' },
    expires_at: { type: 'string' },
    expires_in: { type: 'integer' },
  },
} as const;

/**
 * `POST /v1/auth/console-links` (management bearer): a one-time URL (single use, 60 s) that
 * signs a browser on this machine in to the management console as the caller's subject and
 * device. The URL names the host the caller reached (a loopback one: the guard refused any other).
 *
 * @example
 * await app.register(consoleLinkRoutes, { deps });
 */
export const consoleLinkRoutes: FastifyPluginAsync<ManagementRouteOptions> = async (app, { deps }) => {
  app.post(
    '/v1/auth/console-links',
    {
      onRequest: requireManagementPrincipal(deps),
      preValidation: (req, _reply, done) => {
        if (req.body === undefined) req.body = {};
        done();
      },
      schema: documented({
        summary: 'Mint a one-time URL (single use, 60 s) that signs a browser on this machine in to the management console',
        security: MANAGEMENT_BEARER,
        body: emptyBody,
        response: {
          201: { description: 'The one-time URL', ...consoleLinkResponse },
          ...problemResponses(LOOPBACK_GUARD, ...BODY_PROBLEMS, 401, 503),
        },
      }),
    },
    async (req, reply) => {
      const { code, expiresAt } = await createConsoleLink(deps, { principal: principalOf(req) });
      const now = deps.clock.now();
      return reply.code(201).send({
        url: `${req.protocol}://${req.host}/console/login?code=${encodeURIComponent(code)}`,
        expires_at: rfc3339(expiresAt),
        expires_in: Math.max(0, Math.round((expiresAt - now) / 1000)),
      });
    },
  );
};

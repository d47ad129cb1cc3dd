import {
  createScimToken,
  listScimTokens,
  revokeScimToken,
  type ScimTokenActor,
  type ScimTokenCreateBody,
  type ScimTokenParams,
  scimTokenCreateBody,
  scimTokenCreatedResponse,
  scimTokenListResponse,
  scimTokenParams,
  scimTokenRevokedResponse,
} from '@svc/core';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { principalOf, requireManagementPrincipal } from '../http/principal.js';
import { documented, problemResponses } from '../http/problem-schema.js';
import type { ManagementRouteOptions } from './route-options.js';
import { LOOPBACK_GUARD, MANAGEMENT_BEARER, noQuery } from './schemas.js';

function actorOf(req: FastifyRequest): ScimTokenActor {
  const principal = principalOf(req);
  return { via: 'management_api', subject: principal.subject, session: principal.session };
}

/**
 * The SCIM tokens a company directory provisions with (docs/scim.md), behind a management
 * bearer token: create one (shown once: only its digest is kept), list them (never the token),
 * revoke one.
 *
 * @example
 * await app.register(scimTokenRoutes, { deps });
 */
export const scimTokenRoutes: FastifyPluginAsync<ManagementRouteOptions> = async (app, { deps }) => {
  app.addHook('onRequest', requireManagementPrincipal(deps));

  app.post<{ Body: ScimTokenCreateBody }>(
    '/v1/auth/scim-tokens',
    {
      schema: documented({
        summary: 'Create a SCIM token for a company directory (the token is shown once)',
        security: MANAGEMENT_BEARER,
        body: scimTokenCreateBody,
        response: {
          201: { description: 'The new token: keep it now, it is never shown again', ...scimTokenCreatedResponse },
          ...problemResponses(LOOPBACK_GUARD, 401, 503),
        },
      }),
    },
    async (req, reply) => {
      const created = await createScimToken(deps, { name: req.body.name, actor: actorOf(req) });
      return reply.code(201).send(created);
    },
  );

  app.get(
    '/v1/auth/scim-tokens',
    {
      schema: documented({
        summary: 'List the SCIM tokens (never the tokens themselves), revoked ones included',
        security: MANAGEMENT_BEARER,
        querystring: noQuery,
        response: {
          200: { description: 'The SCIM tokens, oldest first', ...scimTokenListResponse },
          ...problemResponses(LOOPBACK_GUARD, 401, 503),
        },
      }),
    },
    async () => ({ tokens: await listScimTokens(deps) }),
  );

  app.delete<{ Params: ScimTokenParams }>(
    '/v1/auth/scim-tokens/:id',
    {
      schema: documented({
        summary: "Revoke a SCIM token: the directory's next request with it is refused",
        security: MANAGEMENT_BEARER,
        params: scimTokenParams,
        response: {
          200: { description: 'The token was revoked', ...scimTokenRevokedResponse },
          ...problemResponses(LOOPBACK_GUARD, 401, 404, 503),
        },
      }),
    },
    async (req) => revokeScimToken(deps, { id: req.params.id, actor: actorOf(req) }),
  );
};

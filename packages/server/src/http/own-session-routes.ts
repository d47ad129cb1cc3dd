import {
  type AuthDeps,
  deviceListResponse,
  deviceToJson,
  emptyBody,
  type Realm,
  revokeOtherSessions,
  revokeOthersResponse,
  sessionListResponse,
  sessionToJson,
} from '@svc/core';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { principalOf, requireBearerPrincipal } from './principal.js';
import { BODY_PROBLEMS, documented, problemResponses } from './problem-schema.js';

/** What {@link ownSessionRoutes} receives: the realm its bearer tokens belong to (data, as in `sessionRoutes`). */
export interface OwnSessionRouteOptions {
  readonly deps: AuthDeps;
  readonly realm: Realm;
  /** The origin clients reach these routes at, for a DPoP proof's `htu`; default the request's own. */
  readonly originOf?: (req: FastifyRequest) => string;
  /** Statuses the surface's own guards may answer on every route. */
  readonly guardProblems: readonly number[];
  /** The OpenAPI security requirement of the bearer routes. */
  readonly security: ReadonlyArray<Readonly<Record<string, readonly string[]>>>;
}

/**
 * `?mine` is accepted and means what these routes always do, so a client asks for its own
 * sessions with the same query in either realm (the management API's operator listing needs it).
 */
const ownQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { mine: { type: 'string', enum: ['', 'true'] } },
} as const;

/**
 * A principal's self-service in a realm that has no operator listings (the application
 * gateway): `GET {prefix}/sessions` (the caller's active sessions, newest first),
 * `GET {prefix}/devices` (the caller's active devices) and `POST {prefix}/sessions/revoke-others`
 * (sign out everywhere else, keeping this session), on the same paths and with the same
 * answers as the management API's `?mine` listings and revoke-others. Only ever the caller's own
 * subject in the caller's own realm: a token of another realm is `401 invalid_token`.
 *
 * @example
 * await app.register(ownSessionRoutes, { prefix: '/.svc/auth/v1', deps, realm: 'application', guardProblems: [], security });
 */
export const ownSessionRoutes: FastifyPluginAsync<OwnSessionRouteOptions> = async (
  app,
  { deps, realm, originOf, guardProblems, security },
) => {
  app.addHook('onRequest', requireBearerPrincipal(deps, realm, originOf));
  const own = (req: FastifyRequest) => {
    const principal = principalOf(req);
    return { realm: principal.realm, subject: principal.subject };
  };

  app.get(
    '/sessions',
    {
      schema: documented({
        summary: "The caller's own active sessions, newest first",
        security,
        querystring: ownQuery,
        response: { 200: { description: 'The active sessions', ...sessionListResponse }, ...problemResponses(...guardProblems, 401, 503) },
      }),
    },
    async (req) => {
      const sessions = await deps.store.listActiveSessions({ now: deps.clock.now(), ...own(req) });
      return { sessions: sessions.map(sessionToJson) };
    },
  );

  app.get(
    '/devices',
    {
      schema: documented({
        summary: "The caller's own enrolled devices",
        security,
        querystring: ownQuery,
        response: { 200: { description: 'The enrolled devices', ...deviceListResponse }, ...problemResponses(...guardProblems, 401, 503) },
      }),
    },
    async (req) => ({ devices: (await deps.store.listDevices(own(req))).map(deviceToJson) }),
  );

  app.post(
    '/sessions/revoke-others',
    {
      preValidation: (req, _reply, done) => {
        if (req.body === undefined) req.body = {};
        done();
      },
      schema: documented({
        summary: "Revoke the caller's other sessions (sign out everywhere else)",
        security,
        body: emptyBody,
        response: {
          200: { description: 'The sessions revoked, newest first', ...revokeOthersResponse },
          ...problemResponses(...guardProblems, ...BODY_PROBLEMS, 401, 503),
        },
      }),
    },
    async (req) => revokeOtherSessions(deps, { principal: principalOf(req) }),
  );
};

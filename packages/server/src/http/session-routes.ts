import {
  type AuthDeps,
  type Principal,
  principalResponse,
  type Realm,
  type RevokeBody,
  revokeBody,
  revokeResponse,
  revokeSession,
} from '@svc/core';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { bearerPrincipal, principalOf, requireBearerPrincipal } from './principal.js';
import { BODY_PROBLEMS, documented, problemResponses } from './problem-schema.js';

/** What Fastify itself answers a JSON body with. */
const JSON_TYPE = 'application/json; charset=utf-8';

/** What {@link sessionRoutes} receives: the realm its bearer tokens belong to (data, so one plugin serves every realm). */
export interface SessionRouteOptions {
  readonly deps: AuthDeps;
  readonly realm: Realm;
  /** The origin clients reach these routes at, for a DPoP proof's `htu` (the gateway's public one); default the request's own. */
  readonly originOf?: (req: FastifyRequest) => string;
  /** Statuses the surface's own guards may answer on every route, for the documented responses (the management API: `403 forbidden_host`). */
  readonly guardProblems: readonly number[];
  /** The OpenAPI security requirement of the bearer routes. */
  readonly security: ReadonlyArray<Readonly<Record<string, readonly string[]>>>;
}

/**
 * The bearer routes of one realm, under the plugin's prefix: `GET {prefix}/me` (the principal;
 * one store lookup, the hot path) and `POST {prefix}/revoke` (logout with `{}` or no body, or
 * revoke another session with `{"session_id"}`, which only a management principal may; an
 * application principal naming any session but its own gets `404 not_found`; effective from
 * the next request on, in every process sharing the store). A token of another realm is
 * `401 invalid_token` on both.
 *
 * @example
 * await app.register(sessionRoutes, { prefix: '/v1/auth', deps, realm: 'management', guardProblems: [403], security: MANAGEMENT_BEARER });
 */
export const sessionRoutes: FastifyPluginAsync<SessionRouteOptions> = async (app, { deps, realm, guardProblems, security, originOf }) => {
  // The body of `GET /me` for each principal, serialized once by the route's own 200 schema: core
  // hands out the same frozen principal while its session's record is unchanged, so its JSON is
  // unchanged too (docs/performance.md, 2026-11-29 at 07:00).
  const bodies = new WeakMap<Principal, string>();
  app.get(
    '/me',
    {
      schema: documented({
        summary: 'The principal of the bearer token',
        security,
        response: { 200: { description: 'The principal', ...principalResponse }, ...problemResponses(...guardProblems, 401, 503) },
      }),
    },
    // Neither an async function nor one that returns a promise: the answer follows the check's own
    // promise, and nothing is resolved with the reply (V8 would look its prototype chain up for a
    // `then` on every request), nor settled before the answer is sent (docs/performance.md,
    // 2026-11-29 at 16:00). Every failure is sent as a failure, as a thrown one would be.
    (req, reply) => {
      bearerPrincipal(deps, req, realm, originOf).then(
        (principal) => {
          try {
            let body = bodies.get(principal);
            if (body === undefined) {
              const json = reply.serialize(principal);
              // The route's 200 schema compiles to a serializer of text (fast-json-stringify).
              if (typeof json !== 'string') throw new TypeError('GET /me: the principal did not serialize to text');
              body = json;
              bodies.set(principal, body);
            }
            reply.type(JSON_TYPE).send(body);
          } catch (err) {
            sendFailure(reply, err);
          }
        },
        (err: unknown) => sendFailure(reply, err),
      );
    },
  );

  app.post<{ Body: RevokeBody }>(
    '/revoke',
    {
      onRequest: requireBearerPrincipal(deps, realm, originOf),
      // A logout needs nothing but the bearer token: a POST without a body means `{}`.
      preValidation: (req, _reply, done) => {
        if (req.body === undefined) req.body = {};
        done();
      },
      schema: documented({
        summary: realm === 'management' ? 'Log out, or revoke another session' : 'Log out',
        security,
        body: revokeBody,
        response: {
          200: { description: 'The revoked session', ...revokeResponse },
          ...problemResponses(...guardProblems, ...BODY_PROBLEMS, 401, 404, 503),
        },
      }),
    },
    async (req) => revokeSession(deps, { principal: principalOf(req), sessionId: req.body.session_id }),
  );
};

/**
 * Sends `err` down Fastify's error path, as Fastify does with a handler's rejected promise: as an
 * `Error` whatever was thrown, never as a body; only logged when an answer was already sent.
 */
function sendFailure(reply: FastifyReply, err: unknown): void {
  if (reply.sent) {
    reply.log.error({ err }, 'GET /me failed after its answer was sent');
    return;
  }
  reply.send(err instanceof Error ? err : new Error(`GET /me failed: ${String(err)}`));
}

import {
  AuthError,
  createChallenge,
  createSession,
  deviceToJson,
  enrollWithBootstrapToken,
  rfc3339,
  rotateRefreshToken,
  secondsUntil,
} from '@svc/core';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { SignInRouteOptions } from './route-options.js';
import {
  type ChallengeBody,
  challengeBody,
  challengeResponse,
  deviceResponse,
  type EnrollBody,
  enrollBody,
  type RefreshBody,
  refreshBody,
  type SessionBody,
  sessionBody,
  tokenPairResponse,
} from './schemas.js';

/**
 * The unauthenticated routes that prove something: enrollment with the bootstrap token, the
 * challenge, the signed sign-in and the refresh. Failed proofs (401s) on enroll, sessions and
 * refresh are counted per client IP; over the limit a client gets `429 rate_limited` before its
 * body is even parsed. Successes are never counted.
 *
 * @example
 * await app.register(signInRoutes, { deps, limiter: createFailureLimiter({ clock: deps.clock }) });
 */
export const signInRoutes: FastifyPluginAsync<SignInRouteOptions> = async (app, { deps, limiter }) => {
  const limitFailures = (req: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    done(limiter.check(req.ip) ?? undefined);
  };
  const countFailure = (req: FastifyRequest, err: unknown): never => {
    if (err instanceof AuthError && err.status === 401) limiter.recordFailure(req.ip);
    throw err;
  };

  app.post<{ Body: EnrollBody }>(
    '/v1/auth/enroll',
    { onRequest: limitFailures, schema: { body: enrollBody, response: { 201: deviceResponse } } },
    async (req, reply) => {
      const { bootstrap_token, public_key, name } = req.body;
      const device = await enrollWithBootstrapToken(deps, { bootstrapToken: bootstrap_token, publicKey: public_key, name }).catch((err) =>
        countFailure(req, err),
      );
      return reply.code(201).send({ device: deviceToJson(device) });
    },
  );

  app.post<{ Body: ChallengeBody }>(
    '/v1/auth/challenges',
    { schema: { body: challengeBody, response: { 201: challengeResponse } } },
    async (req, reply) => {
      const c = await createChallenge(deps, { publicKey: req.body.public_key, realm: 'management' });
      return reply.code(201).send({
        challenge_id: c.id,
        challenge: c.challenge,
        expires_at: rfc3339(c.expiresAt),
        expires_in: secondsUntil(c.expiresAt, c.createdAt),
      });
    },
  );

  app.post<{ Body: SessionBody }>(
    '/v1/auth/sessions',
    { onRequest: limitFailures, schema: { body: sessionBody, response: { 201: tokenPairResponse } } },
    async (req, reply) => {
      const pair = await createSession(deps, {
        challengeId: req.body.challenge_id,
        signature: req.body.signature,
        realm: 'management',
      }).catch((err) => countFailure(req, err));
      return reply.code(201).send(pair);
    },
  );

  app.post<{ Body: RefreshBody }>(
    '/v1/auth/refresh',
    { onRequest: limitFailures, schema: { body: refreshBody, response: { 200: tokenPairResponse } } },
    async (req) =>
      rotateRefreshToken(deps, { refreshToken: req.body.refresh_token, realm: 'management' }).catch((err) => countFailure(req, err)),
  );
};

import {
  AuthError,
  createChallenge,
  createSession,
  deviceToJson,
  enrollWithBootstrapToken,
  parseSessionToken,
  rfc3339,
  rotateRefreshToken,
  secondsUntil,
} from '@svc/core';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { clientAddressKey, limitedAttempt } from '../http/failure-limiter.js';
import { documented, problemResponses } from '../http/problem-schema.js';
import type { SignInRouteOptions } from './route-options.js';
import {
  BODY_PROBLEMS,
  type ChallengeBody,
  challengeBody,
  challengeResponse,
  deviceResponse,
  type EnrollBody,
  enrollBody,
  LOOPBACK_GUARD,
  type RefreshBody,
  refreshBody,
  type SessionBody,
  sessionBody,
  tokenPairResponse,
} from './schemas.js';

/**
 * The unauthenticated routes that prove something: enrollment with the bootstrap token, the
 * challenge, the signed sign-in and the refresh. Every proof attempt on enroll, sessions and
 * refresh is reserved against the client's address unit (and, for a refresh, against the
 * session its token names) BEFORE it runs and kept when it fails (a 401): over the budget a
 * client gets `429 rate_limited`, and a client already over it is refused before its body is
 * even parsed. Successes are never counted. Challenges left unanswered are bounded per address
 * unit and per public key.
 *
 * @example
 * await app.register(signInRoutes, { deps, limiter: createFailureLimiter({ clock: deps.clock }), challenges: createChallengeBudget({ clock: deps.clock }) });
 */
export const signInRoutes: FastifyPluginAsync<SignInRouteOptions> = async (app, { deps, limiter, challenges }) => {
  const limitFailures = (req: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    done(limiter.check([clientAddressKey(req.ip)]) ?? undefined);
  };

  app.post<{ Body: EnrollBody }>(
    '/v1/auth/enroll',
    {
      onRequest: limitFailures,
      schema: documented({
        summary: 'Enroll a management device with a bootstrap token',
        body: enrollBody,
        response: {
          201: { description: 'The enrolled device', ...deviceResponse },
          ...problemResponses(LOOPBACK_GUARD, ...BODY_PROBLEMS, 401, 409, 429, 503),
        },
      }),
    },
    async (req, reply) => {
      const { bootstrap_token, public_key, name } = req.body;
      const device = await limitedAttempt(limiter, [clientAddressKey(req.ip)], () =>
        enrollWithBootstrapToken(deps, { bootstrapToken: bootstrap_token, publicKey: public_key, name }),
      );
      return reply.code(201).send({ device: deviceToJson(device) });
    },
  );

  app.post<{ Body: ChallengeBody }>(
    '/v1/auth/challenges',
    {
      schema: documented({
        summary: 'Get a sign-in challenge for a device key',
        body: challengeBody,
        response: {
          201: { description: 'The challenge to sign', ...challengeResponse },
          ...problemResponses(LOOPBACK_GUARD, ...BODY_PROBLEMS, 429, 503),
        },
      }),
    },
    async (req, reply) => {
      const slot = challenges.reserve(clientAddressKey(req.ip), req.body.public_key);
      let c: Awaited<ReturnType<typeof createChallenge>>;
      try {
        c = await createChallenge(deps, { publicKey: req.body.public_key, realm: 'management' });
      } catch (err) {
        slot.release();
        throw err;
      }
      challenges.hold(c.id, slot);
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
    {
      onRequest: limitFailures,
      schema: documented({
        summary: 'Sign in with a signed challenge',
        body: sessionBody,
        response: {
          201: { description: 'A new session and its tokens', ...tokenPairResponse },
          ...problemResponses(LOOPBACK_GUARD, ...BODY_PROBLEMS, 401, 429, 503),
        },
      }),
    },
    async (req, reply) => {
      const { challenge_id, signature } = req.body;
      const answer = () =>
        createSession(deps, {
          challengeId: challenge_id,
          signature,
          realm: 'management',
          client: { address: req.ip, userAgent: req.headers['user-agent'] },
        });
      const pair = await limitedAttempt(limiter, [clientAddressKey(req.ip)], answer).then(
        (p) => {
          challenges.answered(challenge_id);
          return p;
        },
        (err: unknown) => {
          // A 401 means the challenge was looked up and, if it existed, used up.
          if (err instanceof AuthError && err.status === 401) challenges.answered(challenge_id);
          throw err;
        },
      );
      return reply.code(201).send(pair);
    },
  );

  app.post<{ Body: RefreshBody }>(
    '/v1/auth/refresh',
    {
      onRequest: limitFailures,
      schema: documented({
        summary: 'Rotate the refresh token of a session',
        body: refreshBody,
        response: {
          200: { description: 'The session with new tokens', ...tokenPairResponse },
          ...problemResponses(LOOPBACK_GUARD, ...BODY_PROBLEMS, 401, 429, 503),
        },
      }),
    },
    async (req) => {
      const token = req.body.refresh_token;
      const presented = parseSessionToken(token, 'refresh');
      // Per session as well as per address: guesses at one session's token share one budget wherever they come from.
      const keys = presented === null ? [clientAddressKey(req.ip)] : [clientAddressKey(req.ip), `refresh:${presented.sessionId}`];
      return limitedAttempt(limiter, keys, () => rotateRefreshToken(deps, { refreshToken: token, realm: 'management' }));
    },
  );
};

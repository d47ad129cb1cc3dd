import {
  type AuthDeps,
  AuthError,
  type ChallengeBody,
  challengeBody,
  challengeResponse,
  createChallenge,
  createSession,
  parseSessionToken,
  type Realm,
  type RefreshBody,
  refreshBody,
  rfc3339,
  rotateRefreshToken,
  type SessionBody,
  secondsUntil,
  sessionBody,
  tokenPairResponse,
} from '@svc/core';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { ChallengeBudget } from './challenge-budget.js';
import { failureCounting } from './failure-counting.js';
import { clientAddressKey, type FailureLimiter } from './failure-limiter.js';
import { sourceKey } from './local-peer.js';
import { BODY_PROBLEMS, documented, problemResponses } from './problem-schema.js';

/**
 * What the sign-in route plugin receives: the realm it signs in to (data, so one plugin serves
 * every realm, not only the management API), the deps, the failed-attempt budget and the
 * unanswered-challenge budget.
 */
export interface SignInRouteOptions {
  readonly realm: Realm;
  readonly deps: AuthDeps;
  readonly limiter: FailureLimiter;
  readonly challenges: ChallengeBudget;
  /** Statuses the surface's own guards may answer on every route, for the documented responses (the management API: `403 forbidden_host`). */
  readonly guardProblems: readonly number[];
  /**
   * The origin a client reaches this surface at, for a DPoP proof's `htu`: the gateway's public
   * origin; by default the request's own scheme and `Host` (the management API, loopback only).
   */
  readonly originOf?: (req: FastifyRequest) => string;
}

/**
 * The sign-in of one realm (`opts.realm`, so the same plugin serves the management API and,
 * under its own prefix, the application gateway): `POST {prefix}/challenges`, the signed
 * `POST {prefix}/sessions` and `POST {prefix}/refresh`. Every proof attempt on sessions and
 * refresh is counted by {@link failureCounting} against the client's address unit (and, for a
 * refresh, against the session its token names): reserved BEFORE it runs, kept when it fails (a
 * 401). Beyond the budget an attempt still runs: a valid signature or a valid current refresh
 * token goes through whoever spent the budget, while a failure is answered `429 rate_limited`
 * and is neither counted nor audited. Successes are never counted. Challenges left unanswered
 * are bounded per source (the address unit, and on loopback the local account: see
 * `sourceKey`), never per public key (a key's challenges are asked for by anyone, so a bound on
 * them would let anyone lock that device out).
 *
 * @example
 * await app.register(signInRoutes, { prefix: '/v1/auth', realm: 'management', deps, limiter, challenges, guardProblems: [403] });
 */
export const signInRoutes: FastifyPluginAsync<SignInRouteOptions> = async (
  app,
  { realm, deps, limiter, challenges, guardProblems, originOf = requestOrigin },
) => {
  await app.register(failureCounting, { limiter });

  app.post<{ Body: ChallengeBody }>(
    '/challenges',
    {
      schema: documented({
        summary: 'Get a sign-in challenge for a device key',
        body: challengeBody,
        response: {
          201: { description: 'The challenge to sign', ...challengeResponse },
          ...problemResponses(...guardProblems, ...BODY_PROBLEMS, 429, 503),
        },
      }),
    },
    async (req, reply) => {
      const slot = challenges.reserve(await sourceKey(req.ip, req.socket));
      let c: Awaited<ReturnType<typeof createChallenge>>;
      try {
        c = await createChallenge(deps, { publicKey: req.body.public_key, realm });
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
    '/sessions',
    {
      config: { attemptKeys: (req) => [clientAddressKey(req.ip)], beyondBudget: 'evaluate' },
      schema: documented({
        summary: 'Sign in with a signed challenge',
        body: sessionBody,
        response: {
          201: { description: 'A new session and its tokens', ...tokenPairResponse },
          ...problemResponses(...guardProblems, ...BODY_PROBLEMS, 401, 429, 503),
        },
      }),
    },
    async (req, reply) => {
      const { challenge_id, signature } = req.body;
      try {
        const pair = await createSession(deps, {
          challengeId: challenge_id,
          signature,
          realm,
          client: { address: req.ip, userAgent: req.headers['user-agent'] },
          auditFailure: req.attempt?.counted !== false,
        });
        challenges.answered(challenge_id);
        return reply.code(201).send(pair);
      } catch (err) {
        // A sign-in that ran to a verdict used its challenge up (a 401 means it was looked up
        // and, if it existed, consumed): its unanswered-challenge slots come back.
        if (err instanceof AuthError && err.status === 401) challenges.answered(challenge_id);
        throw err;
      }
    },
  );

  app.post<{ Body: RefreshBody }>(
    '/refresh',
    {
      config: {
        attemptKeys: (req) => {
          const presented = parseSessionToken((req.body as RefreshBody).refresh_token, 'refresh');
          // Per session as well as per address: guesses at one session's token share one budget wherever they come from.
          return presented === null ? [clientAddressKey(req.ip)] : [clientAddressKey(req.ip), `refresh:${presented.sessionId}`];
        },
        // A valid current refresh token rotates whoever spent the budget.
        beyondBudget: 'evaluate',
      },
      schema: documented({
        summary: 'Rotate the refresh token of a session',
        body: refreshBody,
        response: {
          200: { description: 'The session with new tokens', ...tokenPairResponse },
          ...problemResponses(...guardProblems, ...BODY_PROBLEMS, 401, 429, 503),
        },
      }),
    },
    // A session bound to its device key (DPoP) needs a proof for exactly this request.
    async (req) =>
      rotateRefreshToken(deps, {
        refreshToken: req.body.refresh_token,
        realm,
        dpop: { proof: req.headers.dpop, htm: req.method, htu: `${originOf(req)}${req.url.split('?', 1)[0]}` },
      }),
  );
};

/** The origin of a request as its own scheme and `Host` name it. */
function requestOrigin(req: FastifyRequest): string {
  return `${req.protocol}://${req.host}`;
}

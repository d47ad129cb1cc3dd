import { AuthError } from '@svc/core';
import type { RouteHandlerMethod } from 'fastify';
import fp from 'fastify-plugin';
import { clientAddressKey, type FailureLimiter, type Reservation } from './failure-limiter.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The budget keys of a credential attempt on this route (see {@link failureCounting}), read
     * after the body is validated; a route without it proves nothing and is not counted.
     */
    attemptKeys?: (req: FastifyRequest) => readonly string[];
    /**
     * What an attempt beyond the budget does. `evaluate`: it still runs, so a valid proof goes
     * through whoever spent the budget, and its failure is answered `429` instead of its 401
     * (the handler must then write no audit event for it: see `req.attempt.counted`). `refuse`
     * (the default): it is answered `429` before it runs, for proofs whose evaluation is costly
     * or calls out (a provider's ceremony).
     */
    beyondBudget?: 'evaluate' | 'refuse';
  }
  interface FastifyRequest {
    /** The attempt {@link failureCounting} reserved for this request, until it is settled. */
    attempt: Reservation | null;
  }
}

/** Options of {@link failureCounting}. */
export interface FailureCountingOptions {
  /** The budget the attempts of the registering scope are counted against. */
  readonly limiter: FailureLimiter;
}

/**
 * Counts failed credential attempts for the routes of the scope that registers it (it shares
 * that scope's encapsulation, so routes elsewhere are untouched). A route opts in with
 * `config.attemptKeys`; then:
 *
 * - `preHandler` (the body is valid by now): the attempt is reserved against the route's keys,
 *   never waiting: with room it counts; without, it is uncounted, and (`beyondBudget: 'refuse'`)
 *   answered `429` at once, or (`'evaluate'`) run, its success answered as usual and its 401
 *   answered `429 rate_limited` with `Retry-After`;
 * - `onError`: an attempt that failed as a proof (a 401) is counted; any other error (invalid
 *   input, an outage) gives its slot back;
 * - `onSend`: the answer is ready without a 401: the slot comes back (successes never count);
 *   `onResponse` does the same for a request that ended without an answer.
 *
 * A `refuse` route also refuses a client whose address unit already spent its budget in
 * `onRequest`, before its body is read. Settling is idempotent, and tied to the end of the
 * handler, never to the client's socket: a client that disconnects mid-attempt still has its
 * attempt counted when it ends.
 *
 * @example
 * await app.register(async (scope) => {
 *   await scope.register(failureCounting, { limiter });
 *   scope.post('/v1/auth/refresh', { config: { attemptKeys: (req) => [clientAddressKey(req.ip)], beyondBudget: 'evaluate' } }, handler);
 * });
 */
export const failureCounting = fp<FailureCountingOptions>(
  async (app, { limiter }) => {
    app.decorateRequest('attempt', null);
    app.addHook('onRoute', (route) => {
      if (route.config?.attemptKeys === undefined || route.config.beyondBudget !== 'evaluate') return;
      const handler = route.handler as RouteHandlerMethod;
      // The failure of an uncounted attempt is answered 429, never as the 401 it was: beyond
      // the budget, no answer tells a guesser more than "too many attempts".
      route.handler = async function (this: unknown, req, reply) {
        try {
          return await handler.call(this as never, req, reply);
        } catch (err) {
          if (err instanceof AuthError && err.status === 401 && req.attempt !== null && !req.attempt.counted) {
            throw req.attempt.refusal();
          }
          throw err;
        }
      } as RouteHandlerMethod;
    });
    app.addHook('onRequest', (req, _reply, done) => {
      const config = req.routeOptions.config;
      if (config.attemptKeys === undefined || config.beyondBudget === 'evaluate') done();
      else done(limiter.check([clientAddressKey(req.ip)]) ?? undefined);
    });
    app.addHook('preHandler', async (req) => {
      const config = req.routeOptions.config;
      if (config.attemptKeys === undefined) return;
      const attempt = await limiter.reserve(config.attemptKeys(req));
      req.attempt = attempt;
      if (!attempt.counted && config.beyondBudget !== 'evaluate') throw attempt.refusal();
    });
    app.addHook('onError', (req, _reply, err, done) => {
      if (err instanceof AuthError && err.status === 401) req.attempt?.fail();
      else req.attempt?.release();
      done();
    });
    app.addHook('onSend', (req, _reply, payload, done) => {
      req.attempt?.release();
      done(null, payload);
    });
    app.addHook('onResponse', (req, _reply, done) => {
      req.attempt?.release();
      done();
    });
  },
  { name: 'svc-failure-counting', fastify: '5.x' },
);

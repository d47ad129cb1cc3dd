import { AuthError } from '@svc/core';
import fp from 'fastify-plugin';
import { clientAddressKey, type FailureLimiter, type Reservation } from './failure-limiter.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The budget keys of a credential attempt on this route (see {@link failureCounting}), read
     * after the body is validated; a route without it proves nothing and is not counted.
     */
    attemptKeys?: (req: FastifyRequest) => readonly string[];
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
 * - `onRequest`: a client whose address unit already spent its budget is refused
 *   (`429 rate_limited`) before its body is even read;
 * - `preHandler` (the body is valid by now): the attempt is reserved against the route's keys,
 *   so N concurrent attempts are never evaluated beyond the budget;
 * - `onError`: an attempt that failed as a proof (a 401) is counted; any other error (invalid
 *   input, an outage) gives its slot back;
 * - `onSend`: the answer is ready without a 401: the slot comes back (successes never count);
 *   `onResponse` does the same for a request that ended without an answer.
 *
 * Settling is idempotent, and tied to the end of the handler, never to the client's socket: a
 * client that disconnects mid-attempt still has its attempt counted when it ends.
 *
 * @example
 * await app.register(async (scope) => {
 *   await scope.register(failureCounting, { limiter });
 *   scope.post('/v1/auth/refresh', { config: { attemptKeys: (req) => [clientAddressKey(req.ip)] } }, handler);
 * });
 */
export const failureCounting = fp<FailureCountingOptions>(
  async (app, { limiter }) => {
    app.decorateRequest('attempt', null);
    app.addHook('onRequest', (req, _reply, done) => {
      if (req.routeOptions.config.attemptKeys === undefined) done();
      else done(limiter.check([clientAddressKey(req.ip)]) ?? undefined);
    });
    app.addHook('preHandler', async (req) => {
      const keysOf = req.routeOptions.config.attemptKeys;
      if (keysOf !== undefined) req.attempt = await limiter.reserve(keysOf(req));
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

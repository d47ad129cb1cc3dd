import { type AuthDeps, authenticate, type Principal } from '@svc/core';
import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { bearerToken } from '../http/bearer.js';
import type { ChallengeBudget } from '../http/challenge-budget.js';
import type { FailureLimiter } from '../http/failure-limiter.js';

/** What every management route plugin receives. */
export interface ManagementRouteOptions {
  readonly deps: AuthDeps;
}

/** What the sign-in route plugin receives: the deps, the failed-attempt budget and the unanswered-challenge budget. */
export interface SignInRouteOptions extends ManagementRouteOptions {
  readonly limiter: FailureLimiter;
  readonly challenges: ChallengeBudget;
}

/**
 * The management principal of a request's bearer token, or `401 invalid_token` (whose realm
 * the error handler turns into `WWW-Authenticate`). One store lookup.
 *
 * @example
 * const principal = await managementPrincipal(deps, req);
 */
export function managementPrincipal(deps: AuthDeps, req: FastifyRequest): Promise<Principal> {
  return authenticate(deps, { token: bearerToken(req.headers.authorization), realm: 'management' });
}

const principals = new WeakMap<FastifyRequest, Principal>();

/**
 * An `onRequest` hook that authenticates the bearer token before the body or query is even
 * parsed (an unauthenticated caller learns nothing about the route's input rules), keeping the
 * principal for {@link principalOf}.
 *
 * @example
 * app.addHook('onRequest', requireManagementPrincipal(deps));
 */
export function requireManagementPrincipal(deps: AuthDeps): onRequestAsyncHookHandler {
  return async (req) => {
    principals.set(req, await managementPrincipal(deps, req));
  };
}

/**
 * The principal {@link requireManagementPrincipal} verified for this request.
 *
 * @example
 * const principal = principalOf(req);
 */
export function principalOf(req: FastifyRequest): Principal {
  const principal = principals.get(req);
  if (principal === undefined) throw new TypeError('principalOf: the route is missing the requireManagementPrincipal hook');
  return principal;
}

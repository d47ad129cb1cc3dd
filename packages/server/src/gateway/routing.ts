import type { IncomingMessage } from 'node:http';
import { type AppRoute, AuthError, appRouteTable, isReservedPath } from '@svc/core';
import type { GatewayPolicy } from './options.js';

/** The route each routed request was matched to, set by the gateway's identity step only. */
const matchedRoutes = new WeakMap<IncomingMessage, AppRoute>();

/**
 * The route of `:svc/app-routes` the gateway matched `req` to, or undefined (the one-route
 * shorthand, module mode, or a request that did not pass the identity step). Only the
 * gateway's identity step records it: nothing a request carries can choose it.
 *
 * @example
 * const upstream = routeOf(req.raw)?.to;
 */
export function routeOf(req: IncomingMessage): AppRoute | undefined {
  return matchedRoutes.get(req);
}

/** How the gateway picks the policy of a request: one for every request, or its route's. */
export interface GatewayRouting {
  /** Whether the gateway serves `:svc/app-routes` (and refuses every request no route matches). */
  readonly routed: boolean;
  /**
   * The policy `req` is judged by. With routes: the matched route's (recorded for
   * {@link routeOf}), from the request's canonical origin and decoded path.
   *
   * @throws {AuthError} `not_found` when routes are configured and none matches.
   */
  policyFor(req: IncomingMessage, origin: string | null, path: string): GatewayPolicy;
  /** Whether `origin` is one a route serves (always false without routes). */
  serves(origin: string | null): boolean;
}

/**
 * The routing of a gateway with `policy`: without routes every request gets `policy` itself;
 * with routes, each route its own policy (its `:public`, its `:require` over every other path,
 * the gateway's identity headers), built once here, matched per request by core's
 * `appRouteTable` (one lookup by origin, one per path segment).
 *
 * `reservedOrigins` (the sign-in handoff's origins) are served for the gateway's own `/.svc/`
 * routes even when no route has them: a dedicated auth origin.
 *
 * @throws {TypeError} when routes are combined with gateway-wide public paths or requirements.
 */
export function gatewayRouting(policy: GatewayPolicy, reservedOrigins: readonly string[] = []): GatewayRouting {
  const routes = policy.routes ?? [];
  if (routes.length === 0) return { routed: false, policyFor: () => policy, serves: () => false };
  if (policy.publicPaths.length > 0 || policy.requirements.length > 0) {
    throw new TypeError('with routes, public paths and requirements are per route');
  }
  const table = appRouteTable(routes);
  const policies = new Map<AppRoute, GatewayPolicy>(
    routes.map((route) => [
      route,
      { publicPaths: route.publicPaths, identityHeaders: policy.identityHeaders, requirements: [], requirement: route.requirement },
    ]),
  );
  return {
    routed: true,
    serves: (origin) => table.serves(origin),
    policyFor(req, origin, path) {
      // The gateway's own routes (sign-in, account page, JWK Set) are served on every route origin.
      if (isReservedPath(path)) {
        // A dedicated sign-in origin (`:svc/app-auth-origin` that no route has) serves them too.
        if (!table.serves(origin) && (origin === null || !reservedOrigins.includes(origin)))
          throw new AuthError('not_found', 'no application is served at this address');
        return policy;
      }
      const route = table.match(origin, path);
      if (route === null) throw new AuthError('not_found', 'no application is served at this address');
      matchedRoutes.set(req, route);
      return policies.get(route) as GatewayPolicy;
    },
  };
}

// Realm-generic authentication of a request's bearer token: the management API, the node
// surface and the application gateway all authenticate through these, each naming its realm.
import { type AuthDeps, AuthError, authenticate, type DpopRequest, type Principal, type Realm, revokeExposedSession } from '@svc/core';
import type { FastifyInstance, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { accessCredential, bearerToken, dpopRequestOf } from './bearer.js';
import { isLoopbackAddress } from './loopback.js';

/**
 * The management principal of a request's bearer token, or `401 invalid_token` (whose realm
 * the error handler turns into `WWW-Authenticate`). One store lookup.
 *
 * A management-realm bearer is only ever accepted from a loopback peer (the TCP peer address,
 * never a header): `403 management_bearer_not_loopback` otherwise, before the token is even
 * looked up. The management API only binds loopback anyway; the node surface may bind a
 * network address over plain HTTP, where a management token would be readable by anyone on
 * the path, and remote administration must go through an authenticated transport (an SSH
 * tunnel), as for the management API. A live management token that arrives that way anyway is
 * treated as disclosed: its session is revoked (reason `token_exposed`, audited).
 *
 * @example
 * const principal = await managementPrincipal(deps, req);
 */
export function managementPrincipal(deps: AuthDeps, req: FastifyRequest): Promise<Principal> {
  // Not an async function: the hot path hands on `authenticate`'s own promise, without a promise
  // and two microtask turns of its own per request (docs/performance.md, 2026-11-29 at 16:00).
  if (!isLoopbackAddress(req.socket.remoteAddress)) return refuseRemoteManagementBearer(deps, req);
  const credential = accessCredential(req.headers.authorization);
  return authenticate(deps, {
    token: credential.token,
    realm: 'management',
    ...(credential.dpop ? { dpop: dpopRequestOf(req, `${req.protocol}://${req.host}`) } : {}),
  });
}

/** The refusal of a management bearer from a non-loopback peer, once its live session is revoked as disclosed. */
async function refuseRemoteManagementBearer(deps: AuthDeps, req: FastifyRequest): Promise<never> {
  // A live management token that crossed the network is disclosed: whoever was on the path
  // may hold a copy, so its session ends now (and the refusal below is the same either way).
  const token = bearerToken(req.headers.authorization);
  if (token !== undefined && token !== '') {
    const exposed = await authenticate(deps, { token, realm: 'management' }).catch(() => null);
    if (exposed !== null) await revokeExposedSession(deps, { principal: exposed, where: 'non-loopback peer' });
  }
  throw new AuthError(
    'management_bearer_not_loopback',
    'management-realm requests are accepted only from this machine (loopback); reach the node through an SSH tunnel',
  );
}

/**
 * The principal of a request's bearer token in `realm`, or `401 invalid_token`: the management
 * realm through {@link managementPrincipal} (loopback peers only), the application realm
 * through {@link applicationPrincipal}. A token of another realm is refused like an unknown
 * one. One store lookup on success.
 *
 * @example
 * const principal = await bearerPrincipal(deps, req, 'application');
 */
export function bearerPrincipal(
  deps: AuthDeps,
  req: FastifyRequest,
  realm: Realm,
  originOf: (req: FastifyRequest) => string = (r) => `${r.protocol}://${r.host}`,
): Promise<Principal> {
  if (realm === 'management') return managementPrincipal(deps, req);
  const credential = accessCredential(req.headers.authorization);
  return applicationPrincipal(deps, credential.token, req.ip, credential.dpop ? dpopRequestOf(req, originOf(req)) : undefined);
}

/**
 * The application-realm principal of `token` (the request's bearer), or `401 invalid_token`.
 * A live MANAGEMENT token refused here that came from a client off this machine
 * (`clientAddress`: `req.ip`, so the client behind a trusted proxy) crossed the network to the application listener: it is
 * treated as disclosed, as on the node surface, and its session is revoked (reason
 * `token_exposed`, audited). The extra lookup happens only on that failure path.
 *
 * @example
 * const principal = await applicationPrincipal(deps, bearerToken(req.headers.authorization), req.ip);
 */
export async function applicationPrincipal(
  deps: AuthDeps,
  token: string | undefined,
  clientAddress: string | undefined,
  dpop?: DpopRequest,
): Promise<Principal> {
  try {
    return await authenticate(deps, { token, realm: 'application', ...(dpop === undefined ? {} : { dpop }) });
  } catch (err) {
    if (
      err instanceof AuthError &&
      err.code === 'invalid_token' &&
      token !== undefined &&
      token !== '' &&
      !isLoopbackAddress(clientAddress)
    ) {
      const exposed = await authenticate(deps, { token, realm: 'management' }).catch(() => null);
      if (exposed !== null) await revokeExposedSession(deps, { principal: exposed, where: 'application gateway, non-loopback client' });
    }
    throw err;
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The principal {@link requireManagementPrincipal} verified for this request; null on a route without it. */
    principal: Principal | null;
  }
}

/**
 * Gives every request of `app` a `principal` slot (null until a bearer hook fills it), the
 * Fastify way: one shape for all requests. Idempotent, since the management and node route
 * lists may be registered on one app (the OpenAPI generator).
 *
 * @example
 * decoratePrincipal(app);
 * app.get('/v1/auth/devices', { onRequest: requireManagementPrincipal(deps) }, (req) => list(principalOf(req)));
 */
export function decoratePrincipal(app: FastifyInstance): void {
  if (!app.hasRequestDecorator('principal')) app.decorateRequest('principal', null);
}

/**
 * An `onRequest` hook that authenticates the bearer token before the body or query is even
 * parsed (an unauthenticated caller learns nothing about the route's input rules), keeping the
 * principal on the request for {@link principalOf}. The app needs {@link decoratePrincipal}.
 *
 * @example
 * app.addHook('onRequest', requireManagementPrincipal(deps));
 */
export function requireManagementPrincipal(deps: AuthDeps): onRequestAsyncHookHandler {
  return requireBearerPrincipal(deps, 'management');
}

/**
 * {@link requireManagementPrincipal} for any realm: an `onRequest` hook that keeps the
 * {@link bearerPrincipal} of `realm` on the request for {@link principalOf}.
 *
 * @example
 * app.post('/.svc/auth/v1/revoke', { onRequest: requireBearerPrincipal(deps, 'application') }, handler);
 */
export function requireBearerPrincipal(
  deps: AuthDeps,
  realm: Realm,
  originOf?: (req: FastifyRequest) => string,
): onRequestAsyncHookHandler {
  return async (req) => {
    req.principal = await bearerPrincipal(deps, req, realm, originOf);
  };
}

/**
 * The principal {@link requireManagementPrincipal} verified for this request.
 *
 * @example
 * const principal = principalOf(req);
 */
export function principalOf(req: FastifyRequest): Principal {
  const principal = req.principal;
  if (principal === null) throw new TypeError('principalOf: the route is missing the requireManagementPrincipal hook');
  return principal;
}

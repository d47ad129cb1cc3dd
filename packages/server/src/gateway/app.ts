import type { IncomingMessage, Server } from 'node:http';
import {
  type AuthDeps,
  AuthError,
  type BrowserCookieNames,
  canonicalOrigin,
  csrfRefusal,
  identityHeaderPredicate,
  isCanonicalReservedTarget,
  isPublicPath,
  isReservedPath,
  isSvcCredential,
  type Principal,
  principalKeyBinding,
  providerAmr,
  RESERVED_PREFIX,
  requirementFor,
  SCIM_BASE_PATH,
  unmetRequirement,
  WEBSOCKET_SESSION_CHECK_SECONDS,
} from '@svc/core';
import type { AppPathRequirement } from '@svc/core/config';
import Fastify, { type FastifyInstance, type FastifyPluginAsync, type FastifyRequest, type onRequestAsyncHookHandler } from 'fastify';
import { accessCredential, bearerChallenge, dpopRequestOf } from '../http/bearer.js';
import { type ChallengeBudget, createChallengeBudget } from '../http/challenge-budget.js';
import { APPLICATION_CONNECTION_LIMITS, installConnectionLimits } from '../http/connection-limits.js';
import { installDpopNonces } from '../http/dpop-nonce.js';
import { setHtmlRefusals, toAuthError } from '../http/error-handling.js';
import { createFailureLimiter, type FailureLimiter } from '../http/failure-limiter.js';
import { hardenSurface } from '../http/harden.js';
import { ownSessionRoutes } from '../http/own-session-routes.js';
import { applicationPrincipal, decoratePrincipal } from '../http/principal.js';
import { serverOptions } from '../http/server-options.js';
import { sessionRoutes } from '../http/session-routes.js';
import { signInRoutes } from '../http/sign-in-routes.js';
import { instrumentHttp, methodLabel, UNMATCHED_ROUTE } from '../metrics/instrument-http.js';
import { DEFAULT_BRAND, type PageBrand } from '../pages/layout.js';
import { accountRoutes } from './account-routes.js';
import { cookieNamesOf, dropForeignSessionCookies, readSessionCookies, stripSessionCookies } from './browser-cookies.js';
import { browserRoutes } from './browser-routes.js';
import {
  applyCookieEffects,
  type CookieEffects,
  cookieIdentity,
  gatewayOriginOf,
  isBrowserNavigation,
  upgradeTransport,
} from './browser-session.js';
import { installHeaderHygiene, removeHeaders, requestPath } from './hygiene.js';
import { markProvenKey } from './key-binding.js';
import type { GatewayAppOptions, GatewayPolicy } from './options.js';
import { gatewayRefusalPage, rawRefusalPage, refusalContextOf, requirementRefusal, stepUpLocation, stepUpReason } from './refusal-page.js';
import { type GatewayRouting, gatewayRouting } from './routing.js';
import { scimRoutes } from './scim-routes.js';
import { createSessionWatcher, type SessionWatcher } from './session-watch.js';
import { type SsoOptions, signInLocation, ssoRoutes } from './sso-routes.js';
import { forwardedClientAddress, trustedPeerPredicate } from './trusted-proxies.js';

/** The reserved path prefix of the gateway (core's rule): never reaches the application, in any letter case. */
export { isReservedPath, RESERVED_PREFIX } from '@svc/core';

/** Where the application-realm sign-in lives (the same plugin as the management API's `/v1/auth`). */
export const APPLICATION_AUTH_PREFIX = '/.svc/auth/v1';

/** The path of the JWK Set of the keys that sign `Svc-Assertion`. */
export const JWKS_PATH = '/.svc/jwks.json';

/** The `WWW-Authenticate` of a principal that is known but does not meet the path's requirement (RFC 6750 §3.1). */
export const INSUFFICIENT_SCOPE_CHALLENGE = 'Bearer realm="application", error="insufficient_scope"';

/** The OpenAPI security requirement of the application-realm bearer routes. */
const APPLICATION_BEARER = [{ applicationBearer: [] }];

/** Whether `name` is the `Authorization` header, or the `DPoP` proof that went with our token. */
function isAuthorization(name: string): boolean {
  return (name.length === 13 && name.toLowerCase() === 'authorization') || (name.length === 4 && name.toLowerCase() === 'dpop');
}

/** What the identity step needs of a request, whether Fastify routes it or it is an `upgrade`. */
interface IdentityInput {
  /** The decoded, unambiguous path ({@link requestPath}). */
  readonly path: string;
  /** The request target as received (`req.url`), for a DPoP proof's `htu`. */
  readonly target: string;
  readonly authorization: string | undefined;
  /** The `DPoP` header (RFC 9449), checked when `authorization` uses the `DPoP` scheme. */
  readonly dpop: string | string[] | undefined;
  /** The client address (`req.ip`: the client behind a trusted proxy). */
  readonly clientAddress: string | undefined;
  /** The `Cookie` header, and the cookie names of the request's transport (TLS or not). */
  readonly cookie: string | undefined;
  readonly cookieNames: BrowserCookieNames;
  /** What the CSRF rule reads of a cookie-authenticated request. */
  readonly method: string;
  readonly origin: string | undefined;
  readonly secFetchSite: string | undefined;
  readonly gatewayOrigin: string;
  /** A websocket upgrade: no transparent refresh (no response to carry new cookies), and the CSRF rule applies. */
  readonly upgrade: boolean;
  /** What the cookies changed, for the routed reply: a refreshed pair, or cookies to clear. */
  readonly effects: CookieEffects;
}

/** What the identity step settled: nothing for a reserved path (its routes authenticate), else the principal. */
type IdentityOutcome =
  | { readonly reserved: true }
  | {
      readonly reserved: false;
      readonly principal: Principal | null;
      readonly removeAuthorization: boolean;
      /** The thumbprint of the key the request proved possession of (DPoP), or null. */
      readonly provenKey?: string | null;
    };

/**
 * The gateway's identity rule, one home for the routed requests and the `upgrade`s:
 * authenticates the application-realm bearer, or, when no `Authorization` header is sent at
 * all, the browser's session cookies (an `Authorization` header always wins: the two are never
 * mixed); applies the public paths and the per-path requirements, and says whether the
 * `Authorization` header carried our token (to be removed). Refusals are thrown as
 * {@link AuthError}s (`401 invalid_token`, `403 insufficient_claims`, `403 csrf_refused`).
 *
 * Cookies: an expired or unknown access cookie with a live refresh cookie is refreshed
 * transparently (`input.effects.refreshed`, set as new cookies on the reply); cookies that
 * prove nothing are cleared (`input.effects.clear`). A cookie-authenticated request with a
 * method that changes state (and every cookie-authenticated upgrade) must come from the
 * gateway's own origin (core's `csrfRefusal`), checked before any refresh; on a public path
 * such a request just goes on without the principal.
 *
 * A bearer on a public path: a valid application token gives the request its principal; any
 * other credential of ours ({@link isSvcCredential}: expired, revoked, another realm, a refresh
 * token, malformed) is dropped and the request goes on with `principal` null, so a public path
 * never fails because of a bad token; a credential that is not ours (another scheme, a foreign
 * bearer) is left for the application.
 * A path that matches a requirement is never public.
 */
async function settleIdentity(deps: AuthDeps, policy: GatewayPolicy, input: IdentityInput): Promise<IdentityOutcome> {
  const { path } = input;
  if (isReservedPath(path)) {
    // Any other spelling of the prefix would miss the gateway's own (case-sensitive) routes.
    if (!isCanonicalReservedTarget(input.target)) throw new AuthError('not_found', 'no such route');
    return { reserved: true };
  }
  if (input.authorization === undefined) {
    const cookies = readSessionCookies(input.cookie, input.cookieNames);
    if (cookies.access !== undefined || cookies.refresh !== undefined) return settleCookieIdentity(deps, policy, input, cookies);
  }
  const { token, dpop } = accessCredential(input.authorization);
  const ours = isSvcCredential(token);
  const proof = dpop
    ? dpopRequestOf({ method: input.method, url: input.target, headers: { dpop: input.dpop } }, input.gatewayOrigin)
    : undefined;
  const { requirement, isPublic } = pathPolicy(policy, path);
  let principal: Principal | null = null;
  if (isPublic) {
    if (ours) principal = await applicationPrincipal(deps, token, input.clientAddress, proof).catch(() => null);
  } else {
    principal = await applicationPrincipal(deps, token, input.clientAddress, proof);
    if (requirement !== null) checkRequirement(deps, requirement, principal);
  }
  const provenKey = proof !== undefined && principal !== null ? principalKeyBinding(principal) : null;
  return { reserved: false, principal, removeAuthorization: ours, provenKey };
}

/**
 * The requirement `path` is held to under `policy`, and whether it is public: an entry of
 * `requirements` that covers the path (a path that matches a requirement is never public);
 * else a public path; else the policy's `requirement` over every other path (a route's
 * `:require`), or none.
 */
function pathPolicy(policy: GatewayPolicy, path: string): { readonly requirement: AppPathRequirement | null; readonly isPublic: boolean } {
  const pathRequirement = requirementFor(policy.requirements, path);
  if (pathRequirement !== null) return { requirement: pathRequirement, isPublic: false };
  if (isPublicPath(policy.publicPaths, path)) return { requirement: null, isPublic: true };
  return { requirement: policy.requirement ?? null, isPublic: false };
}

/**
 * Refuses `principal` where it does not meet `requirement` (core's `unmetRequirement`):
 * `403 insufficient_claims` with `WWW-Authenticate: ... error="insufficient_scope"`, as a
 * {@link requirementRefusal} so a browser can be shown who it is and what the path needs.
 */
function checkRequirement(deps: AuthDeps, requirement: AppPathRequirement, principal: Principal): void {
  const unmet = unmetRequirement(requirement, principal, deps.clock.now());
  if (unmet !== null) throw requirementRefusal(requirement, principal, unmet, { 'www-authenticate': INSUFFICIENT_SCOPE_CHALLENGE });
}

/** {@link settleIdentity} for a request that carries the gateway's session cookies and no `Authorization`. */
async function settleCookieIdentity(
  deps: AuthDeps,
  policy: GatewayPolicy,
  input: IdentityInput,
  cookies: ReturnType<typeof readSessionCookies>,
): Promise<IdentityOutcome> {
  const { requirement, isPublic } = pathPolicy(policy, input.path);
  const forged = csrfRefusal({
    method: input.method,
    origin: input.origin,
    secFetchSite: input.secFetchSite,
    gatewayOrigin: input.gatewayOrigin,
    upgrade: input.upgrade,
  });
  if (forged !== null) {
    // On a public path the cookies simply do not count; elsewhere the request is refused,
    // before a refresh could rotate anything on a forged request's behalf.
    if (isPublic) return { reserved: false, principal: null, removeAuthorization: false };
    throw new AuthError('csrf_refused', `${forged}; a request authenticated by session cookies must come from this origin`);
  }
  let identity: Awaited<ReturnType<typeof cookieIdentity>>;
  try {
    identity = await cookieIdentity(deps, cookies, input.clientAddress, !input.upgrade);
  } catch (err) {
    if (isPublic) return { reserved: false, principal: null, removeAuthorization: false };
    throw err;
  }
  input.effects.refreshed = identity.refreshed;
  input.effects.clear = identity.stale;
  const principal = identity.principal;
  if (principal === null) {
    if (isPublic) return { reserved: false, principal: null, removeAuthorization: false };
    throw new AuthError('invalid_token', 'the session cookies are expired or revoked; sign in again', { realm: 'application' });
  }
  if (requirement !== null) checkRequirement(deps, requirement, principal);
  return { reserved: false, principal, removeAuthorization: false };
}

/**
 * The upgrades the gateway's own upgrade gate settled, with their principal. An `upgrade`
 * listener may route the request through Fastify (as `@fastify/http-proxy` does for
 * websockets): the identity hook then takes the principal settled here (the `Authorization`
 * header is already gone) instead of authenticating twice. Only the gate writes it, so
 * nothing else can make a raw request look settled.
 */
const settledUpgrades = new WeakMap<IncomingMessage, Principal | null>();

/** Defines `principal` on `target` read-only and non-configurable: nothing that runs later can replace or redefine it. */
function fixPrincipal(target: object, principal: Principal | null): void {
  Object.defineProperty(target, 'principal', { value: principal, writable: false, configurable: false, enumerable: true });
}

/**
 * The gateway's identity step, an `onRequest` hook of the root context (so it runs before
 * anything an attach registers, and for unknown paths too): {@link settleIdentity}, then the
 * `Authorization` header carrying our token is removed and `request.principal` is defined
 * read-only and non-configurable. Requests under `/.svc/` are left to their own routes.
 */
function gatewayIdentity(deps: AuthDeps, routing: GatewayRouting, browser: BrowserOptions): onRequestAsyncHookHandler {
  return async (req, reply) => {
    if (settledUpgrades.has(req.raw)) {
      fixPrincipal(req, settledUpgrades.get(req.raw) ?? null);
      return;
    }
    const effects: CookieEffects = { refreshed: null, clear: false };
    const path = requestPath(req.raw);
    let outcome: IdentityOutcome;
    try {
      // With routes, the request's own origin picks the route (a request no route matches is
      // refused here, before anything else is done for it).
      const policy = routing.policyFor(req.raw, routing.routed ? gatewayOriginOf(req, undefined) : null, path);
      outcome = await settleIdentity(deps, policy, {
        path,
        target: req.raw.url ?? '',
        authorization: req.headers.authorization,
        dpop: req.headers.dpop,
        clientAddress: req.ip,
        cookie: req.headers.cookie,
        cookieNames: cookieNamesOf(req),
        method: req.method,
        origin: req.headers.origin,
        secFetchSite: firstValue(req.headers['sec-fetch-site']),
        gatewayOrigin: gatewayOriginOf(req, browser.publicOrigin),
        upgrade: false,
        effects,
      });
    } catch (err) {
      applyCookieEffects(req, reply, effects);
      // A browser opening a page without a session goes to the sign-in page (when there is
      // one to offer), and comes back to the page after; everything else keeps the 401.
      if (browser.signInPage && err instanceof AuthError && err.code === 'invalid_token' && isBrowserNavigation(req)) {
        return reply.redirect(signInLocation(browser.sso, gatewayOriginOf(req, browser.publicOrigin), req.url), 302);
      }
      // A browser that is signed in but whose sign-in is too old, or not by the method the path
      // needs, signs in again (with a provider that can satisfy it) and comes back: step-up.
      // Any other browser refused by a requirement is told who it is and what the path needs
      // (the error path's page); every other client keeps the problem+json.
      const refused = refusalContextOf(err);
      if (refused !== undefined && browser.signInPage && isBrowserNavigation(req)) {
        const reason = stepUpReason(refused.requirement, refused.principal, deps.clock.now());
        if (reason !== null && browser.canStepUp(refused.requirement)) return reply.redirect(stepUpLocation(req.url, reason), 302);
      }
      throw err;
    }
    if (outcome.reserved) return;
    applyCookieEffects(req, reply, effects);
    if (outcome.removeAuthorization) removeHeaders(req.raw, isAuthorization);
    if (typeof outcome.provenKey === 'string') markProvenKey(req.raw, outcome.provenKey);
    stripSessionCookies(req.raw);
    fixPrincipal(req, outcome.principal);
  };
}

/** The first value of a header that may be repeated. */
function firstValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** What the identity step needs to know about browsers. */
interface BrowserOptions {
  readonly publicOrigin: string | undefined;
  /** Whether the gateway has a sign-in page with at least one provider (browsers without a session are sent there). */
  readonly signInPage: boolean;
  /** Whether a provider of the sign-in page can produce a sign-in `requirement` accepts (its `:amr`). */
  readonly canStepUp: (requirement: AppPathRequirement) => boolean;
  /** One sign-in across route hosts, when configured: a route host sends browsers to the auth origin. */
  readonly sso: SsoOptions | undefined;
}

/**
 * The same identity step for an `upgrade` (websockets), which Fastify never routes: refused
 * upgrades get their problem+json written onto the socket (with `WWW-Authenticate`), reserved
 * paths `404`; an accepted one goes on to the `upgrade` listeners with the `Authorization`
 * header removed and `req.principal` (see {@link upgradePrincipal}) defined read-only.
 */
function upgradeIdentity(
  deps: AuthDeps,
  routing: GatewayRouting,
  trustedPeer: (address: string | undefined) => boolean,
  publicOrigin: string | undefined,
  sessions: SessionWatcher,
): (req: IncomingMessage) => Promise<AuthError | null> {
  return async (req) => {
    const authorization = req.headers.authorization;
    const forwarded = req.headers['x-forwarded-for'];
    const forwardedFor = Array.isArray(forwarded) ? forwarded.join(',') : forwarded;
    const clientAddress = forwardedClientAddress(req.socket.remoteAddress, forwardedFor, trustedPeer);
    const transport = upgradeTransport(req, trustedPeer(req.socket.remoteAddress), publicOrigin);
    let outcome: IdentityOutcome;
    try {
      const path = requestPath(req);
      const origin = routing.routed ? upgradeTransport(req, trustedPeer(req.socket.remoteAddress), undefined).origin : null;
      const policy = routing.policyFor(req, origin, path);
      outcome = await settleIdentity(deps, policy, {
        path,
        target: req.url ?? '',
        authorization,
        dpop: req.headers.dpop,
        clientAddress,
        cookie: req.headers.cookie,
        cookieNames: transport.names,
        method: req.method ?? 'GET',
        origin: req.headers.origin,
        secFetchSite: firstValue(req.headers['sec-fetch-site']),
        gatewayOrigin: transport.origin,
        upgrade: true,
        effects: { refreshed: null, clear: false },
      });
    } catch (err) {
      const refusal = toAuthError(err);
      if (refusal.code !== 'invalid_token') return refusal;
      const challenge = bearerChallenge('application', authorization !== undefined);
      return new AuthError(refusal.code, refusal.detail, {
        headers: { ...refusal.headers, 'www-authenticate': challenge },
        realm: 'application',
      });
    }
    if (outcome.reserved) return new AuthError('not_found', 'no such route');
    if (outcome.removeAuthorization) removeHeaders(req, isAuthorization);
    if (typeof outcome.provenKey === 'string') markProvenKey(req, outcome.provenKey);
    stripSessionCookies(req);
    fixPrincipal(req, outcome.principal);
    settledUpgrades.set(req, outcome.principal);
    // The upgrade lives no longer than its session: re-checked until its socket closes.
    if (outcome.principal !== null) sessions.watch(req, outcome.principal);
    return null;
  };
}

/**
 * The principal the gateway settled for an `upgrade` request (websockets) before any `upgrade`
 * listener saw it: the frozen principal, or null on a public path. An `upgrade` listener on
 * the gateway's server only ever receives requests that passed the identity step.
 *
 * @throws {TypeError} when `req` did not go through the gateway's identity step.
 * @example
 * app.server.on('upgrade', (req, socket, head) => proxyUpgrade(req, socket, head, upgradePrincipal(req)));
 */
export function upgradePrincipal(req: IncomingMessage): Principal | null {
  const descriptor = Object.getOwnPropertyDescriptor(req, 'principal');
  if (descriptor === undefined || descriptor.configurable !== false) {
    throw new TypeError('upgradePrincipal: this request did not go through the gateway identity step');
  }
  return descriptor.value as Principal | null;
}

/** What the reserved routes need. */
interface ReservedRouteOptions {
  readonly deps: AuthDeps;
  readonly limiter: FailureLimiter;
  readonly challenges: ChallengeBudget;
  readonly jwks: GatewayAppOptions['jwks'];
  readonly providers: NonNullable<GatewayAppOptions['providers']>;
  readonly publicOrigin: string | undefined;
  /** The budget of refused SCIM tokens (default: 30 per address unit per 60 s, its own scope). */
  readonly scimLimiter: FailureLimiter | undefined;
  readonly brand: PageBrand;
  readonly siteName: string | null;
  readonly requirements: readonly AppPathRequirement[];
  readonly sso: SsoOptions | undefined;
}

/**
 * The routes under `/.svc/`: the application-realm sign-in, `me` and `revoke` (the management
 * API's plugins, in the application realm), the JWK Set, and `404 not_found` for every other
 * path of the prefix, so no `/.svc/` request ever reaches the attach.
 */
const reservedRoutes: FastifyPluginAsync<ReservedRouteOptions> = async (
  app,
  { deps, limiter, challenges, jwks, providers, publicOrigin, scimLimiter, brand, siteName, requirements, sso },
) => {
  await app.register(signInRoutes, {
    prefix: APPLICATION_AUTH_PREFIX,
    realm: 'application',
    deps,
    limiter,
    challenges,
    guardProblems: [],
    // A DPoP proof's `htu` names the origin the client reached: the public one when configured.
    originOf: (req) => gatewayOriginOf(req, publicOrigin),
  });
  await app.register(sessionRoutes, {
    prefix: APPLICATION_AUTH_PREFIX,
    deps,
    realm: 'application',
    guardProblems: [],
    security: APPLICATION_BEARER,
    originOf: (req) => gatewayOriginOf(req, publicOrigin),
  });
  // Self-service: the caller's own sessions and devices, and sign-out everywhere else.
  await app.register(ownSessionRoutes, {
    prefix: APPLICATION_AUTH_PREFIX,
    deps,
    realm: 'application',
    guardProblems: [],
    security: APPLICATION_BEARER,
    originOf: (req) => gatewayOriginOf(req, publicOrigin),
  });
  await app.register(browserRoutes, {
    prefix: APPLICATION_AUTH_PREFIX,
    deps,
    providers,
    limiter,
    challenges,
    publicOrigin,
    brand,
    siteName,
    requirements,
    sso,
  });
  // One sign-in across route hosts: the handoff from the auth origin to each route host.
  if (sso !== undefined) await app.register(ssoRoutes, { prefix: APPLICATION_AUTH_PREFIX, deps, publicOrigin, sso });
  // The person's own account page (`/.svc/account`): sessions, passkeys, sign out.
  await app.register(accountRoutes, { deps, providers, publicOrigin, brand });
  // The company directory's provisioning (SCIM 2.0), authorised by SCIM tokens only.
  await app.register(scimRoutes, {
    prefix: SCIM_BASE_PATH,
    deps,
    publicOrigin,
    limiter: scimLimiter ?? createFailureLimiter({ clock: deps.clock, store: deps.store, scope: 'scim' }),
  });
  app.get(JWKS_PATH, async (_req, reply) => {
    const set = jwks === undefined ? { keys: [] } : jwks();
    return reply.type('application/jwk-set+json').send(JSON.stringify(set));
  });
  const reserved = async () => {
    throw new AuthError('not_found', 'no such route');
  };
  app.all('/.svc', reserved);
  app.all('/.svc/*', reserved);
};

/**
 * Builds the application gateway: the listener application callers reach (see the contract's
 * "Application gateway"). Every request, before routing or any hook:
 *
 * 1. **Hygiene** ({@link installHeaderHygiene}, at the raw Node level, upgrades included):
 *    smuggling, ambiguous framing and ambiguous paths are refused `400 invalid_request`; every
 *    identity header (core's {@link identityHeaderPredicate}, plus `policy.identityHeaders`) is
 *    removed, whatever its case or separators.
 * 2. **Reserved prefix** `/.svc/`: the application-realm sign-in under `/.svc/auth/v1`
 *    (`challenges`, `sessions`, `refresh`, `me`, `revoke`) from the same plugins as the
 *    management API, with its rules, errors, audit and failure limits; the browser routes
 *    (`login`, `providers/<name>/{begin,finish,callback}`, `logout`, see {@link browserRoutes});
 *    `GET /.svc/jwks.json`; the SCIM 2.0 service under `/.svc/scim/v2` (see {@link scimRoutes},
 *    authorised by SCIM tokens only); anything else `404 not_found`.
 * 3. **Identity** (every other path): an application-realm bearer, or, with no
 *    `Authorization` header, the browser's session cookies (refreshed transparently, CSRF
 *    checked: `403 csrf_refused`), or `401 invalid_token` with
 *    `WWW-Authenticate: Bearer realm="application"` (a browser opening a page is sent to the
 *    sign-in page instead when `opts.providers` has one); public paths go on with `principal`
 *    null; a path requirement not met is `403 insufficient_claims`. The `Authorization` header
 *    that carried our token and the gateway's cookies are removed; `request.principal` is
 *    defined read-only and non-configurable.
 * 4. **Attach** (`opts.attach`), in its own encapsulated context; without one, `404 not_found`.
 *    An upgrade let through with a principal is watched: its session is re-checked against the
 *    store every `opts.websocketSessionCheckMs` (default 5 s), and when it ends (or the access
 *    token that opened it expires) its `upgrade` listener is told (`onUpgradeSessionEnd`, the
 *    relay closes with 1008) and the connection is destroyed.
 *    A route the attach registers under `/.svc/` is refused at registration.
 *
 * With the shared hardening of every surface (problem+json errors, `Cache-Control: no-store`,
 * JSON-only bodies of at most 64 KiB on the gateway's own routes, the DNS-rebinding guard for
 * requests that arrive on a loopback address unless from a trusted proxy, connection caps).
 * `opts.https` makes it an HTTPS server; `opts.trustedProxies` are the peers whose
 * `X-Forwarded-For`/`-Proto` `req.ip`/`req.protocol` believe (none by default).
 *
 * @throws {TypeError} when a trusted proxy entry is not an address or CIDR.
 * @example
 * const app = await buildGatewayApp({ deps, policy, trustedProxies: [], attach: upstreamAttach(opts) });
 * await app.listen({ host: '0.0.0.0', port: 8080 });
 */
export async function buildGatewayApp(opts: GatewayAppOptions): Promise<FastifyInstance> {
  const { deps, policy } = opts;
  if (opts.publicOrigin !== undefined && canonicalOrigin(opts.publicOrigin) === null) {
    throw new TypeError(`publicOrigin must be an http(s) origin such as https://app.example.com: ${opts.publicOrigin}`);
  }
  const publicOrigin = opts.publicOrigin === undefined ? undefined : (canonicalOrigin(opts.publicOrigin) as string);
  const sso = checkedSso(opts.sso);
  const trustedPeer = trustedPeerPredicate(opts.trustedProxies);
  const base = serverOptions(opts.logger);
  const options = {
    ...base,
    trustProxy: opts.trustedProxies.length === 0 ? false : [...opts.trustedProxies],
    // No cap on a whole request's duration: a proxied upload or download may take as long as
    // it keeps moving (a 30 s cap would cut every large upload from a slow client). A stalled
    // one is still closed: the head within 10 s, then any socket silent for 30 s
    // (connectionTimeout), under the per-peer connection cap.
    requestTimeout: 0,
    ...(opts.https === undefined ? {} : { https: { cert: opts.https.cert, key: opts.https.key } }),
  };
  // The https overload gives an https.Server-typed instance; the surface code is server-agnostic.
  const app = Fastify(options as typeof base) as unknown as FastifyInstance;
  const metrics = opts.metrics;
  const checkMs = opts.websocketSessionCheckMs ?? WEBSOCKET_SESSION_CHECK_SECONDS * 1000;
  if (!Number.isInteger(checkMs) || checkMs < 1) throw new TypeError(`websocketSessionCheckMs must be a positive integer: ${checkMs}`);
  const sessions = createSessionWatcher(deps, checkMs);
  app.addHook('onClose', (_app, done) => {
    sessions.close();
    done();
  });
  const routing = gatewayRouting(policy, sso?.origins ?? []);
  const siteName = opts.siteName ?? null;
  const brand = opts.brand ?? (siteName === null ? DEFAULT_BRAND : { ...DEFAULT_BRAND, name: siteName });
  const hygiene = installHeaderHygiene(app.server as Server, identityHeaderPredicate(policy.identityHeaders), {
    upgradeGate: upgradeIdentity(deps, routing, trustedPeer, publicOrigin, sessions),
    // A browser that follows a link the hygiene refuses (a path with `;` parameters) gets a page too.
    page: rawRefusalPage(brand),
    // Refused before Fastify (smuggling, ambiguous paths, upgrades): counted like any other answer.
    ...(metrics === undefined
      ? {}
      : {
          onRefused: (req: IncomingMessage, refusal: AuthError) =>
            metrics.observeRequest({
              surface: 'application',
              method: methodLabel(req.method),
              route: UNMATCHED_ROUTE,
              status: refusal.status,
              seconds: 0,
              code: refusal.code,
            }),
        }),
  });
  // The DNS-rebinding guard lets through, on a loopback address, a trusted proxy and a request
  // that names the configured public origin (a proxy on this machine forwarding the public
  // host): a rebound hostile page names its own host, never the operator's.
  // With routes, the routes' exact origins take the guard's place: a request that names no
  // route's origin (a rebound hostile page's own host among them) is 404 and reaches nothing.
  // The sign-in handoff's origins (the auth origin among them) are named like the public one.
  const namesPublicOrigin = configuredOriginPredicate([
    ...(publicOrigin === undefined ? [] : [publicOrigin]),
    ...(sso === undefined ? [] : sso.origins),
  ]);
  hardenSurface(app, {
    loopbackOnly: false,
    guardExempt: (req) => routing.routed || trustedPeer(req.socket.remoteAddress) || namesPublicOrigin(req),
  });
  installDpopNonces(app, deps);
  installConnectionLimits(app, opts.connectionLimits ?? APPLICATION_CONNECTION_LIMITS);
  if (metrics !== undefined) instrumentHttp(app, metrics, 'application');
  decoratePrincipal(app);
  const providers = opts.providers ?? [];
  const appProviders = providers.filter((p) => p.policy.realms.includes('application'));
  app.addHook(
    'onRequest',
    gatewayIdentity(deps, routing, {
      publicOrigin,
      signInPage: providers.length > 0,
      sso,
      canStepUp: (requirement) =>
        appProviders.some((p) => requirement.amr === null || providerAmr(p).some((m) => requirement.amr?.includes(m) === true)),
    }),
  );
  // A browser's refusals are pages in the house layout (every other client: problem+json).
  setHtmlRefusals(
    app,
    gatewayRefusalPage({
      brand,
      providers: appProviders.map((p) => ({
        name: p.policy.name,
        kind: p.kind,
        signup: p.policy.jit.enabled,
        label: p.policy.label ?? null,
      })),
    }),
  );

  const limiter = opts.limiter ?? createFailureLimiter({ clock: deps.clock, store: deps.store, scope: 'app-signin' });
  const challenges = opts.challenges ?? createChallengeBudget({ clock: deps.clock });
  await app.register(reservedRoutes, {
    deps,
    limiter,
    challenges,
    jwks: opts.jwks,
    providers,
    publicOrigin,
    scimLimiter: opts.scimLimiter,
    brand,
    siteName,
    requirements: policy.requirements,
    sso,
  });

  // From here on, nothing may claim a reserved path.
  app.addHook('onRoute', (route) => {
    if (isReservedPath(route.url)) throw new TypeError(`the path prefix ${RESERVED_PREFIX} is reserved to the gateway: ${route.url}`);
  });
  // The gateway's own raw listeners (Fastify's request handler, the CONNECT answer) are in
  // place: nothing added from here on sees a request before identity.
  hygiene.seal();
  const attach = opts.attach;
  if (attach !== undefined) {
    // Called as a function inside a plain encapsulated plugin, so `fastify-plugin`'s
    // skip-override cannot lift what it registers into the root context.
    await app.register(async (scope) => {
      // The application's responses are the application's: the gateway's own
      // `Content-Security-Policy: default-src 'none'` (right for its JSON answers) would break
      // every page it serves. The other security headers stay as defaults the application may
      // override; refusals still get all of them (the error path sets them again).
      scope.addHook('onRequest', (_req, reply, done) => {
        reply.removeHeader('content-security-policy');
        done();
      });
      // The browser's session cookies are the gateway's alone: the application cannot set them.
      scope.addHook('onSend', (_req, reply, payload, done) => {
        dropForeignSessionCookies(reply);
        done(null, payload);
      });
      await attach(scope);
    });
  }
  return app;
}

/** The handoff options with every origin in its canonical spelling, the auth origin among them. */
function checkedSso(sso: SsoOptions | undefined): SsoOptions | undefined {
  if (sso === undefined) return undefined;
  const canonical = (o: string): string => {
    const c = canonicalOrigin(o);
    if (c === null) throw new TypeError(`sso origins must be http(s) origins such as https://auth.example.com: ${o}`);
    return c;
  };
  const authOrigin = canonical(sso.authOrigin);
  const origins = [...new Set([authOrigin, ...sso.origins.map(canonical)])];
  return Object.freeze({ authOrigin, origins: Object.freeze(origins) });
}

/**
 * Whether a request names one of the configured origins (the public origin, the route origins of
 * the sign-in handoff): its `Host` is that origin's host (and port), and its `Origin`, when
 * sent, is one of them. Always false without any.
 */
function configuredOriginPredicate(origins: readonly string[]): (req: FastifyRequest) => boolean {
  if (origins.length === 0) return () => false;
  const known = new Set(origins);
  const schemes = [...new Set(origins.map((o) => o.slice(0, o.indexOf(':'))))];
  return (req) => {
    const { host, origin } = req.headers;
    if (host === undefined || !schemes.some((scheme) => known.has(canonicalOrigin(`${scheme}://${host}`) ?? ''))) return false;
    return origin === undefined || known.has(canonicalOrigin(origin) ?? '');
  };
}

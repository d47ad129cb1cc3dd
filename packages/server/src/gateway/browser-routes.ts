import {
  ACCOUNT_PAGE_PATH,
  type AuthDeps,
  AuthError,
  type BrowserCookieNames,
  csrfRefusal,
  endReplacedSession,
  finishProviderFlow,
  isIdOfKind,
  type Principal,
  type ProviderHandle,
  type ProviderJson,
  type ProviderReply,
  type ProviderRequest,
  providerAmr,
  requirementFor,
  revokeSession,
  SSO_START_PATH,
  safeReturnPath,
  startProviderFlow,
} from '@svc/core';
import type { AppPathRequirement } from '@svc/core/config';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { bearerToken } from '../http/bearer.js';
import type { ChallengeBudget } from '../http/challenge-budget.js';
import { failureCounting } from '../http/failure-counting.js';
import { clientAddressKey, type FailureLimiter } from '../http/failure-limiter.js';
import { applicationPrincipal } from '../http/principal.js';
import { DEFAULT_BRAND, newNonce, type PageBrand, sendPage } from '../pages/layout.js';
import { clearSessionCookies, cookieNamesOf, readSessionCookies, setCookieValue, setSessionCookies } from './browser-cookies.js';
import { applyCookieEffects, cookieIdentity, gatewayOriginOf, LOGIN_PATH } from './browser-session.js';
import { renderLoginPage } from './login-page.js';
import { type SsoOptions, signInLocation } from './sso-routes.js';

/** What {@link browserRoutes} receives. */
export interface BrowserRouteOptions {
  readonly deps: AuthDeps;
  readonly providers: readonly ProviderHandle[];
  /** The budget of failed proofs, shared with the rest of the application-realm sign-in. */
  readonly limiter: FailureLimiter;
  /** The budget of unanswered challenges, shared with the signed-challenge sign-in: a begun flow is one. */
  readonly challenges: ChallengeBudget;
  /** The configured public origin, or undefined: each request's own (see `gatewayOriginOf`). */
  readonly publicOrigin: string | undefined;
  /** How the pages present the company (`:svc/app-brand`). */
  readonly brand?: PageBrand;
  /** The site's name as the passkey provider tells authenticators (`:webauthn/rp-name`), or null. */
  readonly siteName?: string | null;
  /** The path requirements: the sign-in page offers only the providers that can satisfy the page to come back to. */
  readonly requirements?: readonly AppPathRequirement[];
  /** One sign-in across route hosts: a route host's sign-in page sends the browser to the auth origin. */
  readonly sso?: SsoOptions | undefined;
}

/** The path of a return path (`/app?x=1` → `/app`). */
function pathOf(returnPath: string): string {
  const end = returnPath.search(/[?#]/);
  return end < 0 ? returnPath : returnPath.slice(0, end);
}

/** Intents a plain link (GET) may start: never `link`, which a cross-site page could trigger with the victim's session. */
const GET_INTENTS: ReadonlySet<string> = new Set(['signin', 'signup']);

const beginBody = {
  type: 'object',
  additionalProperties: false,
  required: ['intent'],
  properties: {
    intent: { type: 'string', enum: ['signin', 'link', 'signup'] },
    return: { type: 'string', maxLength: 2048 },
    pairing_intent_id: { type: 'string', maxLength: 64 },
    pairing_code: { type: 'string', maxLength: 64 },
  },
} as const;

interface BeginBody {
  readonly intent: 'signin' | 'link' | 'signup';
  readonly return?: string;
  readonly pairing_intent_id?: string;
  readonly pairing_code?: string;
}

/**
 * The flow cookie's value: the flow id and, base64url, the path to return to. Bound to the
 * browser that began the ceremony: only it can finish it.
 */
function flowCookieValue(flowId: string, returnPath: string | null): string {
  return returnPath === null ? flowId : `${flowId}.${Buffer.from(returnPath, 'utf8').toString('base64url')}`;
}

function parseFlowCookie(value: string | undefined): { readonly flowId: string; readonly returnPath: string | null } | null {
  if (value === undefined) return null;
  const dot = value.indexOf('.');
  if (dot < 0) return { flowId: value, returnPath: null };
  // Checked again: the cookie came back from the browser.
  return { flowId: value.slice(0, dot), returnPath: safeReturnPath(Buffer.from(value.slice(dot + 1), 'base64url').toString('utf8')) };
}

/** Seconds from now until `expiresAt` (epoch ms), at least 1. */
function secondsUntilExpiry(expiresAt: number, now: number): number {
  return Math.max(1, Math.ceil((expiresAt - now) / 1000));
}

function setFlowCookie(reply: FastifyReply, names: BrowserCookieNames, value: string, maxAgeSeconds: number): void {
  reply.header('set-cookie', setCookieValue(names, names.flow, value, maxAgeSeconds));
}

function clearFlowCookie(reply: FastifyReply, names: BrowserCookieNames): void {
  reply.header('set-cookie', setCookieValue(names, names.flow, '', 0));
}

/**
 * A provider's redirect, checked: an absolute `http(s)` URL and nothing else (a provider is
 * untrusted: no `javascript:`, no scheme-relative trick reaches a `Location`).
 */
function checkedRedirect(reply: ProviderReply & { kind: 'redirect' }): string {
  let url: URL;
  try {
    url = new URL(reply.location);
  } catch {
    throw new AuthError('internal_error', 'the provider answered a redirect that is not a URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new AuthError('internal_error', 'the provider answered a redirect that is not http(s)');
  return url.href;
}

/** The query of a request as a provider sees it: one value per name (a repeated name is ambiguous and refused). */
function providerQuery(req: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries((req.query ?? {}) as Record<string, unknown>)) {
    if (typeof value !== 'string') throw new AuthError('invalid_request', `the query parameter ${name.slice(0, 40)} is repeated`);
    out[name] = value;
  }
  return out;
}

/**
 * An `onRequest` hook for the state-changing browser routes: unless the request carries an
 * `Authorization` header (a bearer client, which no browser sends on its own), it must come
 * from the gateway's own origin (core's `csrfRefusal`): `403 csrf_refused` otherwise, before
 * its body is read.
 */
function sameOriginOnly(publicOrigin: string | undefined): onRequestAsyncHookHandler {
  return async (req) => {
    if (req.headers.authorization !== undefined) return;
    const site = req.headers['sec-fetch-site'];
    const refusal = csrfRefusal({
      method: req.method,
      origin: req.headers.origin,
      secFetchSite: Array.isArray(site) ? site[0] : site,
      gatewayOrigin: gatewayOriginOf(req, publicOrigin),
    });
    if (refusal !== null) throw new AuthError('csrf_refused', `${refusal}; this route only answers this origin's own pages`);
  };
}

/**
 * The caller's application principal on a reserved route (which the gateway's identity step
 * leaves alone): the bearer when an `Authorization` header is sent (a bad one is
 * `401 invalid_token`), else the session cookies, refreshed transparently, else null.
 */
async function callerPrincipal(deps: AuthDeps, req: FastifyRequest, reply: FastifyReply): Promise<Principal | null> {
  const authorization = req.headers.authorization;
  if (authorization !== undefined) return applicationPrincipal(deps, bearerToken(authorization), req.ip);
  const cookies = readSessionCookies(req.headers.cookie, cookieNamesOf(req));
  const identity = await cookieIdentity(deps, cookies, req.ip, true);
  applyCookieEffects(req, reply, { refreshed: identity.refreshed, clear: identity.stale });
  return identity.principal;
}

function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Accepts a form body on logout (a plain `<form method="post">` button) without reading it. */
const IGNORED_FORM_BODY_LIMIT = 1024;

/**
 * The browser side of the application realm, under `/.svc/auth/v1` (docs/providers.md
 * section 4): the sign-in page, each provider's ceremony (`begin`, `finish`, `callback`) and
 * logout. A finished provider sign-in ends in the same session and token pair as any other
 * (core's `finishProviderFlow` creates it: a provider can only prove an identity), kept in
 * `HttpOnly`, `SameSite=Lax` cookies; the flow in progress is a cookie too, so only the
 * browser that began a ceremony can finish it. Every state-changing route refuses other
 * origins (`403 csrf_refused`); an unknown provider is `404 not_found`.
 *
 * @example
 * await app.register(browserRoutes, { prefix: '/.svc/auth/v1', deps, providers, limiter, challenges, publicOrigin: undefined });
 */
export const browserRoutes: FastifyPluginAsync<BrowserRouteOptions> = async (
  app,
  { deps, providers, limiter, challenges, publicOrigin, brand = DEFAULT_BRAND, siteName = null, requirements = [], sso },
) => {
  // A finish that fails as a proof (401) is counted against the client's address unit, as a
  // failed signed challenge is: over the budget, 429 before anything is asked of a provider.
  await app.register(failureCounting, { limiter });
  const attempts = { attemptKeys: (req: FastifyRequest) => [clientAddressKey(req.ip)] };
  const byName = new Map<string, ProviderHandle>();
  for (const provider of providers) {
    if (!provider.policy.realms.includes('application')) continue;
    if (byName.has(provider.policy.name)) throw new TypeError(`two providers are named ${provider.policy.name}`);
    byName.set(provider.policy.name, provider);
  }
  const providerNamed = (name: string): ProviderHandle => {
    const provider = byName.get(name);
    if (provider === undefined) throw new AuthError('not_found', 'no such provider');
    return provider;
  };
  const sameOrigin = sameOriginOnly(publicOrigin);

  // A refusal a browser meets here (a callback refused, a provider down, a bad link) is a page
  // for the person, with the same status and code: the gateway's one error path renders it
  // (`gatewayRefusalPage`); every other client gets problem+json.

  app.get<{ Querystring: { return?: string; pairing?: string; 'step-up'?: string } }>('/login', async (req, reply) => {
    const nonce = newNonce();
    const pairing = req.query.pairing;
    if (pairing !== undefined && !isIdOfKind(pairing, 'intent')) {
      throw new AuthError('invalid_request', 'pairing must be a link intent id (int_...)');
    }
    // A recovery or invitation code (a link intent) lands on the account page unless told otherwise:
    // the new passkey is there, and so is the lost one to remove.
    const returnPath = safeReturnPath(req.query.return) ?? (pairing === undefined ? '/' : ACCOUNT_PAGE_PATH);
    // One sign-in across route hosts: a route host's browsers sign in at the auth origin. A
    // recovery or invitation link still signs in here (it adds a passkey to this host's origin),
    // and so does a step-up: a handoff carries the sign-in it hands off, never a newer one.
    if (sso !== undefined && pairing === undefined && req.query['step-up'] === undefined) {
      const location = signInLocation(sso, gatewayOriginOf(req, publicOrigin), returnPath);
      if (location.startsWith(SSO_START_PATH)) return reply.redirect(location, 302);
    }
    // Only the providers whose sign-ins can satisfy the page to come back to (its `:amr`).
    const requirement = requirementFor(requirements, pathOf(returnPath));
    const wanted = requirement?.amr ?? null;
    const usable = [...byName.values()].filter((p) => wanted === null || providerAmr(p).some((m) => wanted.includes(m)));
    const stepUp = req.query['step-up'];
    const page = renderLoginPage({
      nonce,
      returnPath,
      providers: usable.map((p) => ({ name: p.policy.name, kind: p.kind, signup: p.policy.jit.enabled, label: p.policy.label ?? null })),
      brand,
      siteName,
      stepUp: stepUp === 'recent' || stepUp === 'method' ? stepUp : null,
      stepUpMethods: wanted,
      ...(pairing === undefined ? {} : { pairingIntentId: pairing }),
    });
    return sendPage(reply, 200, nonce, page, { script: true, connect: true });
  });

  /** Starts a ceremony and answers what the provider wants the browser to do, with the flow cookie set. */
  const begin = async (
    req: FastifyRequest,
    reply: FastifyReply,
    name: string,
    input: { intent: BeginBody['intent']; returnPath: string | null; pairing?: { intentId: string; code: string } },
  ): Promise<ProviderReply> => {
    const provider = providerNamed(name);
    const principal = await callerPrincipal(deps, req, reply);
    // Each begun flow is a stored row: a client that only begins is stopped like one that only
    // asks for challenges (per address unit); finishing gives the slot back.
    const address = clientAddressKey(req.ip);
    const slot = challenges.reserve(address, 'flow');
    let started: Awaited<ReturnType<typeof startProviderFlow>>;
    try {
      started = await startProviderFlow(deps, {
        provider,
        realm: 'application',
        intent: input.intent,
        principal,
        ...(input.pairing === undefined ? {} : { pairing: input.pairing }),
        origin: gatewayOriginOf(req, publicOrigin),
      });
    } catch (err) {
      slot.release();
      throw err;
    }
    challenges.hold(started.flowId, slot);
    setFlowCookie(
      reply,
      cookieNamesOf(req),
      flowCookieValue(started.flowId, input.returnPath),
      secondsUntilExpiry(started.expiresAt, deps.clock.now()),
    );
    return started.reply;
  };

  app.post<{ Params: { name: string }; Body: BeginBody }>(
    '/providers/:name/begin',
    { onRequest: sameOrigin, schema: { body: beginBody } },
    async (req, reply) => {
      const { intent, pairing_intent_id, pairing_code } = req.body;
      if ((pairing_intent_id === undefined) !== (pairing_code === undefined)) {
        throw new AuthError('invalid_request', 'pairing_intent_id and pairing_code go together');
      }
      const answer = await begin(req, reply, req.params.name, {
        intent,
        returnPath: safeReturnPath(req.body.return),
        ...(pairing_intent_id === undefined || pairing_code === undefined
          ? {}
          : { pairing: { intentId: pairing_intent_id, code: pairing_code } }),
      });
      return answer.kind === 'redirect' ? { redirect: checkedRedirect(answer) } : answer.body;
    },
  );

  app.get<{ Params: { name: string }; Querystring: { intent?: string; return?: string } }>('/providers/:name/begin', async (req, reply) => {
    const intent = req.query.intent ?? 'signin';
    if (!GET_INTENTS.has(intent)) throw new AuthError('invalid_request', 'a link starts with POST (intent signin or signup here)');
    const answer = await begin(req, reply, req.params.name, {
      intent: intent as BeginBody['intent'],
      returnPath: safeReturnPath(req.query.return),
    });
    if (answer.kind !== 'redirect') {
      throw new AuthError('invalid_request', "this provider's ceremony runs in the sign-in page's script (POST begin)");
    }
    return reply.redirect(checkedRedirect(answer), 302);
  });

  /** Finishes the browser's ceremony: the flow cookie names it, and is spent whatever the outcome. */
  const finish = async (req: FastifyRequest, reply: FastifyReply, name: string, body: ProviderJson, displayName?: unknown) => {
    const provider = providerNamed(name);
    const names = cookieNamesOf(req);
    const flow = parseFlowCookie(readSessionCookies(req.headers.cookie, names).flow);
    clearFlowCookie(reply, names);
    if (flow === null)
      throw new AuthError('invalid_flow', 'no sign-in is in progress in this browser (the flow cookie is missing or expired)');
    challenges.answered(flow.flowId);
    const request: ProviderRequest = { query: providerQuery(req), body };
    const principal = await callerPrincipal(deps, req, reply);
    const outcome = await finishProviderFlow(deps, {
      provider,
      flowId: flow.flowId,
      request,
      origin: gatewayOriginOf(req, publicOrigin),
      principal,
      client: { address: req.ip, userAgent: req.headers['user-agent'] },
      ...(displayName === undefined ? {} : { displayName }),
    });
    if (outcome.outcome === 'session') {
      setSessionCookies(reply, names, outcome.pair);
      // The browser's former session (a step-up, or signing in again) is overwritten in its
      // cookies: it ends, so no copy of its tokens outlives it.
      if (principal !== null && req.headers.authorization === undefined) {
        await endReplacedSession(deps, { previous: principal, replacedBy: outcome.pair.session_id });
      }
    }
    return { outcome, returnPath: flow.returnPath ?? '/' };
  };

  app.post<{ Params: { name: string } }>('/providers/:name/finish', { onRequest: sameOrigin, config: attempts }, async (req, reply) => {
    // `display_name` is the service's own field (the name typed at sign-up), never the provider's.
    let body = (req.body ?? null) as ProviderJson;
    let displayName: unknown;
    if (isJsonObject(req.body) && Object.hasOwn(req.body, 'display_name')) {
      const { display_name, ...proof } = req.body;
      displayName = display_name;
      body = proof as ProviderJson;
    }
    const { outcome, returnPath } = await finish(req, reply, req.params.name, body, displayName);
    // The tokens stay in the HttpOnly cookies: the page's script never holds them.
    return outcome.outcome === 'session'
      ? { outcome: 'session', session_id: outcome.pair.session_id, redirect: returnPath }
      : { outcome: 'linked', link: outcome.link, redirect: returnPath };
  });

  app.get<{ Params: { name: string } }>('/providers/:name/callback', { config: attempts }, async (req, reply) => {
    const { returnPath } = await finish(req, reply, req.params.name, null);
    return reply.redirect(returnPath, 303);
  });

  await app.register(async (scope) => {
    // A plain `<form method="post">` logout button sends a form body: accepted, never read.
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: IGNORED_FORM_BODY_LIMIT },
      (_req, _body, done) => done(null, {}),
    );
    scope.post('/logout', { onRequest: sameOrigin }, async (req, reply) => {
      const names = cookieNamesOf(req);
      const principal = await callerPrincipal(deps, req, reply);
      const revoked = principal === null ? null : await revokeSession(deps, { principal });
      // Whatever was there, the browser holds no session cookie after this.
      reply.removeHeader('set-cookie');
      clearSessionCookies(reply, names);
      const accept = req.headers.accept;
      if (typeof accept === 'string' && accept.includes('text/html')) return reply.redirect(LOGIN_PATH, 303);
      return revoked === null ? { revoked: false } : revoked;
    });
  });
};

import {
  type AuthDeps,
  AuthError,
  type BrowserCookieNames,
  handoffBinding,
  handoffReturn,
  isHandoffState,
  mintHandoffCode,
  redeemHandoffCode,
  SSO_AUTHORIZE_PATH,
  SSO_CALLBACK_PATH,
  SSO_START_PATH,
  safeReturnPath,
} from '@svc/core';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { cookieNamesOf, readSessionCookies, setCookieValue, setSessionCookies } from './browser-cookies.js';
import { applyCookieEffects, cookieIdentity, gatewayOriginOf, LOGIN_PATH, loginLocation } from './browser-session.js';

/** One sign-in across route hosts: where browsers sign in, and the origins they may be handed to. */
export interface SsoOptions {
  /** `:svc/app-auth-origin`, canonical: the one origin that signs browsers in and mints handoff codes. */
  readonly authOrigin: string;
  /** The route origins a browser may be handed to (canonical); the auth origin may be one of them. */
  readonly origins: readonly string[];
}

/** How long a route host waits for the browser to come back signed in: time enough to sign in with a passkey or a company login. */
export const SSO_STATE_MAX_AGE_SECONDS = 600;

/**
 * The state cookie's value: the state (256 bits, base64url) and, base64url, the path to come
 * back to. The state never leaves this browser: the auth origin only sees its digest.
 */
function stateCookieValue(state: string, returnPath: string): string {
  return `${state}.${Buffer.from(returnPath, 'utf8').toString('base64url')}`;
}

function parseStateCookie(value: string | undefined): { readonly state: string; readonly returnPath: string } | null {
  if (value === undefined) return null;
  const dot = value.indexOf('.');
  const state = dot < 0 ? value : value.slice(0, dot);
  if (!isHandoffState(state)) return null;
  // Checked again: the cookie came back from the browser.
  const returnPath = dot < 0 ? null : safeReturnPath(Buffer.from(value.slice(dot + 1), 'base64url').toString('utf8'));
  return { state, returnPath: returnPath ?? '/' };
}

function setStateCookie(reply: FastifyReply, names: BrowserCookieNames, value: string, maxAgeSeconds: number): void {
  reply.header('set-cookie', setCookieValue(names, names.sso, value, maxAgeSeconds));
}

/**
 * Where a browser without a session on this host goes to sign in: with an auth origin that is
 * not this host, the handoff's start (which sends it to the auth origin and back); otherwise this
 * host's own sign-in page.
 *
 * @example
 * signInLocation(sso, 'https://app.b.test', '/orders'); // '/.svc/auth/v1/sso/start?return=%2Forders'
 */
export function signInLocation(sso: SsoOptions | undefined, here: string, returnPath: string | undefined): string {
  if (sso === undefined || here === sso.authOrigin || !sso.origins.includes(here)) return loginLocation(returnPath);
  const safe = safeReturnPath(returnPath);
  return safe === null ? SSO_START_PATH : `${SSO_START_PATH}?return=${encodeURIComponent(safe)}`;
}

/**
 * The handoff of one sign-in to every route host (`:svc/app-auth-origin`), under
 * `/.svc/auth/v1/sso/`, as oauth2-proxy's and Pomerium's sign-in redirects:
 *
 * - `GET start?return=<path>` on a route host: sets the state cookie (HttpOnly, `SameSite=Lax`,
 *   10 min) and sends the browser to the auth origin's `authorize` with the absolute return URL
 *   and the state's SHA-256 (`binding`).
 * - `GET authorize?return=<absolute URL>&binding=<hex>` on the auth origin only: the return URL
 *   must be on a configured route origin (else `400 invalid_request`: no open redirect). Without a
 *   session here, the sign-in page first (it comes back here). With one, a one-time code (30 s,
 *   bound to the return origin, the session and the binding) and a redirect to that origin's
 *   `callback`; no page.
 * - `GET callback?code=...` on a route host: redeems the code with this browser's state cookie,
 *   sets this host's own session cookies and redirects to the path to return to, without the
 *   code. `Referrer-Policy: no-referrer` and `Cache-Control: no-store`; a refused code
 *   (`400 invalid_handoff`: used, expired, another host's, another browser's, an ended
 *   sign-in) is a page that offers to sign in again.
 *
 * @example
 * await app.register(ssoRoutes, { prefix: '/.svc/auth/v1', deps, publicOrigin, sso });
 */
export const ssoRoutes: FastifyPluginAsync<{
  readonly deps: AuthDeps;
  readonly publicOrigin: string | undefined;
  readonly sso: SsoOptions;
}> = async (app, { deps, publicOrigin, sso }) => {
  const here = (req: FastifyRequest): string => gatewayOriginOf(req, publicOrigin);
  const noReferrer = (reply: FastifyReply) => reply.header('referrer-policy', 'no-referrer').header('cache-control', 'no-store');

  app.get<{ Querystring: { return?: string } }>('/sso/start', async (req, reply) => {
    noReferrer(reply);
    const origin = here(req);
    const returnPath = safeReturnPath(req.query.return) ?? '/';
    // The auth origin (or a host that is not a route) signs in on its own page.
    if (origin === sso.authOrigin || !sso.origins.includes(origin)) return reply.redirect(loginLocation(returnPath), 302);
    const state = Buffer.from(deps.random(32)).toString('base64url');
    setStateCookie(reply, cookieNamesOf(req), stateCookieValue(state, returnPath), SSO_STATE_MAX_AGE_SECONDS);
    const target = new URL(SSO_AUTHORIZE_PATH, sso.authOrigin);
    target.searchParams.set('return', `${origin}${returnPath}`);
    target.searchParams.set('binding', handoffBinding(state));
    return reply.redirect(target.href, 302);
  });

  app.get<{ Querystring: { return?: string; binding?: string } }>('/sso/authorize', async (req, reply) => {
    noReferrer(reply);
    if (here(req) !== sso.authOrigin) throw new AuthError('not_found', 'only the auth origin hands sign-ins to route hosts');
    const target = handoffReturn(req.query.return, sso.origins);
    if (target === null) throw new AuthError('invalid_request', 'return must be an absolute URL on a configured route origin');
    // Already home: nothing to hand off.
    if (target.origin === sso.authOrigin) return reply.redirect(target.path, 302);
    const binding = req.query.binding;
    if (typeof binding !== 'string' || !/^[0-9a-f]{64}$/.test(binding)) {
      throw new AuthError('invalid_request', 'binding must be the SHA-256 (64 lowercase hex digits) of the route host state');
    }
    const identity = await cookieIdentity(deps, readSessionCookies(req.headers.cookie, cookieNamesOf(req)), req.ip, true);
    applyCookieEffects(req, reply, { refreshed: identity.refreshed, clear: identity.stale });
    if (identity.principal === null) return reply.redirect(`${LOGIN_PATH}?return=${encodeURIComponent(req.url)}`, 302);
    const { code } = await mintHandoffCode(deps, { principal: identity.principal, origin: target.origin, bindingDigest: binding });
    const callback = new URL(SSO_CALLBACK_PATH, target.origin);
    callback.searchParams.set('code', code);
    return reply.redirect(callback.href, 302);
  });

  app.get<{ Querystring: { code?: string } }>('/sso/callback', async (req, reply) => {
    noReferrer(reply);
    const names = cookieNamesOf(req);
    const state = parseStateCookie(readSessionCookies(req.headers.cookie, names).sso);
    // Spent whatever the outcome: a state is used once.
    setStateCookie(reply, names, '', 0);
    const pair = await redeemHandoffCode(deps, {
      code: req.query.code,
      state: state?.state,
      origin: here(req),
      client: { address: req.ip, userAgent: req.headers['user-agent'] },
    });
    setSessionCookies(reply, names, pair);
    return reply.redirect(state?.returnPath ?? '/', 303);
  });
};

import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import {
  type AuthDeps,
  AuthError,
  authenticate,
  type BrowserCookieNames,
  browserCookieNames,
  canonicalOrigin,
  type Principal,
  rotateRefreshToken,
  safeReturnPath,
  type TokenPairJson,
} from '@svc/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { applicationPrincipal } from '../http/principal.js';
import { clearSessionCookies, cookieNamesOf, type SessionCookies, servedOverTls, setSessionCookies } from './browser-cookies.js';

/** Where the browser sign-in lives. */
export const LOGIN_PATH = '/.svc/auth/v1/login';

/** What the cookies of a request proved. */
export interface CookieIdentity {
  /** The principal, or null when the cookies prove nothing (expired, revoked, unknown, a reused refresh token). */
  readonly principal: Principal | null;
  /** The new pair when the access cookie had expired and the refresh cookie rotated it: to be set as cookies. */
  readonly refreshed: TokenPairJson | null;
  /** The cookies proved nothing: they should be cleared. */
  readonly stale: boolean;
}

/** The refusals that mean "this refresh token proves nothing"; anything else (the store is down) propagates. */
const DEAD_REFRESH: ReadonlySet<string> = new Set(['invalid_refresh_token', 'refresh_token_reused', 'invalid_request']);

/**
 * The principal a browser's session cookies prove, refreshing transparently: the access cookie
 * if its token is live; otherwise, with `allowRefresh`, the refresh cookie rotates the pair
 * (core's `rotateRefreshToken`, with its reuse and grace rules: concurrent requests of one
 * browser presenting the same refresh token within the grace interval all get the one new pair,
 * a retired token outside it revokes the session) and the new access token gives the principal.
 * A store failure propagates (`503`), never reads as "signed out".
 *
 * @example
 * const { principal, refreshed } = await cookieIdentity(deps, cookies, req.ip, true);
 */
export async function cookieIdentity(
  deps: AuthDeps,
  cookies: SessionCookies,
  clientAddress: string | undefined,
  allowRefresh: boolean,
): Promise<CookieIdentity> {
  if (cookies.access !== undefined) {
    try {
      return { principal: await applicationPrincipal(deps, cookies.access, clientAddress), refreshed: null, stale: false };
    } catch (err) {
      if (!(err instanceof AuthError) || err.code !== 'invalid_token') throw err;
    }
  }
  if (cookies.refresh !== undefined && allowRefresh) {
    let pair: TokenPairJson;
    try {
      pair = await rotateRefreshToken(deps, { refreshToken: cookies.refresh, realm: 'application' });
    } catch (err) {
      if (err instanceof AuthError && DEAD_REFRESH.has(err.code)) return { principal: null, refreshed: null, stale: true };
      throw err;
    }
    return { principal: await authenticate(deps, { token: pair.access_token, realm: 'application' }), refreshed: pair, stale: false };
  }
  return { principal: null, refreshed: null, stale: allowRefresh && (cookies.access !== undefined || cookies.refresh !== undefined) };
}

/** What the identity step leaves on a routed reply: new cookies after a transparent refresh, or their removal. */
export interface CookieEffects {
  refreshed: TokenPairJson | null;
  clear: boolean;
}

/**
 * Puts a {@link CookieEffects} onto the reply (the new pair's cookies, or their deletion).
 *
 * @example
 * applyCookieEffects(req, reply, effects);
 */
export function applyCookieEffects(req: FastifyRequest, reply: FastifyReply, effects: CookieEffects): void {
  const names = cookieNamesOf(req);
  if (effects.refreshed !== null) setSessionCookies(reply, names, effects.refreshed);
  else if (effects.clear) clearSessionCookies(reply, names);
}

/**
 * The gateway's own origin as the browser sees it: the configured public origin, else the
 * scheme the request arrived with (TLS or not, a trusted proxy's word included) and its
 * `Host` (a trusted proxy's `X-Forwarded-Host`). A browser always sends the `Host` of the
 * URL it loaded, which no page can change, so a forged one only fools a non-browser, which has
 * no victim's cookies to forge with.
 *
 * @example
 * gatewayOriginOf(req, undefined); // 'http://127.0.0.1:8080'
 */
export function gatewayOriginOf(req: FastifyRequest, publicOrigin: string | undefined): string {
  if (publicOrigin !== undefined) return publicOrigin;
  return canonicalOrigin(`${servedOverTls(req) ? 'https' : 'http'}://${req.host}`) ?? 'null';
}

/**
 * {@link gatewayOriginOf} and the cookie names for a raw `upgrade` request, which Fastify
 * never routes: TLS from the socket or a trusted proxy's `X-Forwarded-Proto`, the host from
 * `Host` or a trusted proxy's `X-Forwarded-Host`.
 */
export function upgradeTransport(
  req: IncomingMessage,
  trusted: boolean,
  publicOrigin: string | undefined,
): { readonly names: BrowserCookieNames; readonly origin: string } {
  const last = (v: string | string[] | undefined): string | undefined => {
    const s = Array.isArray(v) ? v.join(',') : v;
    return s?.split(',').pop()?.trim();
  };
  const forwardedProto = trusted ? last(req.headers['x-forwarded-proto']) : undefined;
  const tls = (req.socket as TLSSocket).encrypted === true || forwardedProto?.toLowerCase() === 'https';
  const host = (trusted ? last(req.headers['x-forwarded-host']) : undefined) ?? req.headers.host ?? '';
  return {
    names: browserCookieNames(tls),
    origin: publicOrigin ?? canonicalOrigin(`${tls ? 'https' : 'http'}://${host}`) ?? 'null',
  };
}

/**
 * Whether a refused request is a browser navigating to a page (a GET that accepts HTML, with
 * no `Authorization`): such a browser is better sent to the sign-in page than shown a 401.
 * Bearer clients keep the 401 contract.
 */
export function isBrowserNavigation(req: FastifyRequest): boolean {
  if (req.method !== 'GET' || req.headers.authorization !== undefined) return false;
  const accept = req.headers.accept;
  return typeof accept === 'string' && accept.toLowerCase().includes('text/html');
}

/**
 * The sign-in page's URL with the path to come back to, when that path is a safe one of this
 * origin (core's `safeReturnPath`).
 *
 * @example
 * loginLocation('/app/orders?id=7'); // '/.svc/auth/v1/login?return=%2Fapp%2Forders%3Fid%3D7'
 */
export function loginLocation(returnPath: string | undefined): string {
  const safe = safeReturnPath(returnPath);
  return safe === null ? LOGIN_PATH : `${LOGIN_PATH}?return=${encodeURIComponent(safe)}`;
}

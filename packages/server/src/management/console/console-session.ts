import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { type AuthDeps, AuthError, authenticate, type Principal, rotateRefreshToken, type TokenPairJson } from '@svc/core';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** Where the console lives: its cookies are sent to this path only. */
export const CONSOLE_PATH = '/console/';

/** The console's cookie names: its own, apart from the gateway's (another listener, another path). */
export const CONSOLE_COOKIES = { access: 'svc-console-access', refresh: 'svc-console-refresh' } as const;

const COOKIE_VALUE = /^[\w.~-]{1,600}$/;

/** The console cookies a request carried; a name sent twice makes that cookie absent (which one was meant cannot be told). */
export function readConsoleCookies(header: string | undefined): { access?: string; refresh?: string } {
  const found: Record<'access' | 'refresh', string[]> = { access: [], refresh: [] };
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === CONSOLE_COOKIES.access) found.access.push(value);
    else if (name === CONSOLE_COOKIES.refresh) found.refresh.push(value);
  }
  const one = (v: string[]) => (v.length === 1 && COOKIE_VALUE.test(v[0] as string) ? (v[0] as string) : undefined);
  const access = one(found.access);
  const refresh = one(found.refresh);
  return { ...(access === undefined ? {} : { access }), ...(refresh === undefined ? {} : { refresh }) };
}

/**
 * One console `Set-Cookie`: `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's
 * page or link ever makes the browser send it), `Path=/console/` (the management API's own routes
 * never see it). No `Secure`: the management listener is plain HTTP on loopback only.
 *
 * @example
 * consoleCookie('svc-console-access', 'svca_x', 900); // 'svc-console-access=svca_x; Path=/console/; Max-Age=900; HttpOnly; SameSite=Strict'
 */
export function consoleCookie(name: string, value: string, maxAgeSeconds: number): string {
  const expiry = maxAgeSeconds <= 0 ? 'Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT' : `Max-Age=${Math.floor(maxAgeSeconds)}`;
  return `${name}=${value}; Path=${CONSOLE_PATH}; ${expiry}; HttpOnly; SameSite=Strict`;
}

/** Puts a session's pair into the reply as the console cookies. */
export function setConsoleCookies(reply: FastifyReply, pair: TokenPairJson): void {
  reply.header('set-cookie', consoleCookie(CONSOLE_COOKIES.access, pair.access_token, pair.expires_in));
  reply.header('set-cookie', consoleCookie(CONSOLE_COOKIES.refresh, pair.refresh_token, pair.refresh_expires_in));
}

/** Deletes the console cookies. */
export function clearConsoleCookies(reply: FastifyReply): void {
  reply.header('set-cookie', consoleCookie(CONSOLE_COOKIES.access, '', 0));
  reply.header('set-cookie', consoleCookie(CONSOLE_COOKIES.refresh, '', 0));
}

const DEAD_REFRESH: ReadonlySet<string> = new Set(['invalid_refresh_token', 'refresh_token_reused', 'invalid_request']);

/**
 * The management principal the console cookies prove, or null: the access cookie when its token
 * is live, else the refresh cookie rotates the pair (core's rules, grace and reuse included) and
 * the reply gets the new cookies. Cookies that prove nothing are cleared. A store failure
 * propagates (503), never reads as "signed out".
 *
 * @example
 * const principal = await consolePrincipal(deps, req, reply);
 */
export async function consolePrincipal(deps: AuthDeps, req: FastifyRequest, reply: FastifyReply): Promise<Principal | null> {
  const cookies = readConsoleCookies(req.headers.cookie);
  if (cookies.access !== undefined) {
    try {
      return await authenticate(deps, { token: cookies.access, realm: 'management' });
    } catch (err) {
      if (!(err instanceof AuthError) || err.code !== 'invalid_token') throw err;
    }
  }
  if (cookies.refresh !== undefined) {
    let pair: TokenPairJson;
    try {
      pair = await rotateRefreshToken(deps, { refreshToken: cookies.refresh, realm: 'management' });
    } catch (err) {
      if (err instanceof AuthError && DEAD_REFRESH.has(err.code)) {
        clearConsoleCookies(reply);
        return null;
      }
      throw err;
    }
    setConsoleCookies(reply, pair);
    return authenticate(deps, { token: pair.access_token, realm: 'management' });
  }
  if (cookies.access !== undefined) clearConsoleCookies(reply);
  return null;
}

/**
 * The console's CSRF tokens: one per session, an HMAC of the session id under a key this
 * process draws at start. Every form carries it; every state-changing request must present it
 * (compared in constant time) AND come from the console's own origin. A restart draws a new key:
 * a page left open across it asks to reload, nothing else.
 */
export class ConsoleCsrf {
  readonly #key: Buffer;
  constructor(key: Buffer = randomBytes(32)) {
    this.#key = key;
  }

  /** The token of a session. */
  tokenFor(sessionId: string): string {
    return createHmac('sha256', this.#key).update(`svc-console-csrf ${sessionId}`).digest('base64url');
  }

  /**
   * Refuses (`403 csrf_refused`) a request whose `Origin` is missing or not the console's own:
   * checked before the cookies are even read, so a forged request cannot make the console
   * rotate a session's tokens either.
   */
  checkOrigin(req: FastifyRequest): void {
    const origin = req.headers.origin;
    if (origin === undefined || origin !== `${req.protocol}://${req.host}`) {
      throw new AuthError('csrf_refused', 'the request did not come from the console page');
    }
  }

  /**
   * Refuses (`403 csrf_refused`) a state-changing request whose `Origin` is not the console's own
   * (`http://` and the `Host` it was loaded from; the loopback guard already refused any other
   * host) or whose token is missing or wrong.
   */
  check(req: FastifyRequest, sessionId: string, presented: unknown): void {
    this.checkOrigin(req);
    const expected = Buffer.from(this.tokenFor(sessionId));
    const got = Buffer.from(typeof presented === 'string' ? presented : '');
    if (got.length !== expected.length || !timingSafeEqual(got, expected)) {
      throw new AuthError('csrf_refused', 'the form is stale or forged: reload the page and try again');
    }
  }
}

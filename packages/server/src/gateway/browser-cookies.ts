import type { IncomingMessage } from 'node:http';
import { type BrowserCookieNames, browserCookieNames, isBrowserSessionCookie, type TokenPairJson } from '@svc/core';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** The gateway's cookies a request carried (by the names of its transport), each present once at most. */
export interface SessionCookies {
  readonly access: string | undefined;
  readonly refresh: string | undefined;
  readonly flow: string | undefined;
  /** The handoff state of a route host (`:svc/app-auth-origin`). */
  readonly sso: string | undefined;
}

/** Cookie values are opaque tokens of ours: anything else is not one. */
const COOKIE_VALUE = /^[\w.~-]{1,600}$/;

/**
 * The gateway's cookies in a `Cookie` header (Node joins several with `; `). A name sent twice
 * (two cookies of the same name, as a plain-HTTP sibling could toss one in) makes that cookie
 * absent: which one the browser meant cannot be told, so neither is believed. A value that is
 * not token-shaped is absent too.
 *
 * @example
 * readSessionCookies('theme=dark; svc-access=svca_x', PLAIN_COOKIE_NAMES).access; // 'svca_x'
 */
export function readSessionCookies(header: string | undefined, names: BrowserCookieNames): SessionCookies {
  const found = { access: [] as string[], refresh: [] as string[], flow: [] as string[], sso: [] as string[] };
  if (header !== undefined) {
    for (const part of header.split(';')) {
      const eq = part.indexOf('=');
      if (eq < 0) continue;
      const name = part.slice(0, eq).trim();
      const value = part.slice(eq + 1).trim();
      if (name === names.access) found.access.push(value);
      else if (name === names.refresh) found.refresh.push(value);
      else if (name === names.flow) found.flow.push(value);
      else if (name === names.sso) found.sso.push(value);
    }
  }
  const one = (values: string[]): string | undefined =>
    values.length === 1 && COOKIE_VALUE.test(values[0] as string) ? (values[0] as string) : undefined;
  return { access: one(found.access), refresh: one(found.refresh), flow: one(found.flow), sso: one(found.sso) };
}

/**
 * Whether a request was served over TLS: the listener's own, or a trusted proxy's
 * `X-Forwarded-Proto: https` (Fastify's `req.protocol` believes only trusted proxies).
 */
export function servedOverTls(req: FastifyRequest): boolean {
  return req.protocol === 'https';
}

/** The cookie names of this request's transport (see core's `browserCookieNames`). */
export function cookieNamesOf(req: FastifyRequest): BrowserCookieNames {
  return browserCookieNames(servedOverTls(req));
}

/**
 * One `Set-Cookie` value: `HttpOnly` (no script of any page reads it), `Path=/` (what `__Host-`
 * requires, and every path of the gateway needs the session), `SameSite=Lax` (not sent on
 * cross-site subresource requests or form POSTs; sent on a top-level navigation, which an OIDC
 * callback is), `Secure` with the TLS names. `maxAge` 0 deletes it.
 *
 * @example
 * setCookieValue(TLS_COOKIE_NAMES, '__Host-svc-access', 'svca_x', 900);
 * // '__Host-svc-access=svca_x; Path=/; Max-Age=900; HttpOnly; SameSite=Lax; Secure'
 */
export function setCookieValue(names: BrowserCookieNames, name: string, value: string, maxAgeSeconds: number): string {
  const expiry = maxAgeSeconds <= 0 ? 'Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT' : `Max-Age=${Math.floor(maxAgeSeconds)}`;
  return `${name}=${value}; Path=/; ${expiry}; HttpOnly; SameSite=Lax${names.secure ? '; Secure' : ''}`;
}

/**
 * Puts a session's token pair into the reply as the access and refresh cookies, each living
 * as long as its token. Fastify accumulates `Set-Cookie`, so the application's own cookies on
 * the same response are kept.
 *
 * @example
 * setSessionCookies(reply, cookieNamesOf(req), pair);
 */
export function setSessionCookies(reply: FastifyReply, names: BrowserCookieNames, pair: TokenPairJson): void {
  addOwnCookie(reply, setCookieValue(names, names.access, pair.access_token, pair.expires_in));
  addOwnCookie(reply, setCookieValue(names, names.refresh, pair.refresh_token, pair.refresh_expires_in));
}

/** The `Set-Cookie` values the gateway itself put on each reply. */
const ownCookies = new WeakMap<FastifyReply, Set<string>>();

function addOwnCookie(reply: FastifyReply, value: string): void {
  let own = ownCookies.get(reply);
  if (own === undefined) {
    own = new Set();
    ownCookies.set(reply, own);
  }
  own.add(value);
  reply.header('set-cookie', value);
}

/**
 * Drops from an application's response every `Set-Cookie` of one of the gateway's cookie
 * names that the gateway did not set itself: the application cannot plant, replace or delete
 * the browser's session (session fixation through the application, or a clash of names). Its
 * other cookies pass untouched.
 *
 * @example
 * scope.addHook('onSend', async (_req, reply, payload) => { dropForeignSessionCookies(reply); return payload; });
 */
export function dropForeignSessionCookies(reply: FastifyReply): void {
  const current = reply.getHeader('set-cookie');
  if (current === undefined) return;
  const values = (Array.isArray(current) ? current : [current]).map(String);
  const own = ownCookies.get(reply);
  const kept = values.filter((v) => {
    const eq = v.indexOf('=');
    return !isBrowserSessionCookie(eq < 0 ? v : v.slice(0, eq)) || own?.has(v) === true;
  });
  if (kept.length === values.length) return;
  reply.removeHeader('set-cookie');
  for (const v of kept) reply.header('set-cookie', v);
}

/**
 * Deletes the access and refresh cookies (a session that ended, or cookies that no longer
 * prove anything).
 *
 * @example
 * clearSessionCookies(reply, cookieNamesOf(req));
 */
export function clearSessionCookies(reply: FastifyReply, names: BrowserCookieNames): void {
  addOwnCookie(reply, setCookieValue(names, names.access, '', 0));
  addOwnCookie(reply, setCookieValue(names, names.refresh, '', 0));
}

/** The `Cookie` header without the gateway's cookies, or null when nothing else is left. */
function withoutSessionCookies(value: string): string | null {
  const kept = value
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part !== '' && !isBrowserSessionCookie(part.slice(0, Math.max(0, part.indexOf('=')))));
  return kept.length === 0 ? null : kept.join('; ');
}

/**
 * Removes the gateway's cookies (both sets of names, whatever they hold) from every view Node
 * keeps of a request's `Cookie` headers (`rawHeaders`, `headers`, `headersDistinct`); the
 * application's own cookies stay. The application never sees a token of ours, as with
 * `Authorization`.
 *
 * @example
 * stripSessionCookies(req.raw);
 */
export function stripSessionCookies(req: IncomingMessage): void {
  const raw = req.rawHeaders;
  let any = false;
  for (let i = 0; i < raw.length && !any; i += 2) any = (raw[i] as string).toLowerCase() === 'cookie';
  if (!any) return;
  // Node builds `headers` and `headersDistinct` lazily from `rawHeaders`: both are read (built)
  // before the raw list changes, then rewritten from it.
  void req.headers;
  void req.headersDistinct;
  const values: string[] = [];
  let kept = 0;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    let value = raw[i + 1] as string;
    if (name.toLowerCase() === 'cookie') {
      const rest = withoutSessionCookies(value);
      if (rest === null) continue;
      value = rest;
      values.push(rest);
    }
    raw[kept++] = name;
    raw[kept++] = value;
  }
  raw.length = kept;
  if (values.length === 0) {
    delete req.headers.cookie;
    delete req.headersDistinct.cookie;
  } else {
    req.headers.cookie = values.join('; ');
    req.headersDistinct.cookie = values;
  }
}

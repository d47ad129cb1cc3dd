/**
 * The application gateway's routes (`:svc/app-routes`, see the contract's "Application
 * gateway"): which application a request is for, decided from the origin it names and its
 * path. Pure: the gateway hands over what it believes of the request (scheme, `Host`, the
 * decoded path) and applies the route this returns.
 *
 * Matching rules:
 * - The origin (scheme, host, port) must equal a route's `:from` origin exactly; the host is
 *   compared case-insensitively and a default port (`:80` for http, `:443` for https) is the
 *   same as none. Nothing else about the host is folded: no trailing dot, no wildcard, no
 *   suffix match. An origin no route names matches nothing (the gateway answers 404, and the
 *   request never reaches an upstream).
 * - Among the routes of that origin, the one with the longest path prefix that covers the path
 *   wins; an origin-only route (no path) is the least specific and covers every path. A prefix
 *   `/wiki/*` covers `/wiki`, `/wiki/` and everything below, never `/wiki-private` (segment
 *   boundary), compared case-insensitively (an application that folds case serves `/WIKI/x`
 *   as `/wiki/x`, so it must fall under the same route and policy).
 * - The path is the DECODED path the gateway's hygiene let through (`unambiguousPath`), so a
 *   percent-encoded prefix (`/%77iki/`) is the prefix it decodes to.
 *
 * Cost per request: one map lookup by origin, then one map lookup per path segment (never a
 * scan of the routes), so a gateway with a hundred routes costs what one with one route does.
 */
import type { AppRoute } from './app-config.js';
import { canonicalOrigin } from './browser-policy.js';

export type { AppRoute } from './app-config.js';

/** The routes indexed for matching (build once with {@link appRouteTable}, match per request). */
export interface AppRouteTable {
  /** Every route, in `:svc/app-routes` order. */
  readonly routes: readonly AppRoute[];
  /**
   * The route a request is for, or null when none is: `origin` is the request's canonical
   * origin ({@link requestOrigin}), `path` its decoded path.
   */
  match(origin: string | null, path: string): AppRoute | null;
  /** Whether some route has `origin` (whatever its path): the gateway's own `/.svc/` routes are served there. */
  serves(origin: string | null): boolean;
}

/** The base of a prefix pattern as matching compares it: `/Wiki/*` → `/wiki`. */
export function routePrefixBase(prefix: string): string {
  return prefix.slice(0, -2).toLowerCase();
}

/**
 * Indexes `routes` by origin, then by lower-cased path prefix, so a match costs one lookup per
 * path segment whatever the number of routes.
 *
 * @throws {TypeError} when two routes have the same origin and path (the config reader refuses
 * that first, naming both).
 * @example
 * const table = appRouteTable(config.app.routes);
 * table.match('https://tools.example.com', '/wiki/Main_Page')?.to; // 'http://127.0.0.1:3001'
 */
export function appRouteTable(routes: readonly AppRoute[]): AppRouteTable {
  const byOrigin = new Map<string, { whole: AppRoute | null; prefixes: Map<string, AppRoute> }>();
  for (const route of routes) {
    let host = byOrigin.get(route.origin);
    if (host === undefined) {
      host = { whole: null, prefixes: new Map() };
      byOrigin.set(route.origin, host);
    }
    if (route.prefix === null) {
      if (host.whole !== null) throw new TypeError(`two routes for ${route.origin}`);
      host.whole = route;
    } else {
      const base = routePrefixBase(route.prefix);
      if (host.prefixes.has(base)) throw new TypeError(`two routes for ${route.origin}${route.prefix}`);
      host.prefixes.set(base, route);
    }
  }
  return {
    routes,
    match(origin, path) {
      if (origin === null) return null;
      const host = byOrigin.get(origin);
      if (host === undefined) return null;
      if (host.prefixes.size > 0) {
        // From the whole path up, one segment at a time: the first prefix found is the longest.
        const p = path.toLowerCase();
        let end = p.endsWith('/') ? p.length - 1 : p.length;
        while (end > 0) {
          const hit = host.prefixes.get(end === p.length ? p : p.slice(0, end));
          if (hit !== undefined) return hit;
          end = p.lastIndexOf('/', end - 1);
        }
      }
      return host.whole;
    },
    serves(origin) {
      return origin !== null && byOrigin.has(origin);
    },
  };
}

/**
 * The canonical origin of a request as the gateway believes it (`scheme` from the connection or
 * a trusted proxy's `X-Forwarded-Proto`, `host` from `Host` or a trusted proxy's
 * `X-Forwarded-Host`), or null when the host is missing or not a host (a user part, a path, a
 * space, an out-of-range port): such a request matches no route.
 *
 * @example
 * requestOrigin('https', 'Tools.Example.COM:443'); // 'https://tools.example.com'
 * requestOrigin('http', 'a.example@b.example'); // null
 */
export function requestOrigin(scheme: string, host: string | undefined): string | null {
  if (host === undefined || host === '' || (scheme !== 'http' && scheme !== 'https')) return null;
  return canonicalOrigin(`${scheme}://${host}`);
}

/**
 * Splits a `:from` value into its canonical origin and path prefix, or says why it is not one:
 * an `http://` or `https://` origin, optionally followed by a path prefix ending in `/*`; no
 * user part, query or fragment; a path written decoded (no `%`). `"https://x/*"` is the
 * origin-only route.
 *
 * @example
 * parseRouteFrom('https://Tools.Example.com:443/wiki/*'); // { origin: 'https://tools.example.com', prefix: '/wiki/*' }
 * parseRouteFrom('https://tools.example.com/wiki'); // { problem: 'a path ends in /* ...' }
 */
export function parseRouteFrom(value: string): { readonly origin: string; readonly prefix: string | null } | { readonly problem: string } {
  const m = /^(https?:\/\/[^/?#]*)(.*)$/i.exec(value);
  if (m === null) return { problem: 'expected an http:// or https:// origin, optionally with a path prefix ending in /*' };
  const [, authority = '', rest = ''] = m;
  if (authority.includes('@')) return { problem: 'no user or password in a route' };
  if (rest.includes('?') || rest.includes('#')) return { problem: 'no query (?) or fragment (#) in a route' };
  const origin = canonicalOrigin(authority);
  if (origin === null) return { problem: `${JSON.stringify(authority)} is not an origin (scheme, host, optional port)` };
  if (rest === '' || rest === '/' || rest === '/*') return { origin, prefix: null };
  if (!rest.endsWith('/*')) return { problem: `a route's path is a prefix ending in /*, such as "${origin}/wiki/*"` };
  if (rest.includes('%')) return { problem: 'write the path as it reads decoded (no % escapes): it is matched against the decoded path' };
  return { origin, prefix: rest };
}

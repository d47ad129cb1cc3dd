import { type AppGatewayConfig, type AppPathRequirement, type AppRoute, DEFAULT_APP_GATEWAY_CONFIG } from './app-config.js';
import { parseRouteFrom, routePrefixBase } from './app-routes.js';
import { canonicalOrigin } from './browser-policy.js';
import { describeEdn as describe, type EdnMap, type EdnValue, isEdnMap } from './edn-model.js';
import { normalizeHeaderName } from './gateway-policy.js';
import { isIdOfKind } from './ids.js';
import { cidrPrefixLength, ipVersion } from './ip-address.js';
import { MAX_AUTH_AGE_SECONDS_LIMIT, PROJECT_KEYS, type ProjectKeySpec, UNSTRIPPABLE_HEADERS } from './settings.js';
import { groupNameProblem, normalizeEmailDomain } from './users.js';

// The application gateway's `:svc/app-*` keys: reading them from one merged configuration, and
// the path-pattern and listen-address rules the CLI also applies to its flags.

/** The reserved path prefix of the application gateway: its own routes, never the application's. */
const RESERVED_APP_PREFIX = '/.svc/';

/** Whether `s` holds a C0 control character or DEL. */
function hasControlCharacter(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

/** The address-range names `:svc/app-trusted-proxies` takes besides addresses and CIDRs (as Fastify's `trustProxy` does). */
const TRUSTED_PROXY_RANGE_NAMES: readonly string[] = ['loopback', 'linklocal', 'uniquelocal'];

/** An HTTP field name (RFC 9110 `token`). */
const HEADER_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * Why `pattern` is not a path pattern of `:svc/app-public` or `:svc/app-require`, or null when
 * it is one: an exact path, or a prefix ending in `/*` (`"/public/*"` matches `/public/` and
 * everything under it), starting with `/`, without a query, fragment, whitespace, empty, `.`
 * or `..` segment, with `*` only as the final segment, and never under the reserved `/.svc/`.
 *
 * @example
 * appPathPatternProblem('/public/*'); // null
 * appPathPatternProblem('/.svc/auth/*'); // 'paths under /.svc/ are the gateway\'s own ...'
 */
export function appPathPatternProblem(pattern: string): string | null {
  if (!pattern.startsWith('/')) return 'a path starts with /';
  if (/[\s?#\\]/.test(pattern) || hasControlCharacter(pattern)) {
    return 'a path has no whitespace, control character, backslash, query (?) or fragment (#)';
  }
  const path = pattern.endsWith('/*') ? pattern.slice(0, -1) : pattern;
  if (path.includes('*')) return 'a * may only end a prefix, as in "/public/*"';
  const segments = path.slice(1).split('/');
  const inner = path.endsWith('/') ? segments.slice(0, -1) : segments;
  if (path !== '/' && inner.some((seg) => seg === '' || seg === '.' || seg === '..')) {
    return 'a path has no empty, "." or ".." segment';
  }
  if (`${path}/`.toLowerCase().startsWith(RESERVED_APP_PREFIX)) {
    return "paths under /.svc/ are the gateway's own and never reach the application";
  }
  return null;
}

/** Whether path pattern `outer` covers every path `inner` matches (both already valid). */
function patternCovers(outer: string, inner: string): boolean {
  if (outer === inner) return true;
  if (!outer.endsWith('/*')) return false;
  const prefix = outer.slice(0, -1);
  return (inner.endsWith('/*') ? inner.slice(0, -1) : inner).startsWith(prefix);
}

/**
 * Why `value` is not a `:svc/app-listen` address, or null: `"off"`, or `host:port` with a port
 * from 0 to 65535 and a non-empty host, an IPv6 address in brackets. (Where it binds, and the
 * stricter checks of host names, are the listener's: the same parser as the node surface.)
 *
 * @example
 * appListenProblem('0.0.0.0:8080'); // null
 * appListenProblem('8080'); // 'expected "host:port" or "off"'
 */
export function appListenProblem(value: string): string | null {
  if (value.trim().toLowerCase() === 'off') return null;
  const m = /^(?:\[([^\]]*)\]|([^:[\]]+)):(\d{1,5})$/.exec(value);
  if (m === null || Number(m[3]) > 65535) return 'expected "host:port" (an IPv6 address in brackets, a port from 0 to 65535) or "off"';
  if (m[1] !== undefined && ipVersion(m[1]) !== 6) return `${JSON.stringify(m[1])} in brackets is not an IPv6 address`;
  return null;
}

/**
 * Reads the `:svc/app-*` keys of one merged configuration into an {@link AppGatewayConfig},
 * reporting every problem through `bad` (file, key, what was expected).
 *
 * @example
 * const app = readAppGatewayConfig(merged, (key, message) => problems.push({ file, key, message }));
 */
export function readAppGatewayConfig(
  merged: EdnMap,
  bad: (key: string, message: string) => void,
  readAsset?: AssetReader,
): AppGatewayConfig {
  const out: { -readonly [K in keyof AppGatewayConfig]: AppGatewayConfig[K] } = { ...DEFAULT_APP_GATEWAY_CONFIG };
  const spec = (key: string) => PROJECT_KEYS.find((k) => k.key === key) as ProjectKeySpec;
  const expected = (key: string, v: EdnValue | undefined, why?: string) =>
    bad(key, `expected ${spec(key).expected}${why === undefined ? '' : ` (${why})`}, found ${describe(v)}`);
  const strings = (key: string, v: EdnValue | undefined): string[] | null => {
    if (!Array.isArray(v) || !v.every((x: EdnValue) => typeof x === 'string')) {
      expected(key, v);
      return null;
    }
    return [...(v as string[])];
  };

  const listen = merged.get(':svc/app-listen');
  if (listen !== undefined) {
    const problem = typeof listen === 'string' ? appListenProblem(listen) : 'not a string';
    if (problem !== null || typeof listen !== 'string') expected(':svc/app-listen', listen, problem ?? undefined);
    else out.listen = listen.trim().toLowerCase() === 'off' ? 'off' : listen;
  }

  const upstream = merged.get(':svc/app-upstream');
  if (upstream !== undefined) {
    const problem = typeof upstream === 'string' ? upstreamProblem(upstream) : 'not a string';
    if (problem !== null || typeof upstream !== 'string') expected(':svc/app-upstream', upstream, problem ?? undefined);
    else out.upstream = new URL(upstream).origin;
  }

  const audience = merged.get(':svc/app-audience');
  if (audience !== undefined) {
    if (typeof audience !== 'string' || audience.trim() === '' || hasControlCharacter(audience)) {
      expected(':svc/app-audience', audience);
    } else out.audience = audience;
  }

  const publicOrigin = merged.get(':svc/app-public-origin');
  if (publicOrigin !== undefined) {
    // One trailing slash is how origins are often written; a real path is refused.
    const origin = typeof publicOrigin === 'string' ? canonicalOrigin(publicOrigin.replace(/\/$/, '')) : null;
    if (origin === null) expected(':svc/app-public-origin', publicOrigin);
    else out.publicOrigin = origin;
  }

  const authOrigin = merged.get(':svc/app-auth-origin');
  if (authOrigin !== undefined) {
    const origin = typeof authOrigin === 'string' ? canonicalOrigin(authOrigin.replace(/\/$/, '')) : null;
    if (origin === null) expected(':svc/app-auth-origin', authOrigin);
    else out.authOrigin = origin;
  }

  const publicPaths = merged.get(':svc/app-public');
  if (publicPaths !== undefined) {
    const list = strings(':svc/app-public', publicPaths);
    if (list !== null) {
      const ok: string[] = [];
      for (const p of list) {
        const problem = appPathPatternProblem(p);
        if (problem !== null) bad(`:svc/app-public ${JSON.stringify(p)}`, problem);
        else if (!ok.includes(p)) ok.push(p);
      }
      out.publicPaths = ok;
    }
  }

  const headers = merged.get(':svc/app-identity-headers');
  if (headers !== undefined) {
    const list = strings(':svc/app-identity-headers', headers);
    if (list !== null) {
      const ok: string[] = [];
      for (const h of list) {
        const name = normalizeHeaderName(h);
        if (!HEADER_TOKEN.test(h))
          bad(`:svc/app-identity-headers ${JSON.stringify(h)}`, "not a header name (letters, digits and !#$%&'*+-.^_`|~)");
        else if (UNSTRIPPABLE_HEADERS.includes(name)) {
          bad(
            `:svc/app-identity-headers ${JSON.stringify(h)}`,
            `${name} cannot be stripped: it carries HTTP framing or the credentials the gateway checks (refused: ${UNSTRIPPABLE_HEADERS.join(', ')})`,
          );
        } else if (!ok.includes(name)) ok.push(name);
      }
      out.identityHeaders = ok;
    }
  }

  const require = merged.get(':svc/app-require');
  if (require !== undefined) {
    if (!isEdnMap(require)) expected(':svc/app-require', require);
    else out.requirements = readRequirements(require, out.publicPaths, bad);
  }

  const tls = merged.get(':svc/app-tls');
  if (tls !== undefined) {
    if (!isEdnMap(tls)) expected(':svc/app-tls', tls);
    else {
      for (const k of tls.keys()) if (k !== ':cert' && k !== ':key') bad(`:svc/app-tls ${k}`, 'unknown key; expected :cert and :key');
      const cert = tls.get(':cert');
      const key = tls.get(':key');
      if (typeof cert !== 'string' || cert === '')
        bad(':svc/app-tls :cert', `expected the certificate chain's PEM file path, found ${describe(cert)}`);
      if (typeof key !== 'string' || key === '')
        bad(':svc/app-tls :key', `expected the private key's PEM file path, found ${describe(key)}`);
      if (typeof cert === 'string' && cert !== '' && typeof key === 'string' && key !== '') out.tls = { cert, key };
    }
  }

  const proxies = merged.get(':svc/app-trusted-proxies');
  if (proxies !== undefined) {
    const list = strings(':svc/app-trusted-proxies', proxies);
    if (list !== null) {
      const ok: string[] = [];
      for (const a of list) {
        const prefix = TRUSTED_PROXY_RANGE_NAMES.includes(a) ? -1 : cidrPrefixLength(a);
        if (prefix === null) {
          bad(
            `:svc/app-trusted-proxies ${JSON.stringify(a)}`,
            `not an IP address or CIDR block (e.g. "10.0.0.0/8", "::1") or one of ${TRUSTED_PROXY_RANGE_NAMES.map((n) => `"${n}"`).join(', ')}`,
          );
        } else if (prefix === 0) {
          bad(
            `:svc/app-trusted-proxies ${JSON.stringify(a)}`,
            'trusting every address would let any client forge X-Forwarded-For and X-Forwarded-Proto; name the proxies',
          );
        } else if (!ok.includes(a)) ok.push(a);
      }
      out.trustedProxies = ok;
    }
  }

  const brand = merged.get(':svc/app-brand');
  if (brand !== undefined) out.brand = readAppBrand(brand, bad, readAsset);

  const routes = merged.get(':svc/app-routes');
  if (routes !== undefined) {
    out.routes = readRoutes(routes, bad);
    // The one-route shorthand and its settings say per route what :svc/app-routes says per entry.
    const shorthand = ROUTE_SHORTHAND_KEYS.filter((k) => merged.has(k.key));
    for (const { key, instead } of shorthand) {
      bad(key, `:svc/app-routes and ${key} exclude each other: ${instead}`);
    }
  }
  // With one public origin every request is that origin: the handoff could never reach another.
  if (out.authOrigin !== null && out.publicOrigin !== null && out.authOrigin !== out.publicOrigin) {
    bad(
      ':svc/app-auth-origin',
      `expected the :svc/app-public-origin ${out.publicOrigin} (every request of this gateway is that origin), found ${out.authOrigin}: for sign-in across many hosts, use :svc/app-routes`,
    );
  }
  return out;
}

/** The keys of the one-route shorthand that `:svc/app-routes` replaces, and what to write instead. */
const ROUTE_SHORTHAND_KEYS: readonly { readonly key: string; readonly instead: string }[] = [
  { key: ':svc/app-upstream', instead: 'give each route its :to (or use :svc/app-upstream alone for one application)' },
  { key: ':svc/app-public', instead: 'give each route its :public paths' },
  { key: ':svc/app-require', instead: 'give each route its :require' },
  { key: ':svc/app-audience', instead: 'give each route its :audience' },
  { key: ':svc/app-public-origin', instead: "each route's :from is the origin browsers reach it at" },
];

/** The keys of one `:svc/app-routes` entry. */
const ROUTE_KEYS = [':from', ':to', ':public', ':require', ':audience'];

/** An example route, for messages. */
const ROUTE_EXAMPLE = '{:from "https://grafana.example.com" :to "http://127.0.0.1:3000"}';

/**
 * Reads `:svc/app-routes`: a non-empty vector of `{:from :to :public :require :audience}`. Every
 * problem names the route by its position and `:from` (`:svc/app-routes[2]
 * ("https://tools.example.com/wiki/*") :require :groups`); two routes with the same origin and
 * path are refused.
 */
function readRoutes(value: EdnValue, bad: (key: string, message: string) => void): AppRoute[] {
  if (!Array.isArray(value) || value.length === 0) {
    bad(':svc/app-routes', `expected a non-empty vector of routes such as [${ROUTE_EXAMPLE}], found ${describe(value)}`);
    return [];
  }
  const out: AppRoute[] = [];
  const seen = new Map<string, string>();
  (value as EdnValue[]).forEach((entry, index) => {
    const fromValue = isEdnMap(entry) ? entry.get(':from') : undefined;
    const name = `:svc/app-routes[${index}]${typeof fromValue === 'string' ? ` (${JSON.stringify(fromValue)})` : ''}`;
    if (!isEdnMap(entry)) {
      bad(name, `expected a map such as ${ROUTE_EXAMPLE}, found ${describe(entry)}`);
      return;
    }
    let ok = true;
    const fail = (key: string, message: string) => {
      bad(key, message);
      ok = false;
    };
    for (const k of entry.keys())
      if (!ROUTE_KEYS.includes(k)) fail(`${name} ${k}`, `unknown key; expected one of ${ROUTE_KEYS.join(', ')}`);

    let origin = '';
    let prefix: string | null = null;
    if (typeof fromValue !== 'string') {
      fail(
        `${name} :from`,
        `expected the origin browsers reach the application at, such as "https://grafana.example.com" or "https://tools.example.com/wiki/*", found ${describe(fromValue)}`,
      );
    } else {
      const parsed = parseRouteFrom(fromValue);
      const problem = 'problem' in parsed ? parsed.problem : parsed.prefix === null ? null : appPathPatternProblem(parsed.prefix);
      if (problem !== null || 'problem' in parsed) fail(`${name} :from`, problem ?? 'not a route');
      else {
        origin = parsed.origin;
        prefix = parsed.prefix;
        const where = `${origin}${prefix === null ? '' : routePrefixBase(prefix)}`;
        const earlier = seen.get(where);
        if (earlier !== undefined)
          fail(`${name} :from`, `${earlier} already routes ${origin}${prefix ?? ''}; each origin and path has one route`);
        else seen.set(where, `:svc/app-routes[${index}]`);
      }
    }

    const to = entry.get(':to');
    let upstream = '';
    const toProblem = typeof to === 'string' ? upstreamProblem(to) : 'not a string';
    if (toProblem !== null || typeof to !== 'string') {
      fail(
        `${name} :to`,
        `expected the upstream's http:// or https:// origin such as "http://127.0.0.1:3000" (${toProblem}), found ${describe(to)}`,
      );
    } else upstream = new URL(to).origin;

    const publicPaths: string[] = [];
    const publicValue = entry.get(':public');
    if (publicValue !== undefined) {
      if (!Array.isArray(publicValue) || !publicValue.every((x: EdnValue) => typeof x === 'string')) {
        fail(`${name} :public`, `expected a vector of paths such as ["/healthz" "/public/*"], found ${describe(publicValue)}`);
      } else {
        for (const p of publicValue as string[]) {
          const problem = appPathPatternProblem(p);
          if (problem !== null) fail(`${name} :public ${JSON.stringify(p)}`, problem);
          else if (prefix !== null && !routeCoversPattern(prefix, p)) {
            fail(`${name} :public ${JSON.stringify(p)}`, `the path is not under the route's ${prefix}, so it could never apply`);
          } else if (!publicPaths.includes(p)) publicPaths.push(p);
        }
      }
    }

    const requireValue = entry.get(':require');
    let requirement: AppPathRequirement | null = null;
    if (requireValue !== undefined) {
      requirement = readRequirementBody(`${name} :require`, prefix ?? '/*', requireValue, (key, message) => fail(key, message));
      if (requirement === null) ok = false;
    }

    const audienceValue = entry.get(':audience');
    let audience = upstream;
    if (audienceValue !== undefined) {
      if (typeof audienceValue !== 'string' || audienceValue.trim() === '' || hasControlCharacter(audienceValue)) {
        fail(
          `${name} :audience`,
          `expected the assertion audience the application checks, a non-empty string without control characters, found ${describe(audienceValue)}`,
        );
      } else audience = audienceValue;
    }

    if (!ok) return;
    const from = `${origin}${prefix ?? ''}`;
    out.push({ index, from, origin, prefix, to: upstream, publicPaths, requirement, audience });
  });
  return out;
}

/** Whether the route prefix `prefix` (`/wiki/*`) covers every path the pattern `pattern` matches, as route matching reads paths (case-insensitively). */
function routeCoversPattern(prefix: string, pattern: string): boolean {
  const base = routePrefixBase(prefix);
  const p = pattern.toLowerCase();
  return p === base || p.startsWith(`${base}/`);
}

/**
 * Reads a file named in `project.edn` (relative to the project directory) at load: its bytes,
 * or why it cannot be read (`"no such file"`). Given by whoever loads the file from disk.
 */
export type AssetReader = (path: string) => { readonly bytes: Uint8Array } | { readonly problem: string };

/** The largest logo `:svc/app-brand` takes: it is inlined into every page as a data: URI. */
export const APP_BRAND_LOGO_MAX_BYTES = 64 * 1024;

/** The contrast `:svc/app-brand :accent` must have against white text (WCAG 2 AA, normal text). */
export const APP_BRAND_MIN_CONTRAST = 4.5;

/**
 * The contrast ratio of white text on `hex` (`#rrggbb`), as WCAG 2 defines it (1 to 21).
 *
 * @example
 * contrastWithWhite('#0f766e'); // 5.47...
 */
export function contrastWithWhite(hex: string): number {
  const channel = (i: number) => {
    const c = Number.parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  const luminance = 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
  return 1.05 / (luminance + 0.05);
}

/** The media type of a logo by its content: PNG by its signature, SVG by an `<svg` root; else null. */
function logoMediaType(bytes: Uint8Array): string | null {
  const png = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
  if (bytes.length > png.length && png.every((b, i) => bytes[i] === b)) return 'image/png';
  const head = new TextDecoder('utf-8', { fatal: false }).decode(bytes.subarray(0, 1024));
  if (/^\s*(?:<\?xml[^>]*>\s*)?(?:<!--[\s\S]*?-->\s*)*(?:<!doctype svg[^>]*>\s*)?<svg[\s>]/i.test(head)) return 'image/svg+xml';
  return null;
}

/** Reads `:svc/app-brand {:name :logo :accent}`. */
function readAppBrand(
  value: EdnValue,
  bad: (key: string, message: string) => void,
  readAsset: AssetReader | undefined,
): AppGatewayConfig['brand'] {
  const KEY = ':svc/app-brand';
  if (!isEdnMap(value)) {
    bad(KEY, `expected {:name "Acme" :logo "brand/logo.png" :accent "#0f766e"}, found ${describe(value)}`);
    return null;
  }
  let ok = true;
  for (const k of value.keys()) {
    if (k !== ':name' && k !== ':logo' && k !== ':accent') {
      bad(`${KEY} ${k}`, 'unknown key; expected :name, :logo and :accent');
      ok = false;
    }
  }
  const name = value.get(':name');
  if (typeof name !== 'string' || name.trim() === '' || [...name].length > 64 || hasControlCharacter(name)) {
    bad(`${KEY} :name`, `expected the product name, 1 to 64 characters without control characters, found ${describe(name)}`);
    ok = false;
  }
  let accent: string | null = null;
  const accentValue = value.get(':accent');
  if (accentValue !== undefined) {
    if (typeof accentValue !== 'string' || !/^#[0-9a-fA-F]{6}$/.test(accentValue)) {
      bad(`${KEY} :accent`, `expected a colour written #rrggbb, such as "#0f766e", found ${describe(accentValue)}`);
      ok = false;
    } else {
      const ratio = contrastWithWhite(accentValue);
      if (ratio < APP_BRAND_MIN_CONTRAST) {
        bad(
          `${KEY} :accent`,
          `${accentValue} is too light for the white text on it (contrast ${ratio.toFixed(2)}:1, at least ${APP_BRAND_MIN_CONTRAST}:1 is needed to be readable); choose a darker shade`,
        );
        ok = false;
      } else accent = accentValue.toLowerCase();
    }
  }
  let logo: string | null = null;
  const logoValue = value.get(':logo');
  if (logoValue !== undefined) {
    if (typeof logoValue !== 'string' || logoValue.trim() === '' || hasControlCharacter(logoValue)) {
      bad(`${KEY} :logo`, `expected the path of a PNG or SVG file (from the project directory), found ${describe(logoValue)}`);
      ok = false;
    } else if (readAsset !== undefined) {
      const read = readAsset(logoValue);
      if ('problem' in read) {
        bad(`${KEY} :logo`, `cannot read ${JSON.stringify(logoValue)}: ${read.problem}`);
        ok = false;
      } else if (read.bytes.length > APP_BRAND_LOGO_MAX_BYTES) {
        bad(
          `${KEY} :logo`,
          `${JSON.stringify(logoValue)} is ${read.bytes.length} bytes; a logo is at most 64 KiB (it is inlined into every page)`,
        );
        ok = false;
      } else {
        const type = logoMediaType(read.bytes);
        if (type === null) {
          bad(`${KEY} :logo`, `${JSON.stringify(logoValue)} is neither a PNG nor an SVG image`);
          ok = false;
        } else logo = `data:${type};base64,${Buffer.from(read.bytes).toString('base64')}`;
      }
    }
  }
  return ok && typeof name === 'string' ? { name: name.trim(), accent, logo } : null;
}

/** Why an `:svc/app-upstream` value is not an origin URL, or null. */
function upstreamProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'not a URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `the scheme ${url.protocol} is neither http: nor https:`;
  if (url.username !== '' || url.password !== '') return 'credentials never go in the URL';
  if (value.includes('?') || value.includes('#')) return 'no query or fragment';
  if (url.pathname !== '/') return "the origin only: the path is the request's own";
  return null;
}

/**
 * Reads the `:svc/app-require` map: path pattern → `{:subjects [...] :groups [...] :email-domains [...]
 * :amr [...] :max-auth-age-seconds n}`. Group names are checked as users' groups are (core's
 * `groupNameProblem`); domains are kept in the form emails are (lowercase A-label,
 * `normalizeEmailDomain`), so `"Bücher.example"` matches `user@xn--bcher-kva.example`.
 */
function readRequirements(map: EdnMap, publicPaths: readonly string[], bad: (key: string, message: string) => void): AppPathRequirement[] {
  const out: AppPathRequirement[] = [];
  for (const [path, body] of map) {
    const key = `:svc/app-require ${JSON.stringify(path)}`;
    const problem = path.startsWith(':') ? 'path patterns are strings, e.g. "/admin/*"' : appPathPatternProblem(path);
    if (problem !== null) {
      bad(key, problem);
      continue;
    }
    const covering = publicPaths.find((p) => patternCovers(p, path));
    if (covering !== undefined) {
      bad(key, `the path is public (${JSON.stringify(covering)} in :svc/app-public), so no requirement could apply to it`);
      continue;
    }
    const requirement = readRequirementBody(key, path, body, bad);
    if (requirement !== null) out.push(requirement);
  }
  return out;
}

/** The keys of one requirement (`:svc/app-require` entry, or a route's `:require`). */
const REQUIREMENT_KEYS = [':subjects', ':groups', ':email-domains', ':amr', ':max-auth-age-seconds'];

/**
 * Reads one requirement body `{:subjects [...] :groups [...] :email-domains [...] :amr [...]
 * :max-auth-age-seconds n}` for path pattern `path`, reporting its problems under `key`; null
 * when it is not a usable requirement.
 */
function readRequirementBody(
  key: string,
  path: string,
  body: EdnValue | undefined,
  bad: (key: string, message: string) => void,
): AppPathRequirement | null {
  const KEYS = REQUIREMENT_KEYS;
  if (!isEdnMap(body)) {
    bad(
      key,
      `expected a map such as {:groups ["ops"] :email-domains ["example.com"] :amr ["ed25519"] :max-auth-age-seconds 3600}, found ${describe(body)}`,
    );
    return null;
  }
  for (const k of body.keys()) if (!KEYS.includes(k)) bad(`${key} ${k}`, `unknown key; expected one of ${KEYS.join(', ')}`);
  if (![...body.keys()].some((k) => KEYS.includes(k))) {
    bad(key, `an empty requirement says nothing; give at least one of ${KEYS.join(', ')} (or remove the entry)`);
    return null;
  }
  const list = (k: string, valid: (s: string) => boolean, what: string): string[] | null => {
    const v = body.get(k);
    if (v === undefined) return null;
    if (!Array.isArray(v) || v.length === 0 || !v.every((x: EdnValue) => typeof x === 'string' && valid(x))) {
      const wrong = Array.isArray(v) ? v.find((x: EdnValue) => typeof x !== 'string' || !valid(x)) : undefined;
      bad(`${key} ${k}`, `expected a non-empty vector of ${what}, found ${describe(wrong === undefined ? v : wrong)}`);
      return null;
    }
    return [...new Set(v as string[])];
  };
  const subjects = list(':subjects', (x) => isIdOfKind(x, 'subject'), 'subject ids ("sub_...")');
  const groups = list(':groups', (x) => groupNameProblem(x) === null, 'group names (a-z, 0-9, ".", "_", "-", up to 64, e.g. "ops")');
  const domainList = list(':email-domains', (x) => normalizeEmailDomain(x) !== null, 'email domains (e.g. "example.com")');
  const emailDomains = domainList === null ? null : [...new Set(domainList.map((d) => normalizeEmailDomain(d) as string))];
  const amr = list(':amr', (x) => /^[a-z0-9][a-z0-9_-]{0,63}$/i.test(x), 'authentication method names (e.g. "ed25519")');
  const age = body.get(':max-auth-age-seconds');
  let maxAuthAgeSeconds: number | null = null;
  if (age !== undefined) {
    if (typeof age !== 'number' || !Number.isInteger(age) || age < 1 || age > MAX_AUTH_AGE_SECONDS_LIMIT) {
      bad(
        `${key} :max-auth-age-seconds`,
        `expected a whole number of seconds from 1 to ${MAX_AUTH_AGE_SECONDS_LIMIT}, found ${describe(age)}`,
      );
    } else maxAuthAgeSeconds = age;
  }
  return { path, subjects, groups, emailDomains, amr, maxAuthAgeSeconds };
}

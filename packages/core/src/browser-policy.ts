// The gateway's browser-session rules, pure (docs/providers.md section 4, docs/gateway.md):
// which cookies carry a session, whether a cookie-authenticated request may act (CSRF), and
// where a browser may be sent back after signing in. The server applies them.

/** The names of the cookies one gateway uses, and whether they carry `Secure`. */
export interface BrowserCookieNames {
  readonly access: string;
  readonly refresh: string;
  /** The ceremony in progress (a provider flow id), bound to the browser that began it. */
  readonly flow: string;
  /** A route host's handoff state (`:svc/app-auth-origin`): what a code must be bound to, and the path to return to. */
  readonly sso: string;
  readonly secure: boolean;
}

/**
 * Over TLS: the `__Host-` prefix, which the browser only accepts with `Secure`, `Path=/` and no
 * `Domain`, so no sibling subdomain and no plain-HTTP page can set or overwrite them (cookie
 * tossing, session fixation).
 */
export const TLS_COOKIE_NAMES: BrowserCookieNames = Object.freeze({
  access: '__Host-svc-access',
  refresh: '__Host-svc-refresh',
  flow: '__Host-svc-flow',
  sso: '__Host-svc-sso',
  secure: true,
});

/**
 * Over plain HTTP (development on loopback): the same names without the prefix and without
 * `Secure`. A `__Host-` cookie without `Secure` is refused by every browser (Chromium checked
 * by packages/server/test/gateway-browser.test.ts), and `Secure` over plain HTTP is accepted
 * only on some browsers' loopback exception, so this is the one choice that works everywhere a
 * developer runs the gateway over HTTP. Such a gateway's cookies have no integrity against
 * other hosts anyway, as nothing it serves does.
 */
export const PLAIN_COOKIE_NAMES: BrowserCookieNames = Object.freeze({
  access: 'svc-access',
  refresh: 'svc-refresh',
  flow: 'svc-flow',
  sso: 'svc-sso',
  secure: false,
});

/**
 * The cookie names of a request served over TLS (`tls`: the listener's own TLS, or a trusted
 * proxy's `X-Forwarded-Proto: https`) or over plain HTTP. Only these are read: over TLS a
 * prefix-less `svc-access` (which any subdomain could have planted) is never believed.
 *
 * @example
 * browserCookieNames(true).access; // '__Host-svc-access'
 */
export function browserCookieNames(tls: boolean): BrowserCookieNames {
  return tls ? TLS_COOKIE_NAMES : PLAIN_COOKIE_NAMES;
}

const ALL_NAMES: ReadonlySet<string> = new Set(
  [TLS_COOKIE_NAMES, PLAIN_COOKIE_NAMES].flatMap((n) => [n.access, n.refresh, n.flow, n.sso].map((s) => s.toLowerCase())),
);

/**
 * Whether a cookie name is one of the gateway's (either set, any case): such a cookie never
 * reaches the application, whatever it holds.
 *
 * @example
 * isBrowserSessionCookie('__Host-svc-refresh'); // true
 * isBrowserSessionCookie('theme'); // false
 */
export function isBrowserSessionCookie(name: string): boolean {
  return ALL_NAMES.has(name.trim().toLowerCase());
}

/** Methods that must not change state (RFC 9110 §9.2.1): no CSRF check. */
const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Whether a method is safe (GET, HEAD, OPTIONS).
 *
 * @example
 * isSafeMethod('POST'); // false
 */
export function isSafeMethod(method: string): boolean {
  return SAFE_METHODS.has(method.toUpperCase());
}

/** What the CSRF rule looks at. */
export interface CsrfInput {
  readonly method: string;
  /** The `Origin` header, if any. */
  readonly origin: string | undefined;
  /** The `Sec-Fetch-Site` header, if any. */
  readonly secFetchSite: string | undefined;
  /** The gateway's own origin as the browser sees it (`https://app.example.com`), see {@link canonicalOrigin}. */
  readonly gatewayOrigin: string;
  /** A websocket upgrade: a GET, but one that opens a channel that acts (cross-site websocket hijacking). */
  readonly upgrade?: boolean;
}

/**
 * The CSRF rule for a request authenticated by the gateway's cookies: a safe method passes;
 * anything else (and every upgrade) must show it comes from the gateway's own origin: `Origin`
 * equal to it, or, with no `Origin`, `Sec-Fetch-Site: same-origin` or `none` (the user typed
 * it). Same-site is not enough: another port or subdomain of the same site is another origin,
 * and `SameSite=Lax` cookies do reach it. Returns why the request is refused, or null.
 * Requests authenticated by `Authorization` are not subject to it (a browser never attaches
 * that header on its own).
 *
 * @example
 * csrfRefusal({ method: 'POST', origin: 'http://evil.test', secFetchSite: 'cross-site', gatewayOrigin: 'https://app.example' });
 * // 'the request comes from another origin (http://evil.test)'
 */
export function csrfRefusal(input: CsrfInput): string | null {
  if (isSafeMethod(input.method) && input.upgrade !== true) return null;
  if (input.origin !== undefined) {
    const origin = canonicalOrigin(input.origin);
    if (origin !== null && origin === canonicalOrigin(input.gatewayOrigin)) return null;
    return `the request comes from another origin (${input.origin.slice(0, 100)})`;
  }
  const site = input.secFetchSite?.trim().toLowerCase();
  if (site === 'same-origin' || site === 'none') return null;
  if (site === undefined) return 'the request shows neither Origin nor Sec-Fetch-Site: its origin cannot be told';
  return `the request comes from another origin (Sec-Fetch-Site: ${site.slice(0, 30)})`;
}

const ORIGIN_SHAPE = /^(https?):\/\/([a-z0-9.-]+|\[[0-9a-f:.]+\])(?::(\d{1,5}))?$/;

/**
 * An origin in one spelling (lower case, the default port left out), or null when the value
 * is not an `http(s)` origin (`null`, a path, userinfo).
 *
 * @example
 * canonicalOrigin('HTTP://LocalHost:80'); // 'http://localhost'
 * canonicalOrigin('null'); // null
 */
export function canonicalOrigin(value: string): string | null {
  const m = ORIGIN_SHAPE.exec(value.trim().toLowerCase());
  if (m === null) return null;
  const [, scheme, host, port] = m;
  if (port === undefined || (scheme === 'http' && port === '80') || (scheme === 'https' && port === '443')) return `${scheme}://${host}`;
  if (Number(port) > 65535) return null;
  return `${scheme}://${host}:${port}`;
}

/** The account page of the application gateway: the one reserved path a sign-in may return to. */
export const ACCOUNT_PAGE_PATH = '/.svc/account';

/**
 * Where the auth origin hands a signed-in browser to a route host (`:svc/app-auth-origin`): the
 * sign-in page may come back here, the only other `/.svc/` path it returns to.
 */
export const SSO_AUTHORIZE_PATH = '/.svc/auth/v1/sso/authorize';

/** The longest return path kept. */
export const MAX_RETURN_PATH_LENGTH = 2048;

/**
 * The path a browser may be sent back to after signing in, or null: only a path of this
 * origin (`/` then anything but `/` or `\`: never `//host` or `/\host`, which browsers read as
 * another host), printable ASCII, no backslash anywhere, not under the reserved `/.svc/`
 * prefix (no loop back into the sign-in) except the account page ({@link ACCOUNT_PAGE_PATH}), at most {@link MAX_RETURN_PATH_LENGTH} characters.
 * An absolute URL, even to this origin, is refused: the gateway never needs one.
 *
 * @example
 * safeReturnPath('/app/orders?id=7'); // '/app/orders?id=7'
 * safeReturnPath('//evil.test/'); // null
 */
export function safeReturnPath(value: unknown): string | null {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_RETURN_PATH_LENGTH) return null;
  if (value[0] !== '/' || value[1] === '/' || value[1] === '\\') return null;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f || c === 0x5c) return null;
  }
  const path = value.split(/[?#]/, 1)[0] as string;
  if (path === ACCOUNT_PAGE_PATH || path === SSO_AUTHORIZE_PATH) return value;
  if (path === '/.svc' || path.startsWith('/.svc/')) return null;
  return value;
}

/**
 * The header rules of the gateway's upstream mode, as pure functions: which headers a proxied
 * request and a proxied response carry on, and which the gateway makes itself. The server's
 * upstream attach applies them; nothing here does I/O.
 */

/**
 * The hop-by-hop headers of RFC 9110 §7.6.1 (with the obsolete `Keep-Alive` and
 * `Proxy-Connection` it names): they describe one connection, so they are never relayed, in
 * either direction, and neither is any header the `Connection` header names.
 */
export const HOP_BY_HOP_HEADERS: readonly string[] = Object.freeze([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Request headers the gateway never relays as the caller sent them: forwarding claims it makes
 * itself (`X-Forwarded-For`, `-Proto`, `-Host` fresh; the others not at all), and `Expect`
 * (the gateway's own server answers `100-continue`; the upstream hop sends the body at once).
 */
export const GATEWAY_MADE_REQUEST_HEADERS: readonly string[] = Object.freeze(['forwarded', 'x-real-ip', 'expect']);

/** Every request header name that starts with this is a forwarding claim the gateway makes itself. */
export const FORWARDED_PREFIX = 'x-forwarded-';

const HOP_BY_HOP = new Set(HOP_BY_HOP_HEADERS);
const GATEWAY_MADE = new Set(GATEWAY_MADE_REQUEST_HEADERS);

/**
 * A header name as the upstream rules compare it: lower-cased, with every character other than
 * a letter or a digit read as `-` (CGI, WSGI, PHP and Rack fold `_` into `-`; others fold `.`),
 * so `X_Forwarded_For` is `x-forwarded-for`.
 *
 * @example
 * upstreamHeaderName('X_Forwarded.For'); // 'x-forwarded-for'
 */
export function upstreamHeaderName(name: string): string {
  let folded = FOLDED.get(name);
  if (folded === undefined) {
    folded = name.toLowerCase().replace(/[^a-z0-9]/g, '-');
    // Every request and response folds the same few dozen names: remembered, within bounds (a
    // caller who sends thousands of distinct or long names only starts the memory over, or skips it).
    if (name.length <= FOLDED_NAME_MAX) {
      if (FOLDED.size >= FOLDED_MAX) FOLDED.clear();
      FOLDED.set(name, folded);
    }
  }
  return folded;
}

/** {@link upstreamHeaderName}'s results by name, at most {@link FOLDED_MAX} of them. */
const FOLDED = new Map<string, string>();
const FOLDED_MAX = 1024;
const FOLDED_NAME_MAX = 64;

/**
 * The header names a `Connection` header lists (RFC 9110 §7.6.1), compared as
 * {@link upstreamHeaderName} does; empty for none.
 *
 * @example
 * connectionNamedHeaders('keep-alive, X_Private'); // Set { 'keep-alive', 'x-private' }
 */
export function connectionNamedHeaders(value: string | readonly string[] | undefined): Set<string> {
  const names = new Set<string>();
  if (value === undefined) return names;
  for (const line of typeof value === 'string' ? [value] : value) {
    for (const token of line.split(',')) {
      const name = token.trim();
      if (name !== '') names.add(upstreamHeaderName(name));
    }
  }
  return names;
}

/**
 * Whether an inbound request header goes on to the upstream as the caller sent it: not if it is
 * hop-by-hop, named by the request's `Connection` (`named`, from
 * {@link connectionNamedHeaders}), a forwarding claim or another header the gateway makes
 * ({@link GATEWAY_MADE_REQUEST_HEADERS}, every `X-Forwarded-*`), or of the name of an identity
 * header the gateway sets (`identity`, compared names): those are set last, by the gateway.
 *
 * @example
 * relaysRequestHeader('X_Forwarded_For', new Set(), new Set()); // false
 * relaysRequestHeader('accept', new Set(), new Set()); // true
 */
export function relaysRequestHeader(name: string, named: ReadonlySet<string>, identity: ReadonlySet<string>): boolean {
  const n = upstreamHeaderName(name);
  return !(HOP_BY_HOP.has(n) || named.has(n) || GATEWAY_MADE.has(n) || n.startsWith(FORWARDED_PREFIX) || identity.has(n));
}

/**
 * Whether an upstream response header goes on to the caller: not if it is hop-by-hop or named
 * by the response's `Connection` (`named`).
 *
 * @example
 * relaysResponseHeader('keep-alive', new Set()); // false
 * relaysResponseHeader('set-cookie', new Set()); // true
 */
export function relaysResponseHeader(name: string, named: ReadonlySet<string>): boolean {
  const n = upstreamHeaderName(name);
  return !(HOP_BY_HOP.has(n) || named.has(n));
}

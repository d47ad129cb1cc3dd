import { isIPv6 } from 'node:net';
import { AuthError } from '@svc/core';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { sendProblem } from './problem.js';

const DOTTED_QUAD = /^(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})$/;
const PORT = /^\d{1,5}$/;

/**
 * Whether `address` is a strict dotted-quad IPv4 address (no leading zeros, no short or
 * hexadecimal forms), returning its four octets, or null.
 *
 * @example
 * parseIPv4('127.0.0.1'); // [127, 0, 0, 1]
 * parseIPv4('127.1'); // null
 */
export function parseIPv4(address: string): [number, number, number, number] | null {
  const m = DOTTED_QUAD.exec(address);
  if (m === null) return null;
  const octets = [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])] as [number, number, number, number];
  return octets.every((o) => o <= 255) ? octets : null;
}

/**
 * Whether `address` (IPv6 without brackets) is the IPv6 loopback `::1`, in any textual form.
 *
 * @example
 * isIPv6Loopback('0:0:0:0:0:0:0:1'); // true
 */
export function isIPv6Loopback(address: string): boolean {
  if (!isIPv6(address)) return false;
  try {
    return new URL(`http://[${address}]/`).hostname === '[::1]';
  } catch {
    return false;
  }
}

/**
 * Whether `address` (IPv6 without brackets) is the IPv6 wildcard `::`, in any textual form.
 *
 * @example
 * isIPv6Unspecified('0:0::0'); // true
 */
export function isIPv6Unspecified(address: string): boolean {
  if (!isIPv6(address)) return false;
  try {
    return new URL(`http://[${address}]/`).hostname === '[::]';
  } catch {
    return false;
  }
}

/** A `host[:port]` split into its parts; `bracketed` when the host was an `[IPv6]` literal. */
export interface HostPort {
  readonly host: string;
  readonly port: string | undefined;
  readonly bracketed: boolean;
}

/**
 * Splits `host[:port]` or `[ipv6][:port]`. Null when the shape is wrong (an unbracketed IPv6
 * address, text after `]`, an empty or non-numeric port, a port over 65535).
 *
 * @example
 * splitHostPort('[::1]:9090'); // { host: '::1', port: '9090', bracketed: true }
 */
export function splitHostPort(value: string): HostPort | null {
  let host: string;
  let port: string | undefined;
  let bracketed = false;
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    if (end < 0) return null;
    host = value.slice(1, end);
    bracketed = true;
    const rest = value.slice(end + 1);
    if (rest === '') port = undefined;
    else if (rest.startsWith(':')) port = rest.slice(1);
    else return null;
  } else {
    const colon = value.indexOf(':');
    if (colon < 0) {
      host = value;
    } else {
      if (value.indexOf(':', colon + 1) >= 0) return null;
      host = value.slice(0, colon);
      port = value.slice(colon + 1);
    }
  }
  if (port !== undefined && (!PORT.test(port) || Number(port) > 65535)) return null;
  return { host, port, bracketed };
}

/**
 * Whether a host (as in a `Host` header or an origin, brackets removed) names this machine's
 * loopback: `localhost`, `127.0.0.0/8` in strict dotted-quad form, or `[::1]`.
 */
function isLoopbackHost(hp: HostPort): boolean {
  if (hp.bracketed) return isIPv6Loopback(hp.host);
  if (hp.host.toLowerCase() === 'localhost') return true;
  const v4 = parseIPv4(hp.host);
  return v4 !== null && v4[0] === 127;
}

/** How many accepted Host values one guard remembers. */
const ACCEPTED_HOSTS_MAX = 256;

/**
 * Whether a `Host` header value is a loopback name or address with any port: `localhost`,
 * `127.0.0.0/8`, `[::1]`. A missing header (HTTP/1.0) is not.
 *
 * @example
 * isLoopbackHostHeader('127.0.0.1:9090'); // true
 * isLoopbackHostHeader('evil.example'); // false
 */
export function isLoopbackHostHeader(value: string | undefined): boolean {
  if (value === undefined || value === '') return false;
  const hp = splitHostPort(value);
  return hp !== null && isLoopbackHost(hp);
}

const ORIGIN = /^(https?):\/\/([^/?#@\s]+)$/i;

/**
 * Whether an `Origin` header value is a loopback origin: `http(s)://` and a loopback host
 * with any port. The opaque origin `null` is not.
 *
 * @example
 * isLoopbackOrigin('http://localhost:5173'); // true
 * isLoopbackOrigin('null'); // false
 */
export function isLoopbackOrigin(value: string): boolean {
  const m = ORIGIN.exec(value);
  if (m === null || m[2] === undefined) return false;
  const hp = splitHostPort(m[2]);
  return hp !== null && isLoopbackHost(hp);
}

/** The most socket addresses {@link isLoopbackAddress} remembers its verdict for. */
const LOOPBACK_VERDICTS_MAX = 4096;
/** The longest address remembered: an IPv6 address with an IPv4 tail and a zone (`%` and an interface name). */
const LOOPBACK_ADDRESS_MAX_LENGTH = 64;
const loopbackVerdicts = new Map<string, boolean>();

/**
 * Whether a socket address (as `socket.remoteAddress` / `localAddress` report it) is loopback:
 * `127.0.0.0/8`, `::1`, or an IPv4-mapped `::ffff:127.x.y.z` (what a dual-stack `[::]`
 * listener reports for an IPv4 loopback peer). Undefined (a destroyed socket) is not.
 *
 * @example
 * isLoopbackAddress('::ffff:127.0.0.1'); // true
 * isLoopbackAddress('192.0.2.2'); // false
 */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (address === undefined) return false;
  // A peer's address is judged on every request of its connection: a bounded memo of verdicts
  // keeps that to one lookup (an address never seen before is still judged in full).
  const known = loopbackVerdicts.get(address);
  if (known !== undefined) return known;
  const v4 = parseIPv4(address.toLowerCase().startsWith('::ffff:') ? address.slice(7) : address);
  const verdict = v4 !== null ? v4[0] === 127 : isIPv6Loopback(address);
  // Only what can be a socket address is remembered: a client address taken from a trusted
  // proxy's X-Forwarded-For may be any text, and must not fill the memo with long strings.
  if (address.length <= LOOPBACK_ADDRESS_MAX_LENGTH && loopbackVerdicts.size < LOOPBACK_VERDICTS_MAX) {
    loopbackVerdicts.set(address, verdict);
  }
  return verdict;
}

/** An absolute-form request target (`http://host/path`, RFC 9112 §3.2.2): its authority is in group 1. */
const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i;

/**
 * The authority an absolute-form request target names (`GET http://evil.example/health`),
 * userinfo removed, or null for any other target. A server must take it over the `Host`
 * header (RFC 9112 §3.2.2), so a guard that reads only `Host` would be walked around by it.
 *
 * @example
 * absoluteFormAuthority('http://evil.example:9090/health'); // 'evil.example:9090'
 * absoluteFormAuthority('/health'); // null
 */
export function absoluteFormAuthority(target: string): string | null {
  const m = ABSOLUTE_FORM.exec(target);
  if (m === null) return null;
  const authority = m[1] ?? '';
  return authority.slice(authority.lastIndexOf('@') + 1);
}

/** How many `Host` fields a raw header list carries. */
function hostFields(rawHeaders: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    // Only a four-letter name can be `Host`: the others are not lowercased (this runs on every request).
    const name = rawHeaders[i] as string;
    if (name.length === 4 && name.toLowerCase() === 'host') n++;
  }
  return n;
}

/**
 * The DNS-rebinding defence of a loopback-only surface: an `onRequest` hook that refuses
 * (`403 forbidden_host`) a request whose `Host` is not a loopback name or address, or that
 * carries a non-loopback `Origin`. A page on `evil.example` whose name was rebound to
 * 127.0.0.1 still sends `Host: evil.example`, so it never reaches a handler. An absolute-form
 * target (`GET http://evil.example/health`) is judged by its authority (403 when foreign), and
 * is otherwise refused as ambiguous (400 invalid_request), like two `Host` fields. With `when`,
 * only requests for which it returns true are guarded (the node surface: those that arrived on
 * a loopback address); the two ambiguities are refused on every request.
 *
 * @example
 * installSecurityHeaders(app);
 * installLoopbackGuard(app);
 */
export function installLoopbackGuard(app: FastifyInstance, opts: { readonly when?: (req: FastifyRequest) => boolean } = {}): void {
  const { when } = opts;
  // Accepted Host values repeat on every request; remembering a bounded few (per app, so one
  // surface's traffic never shapes another's) keeps the guard to one Set lookup on the hot
  // path. Refused values are never remembered.
  const accepted = new Set<string>();
  const loopbackHost = (host: string | undefined): boolean => {
    if (host !== undefined && accepted.has(host)) return true;
    const ok = isLoopbackHostHeader(host);
    if (ok && accepted.size < ACCEPTED_HOSTS_MAX) accepted.add(host as string);
    return ok;
  };
  app.addHook('onRequest', (req, reply, done) => {
    // Which host a request names must not depend on the parser: Node keeps the first of two
    // Host fields, another reader the last; and an absolute-form target names its own host,
    // which a server must take over `Host`. Refused on every request, guarded or not (the
    // gateway's hygiene refuses both the same way before this hook).
    if (hostFields(req.raw.rawHeaders) > 1) {
      sendProblem(reply, new AuthError('invalid_request', 'the Host header is sent more than once'));
      return;
    }
    const guarded = when === undefined || when(req);
    const authority = absoluteFormAuthority(req.raw.url ?? '');
    if (authority !== null) {
      sendProblem(
        reply,
        guarded && !loopbackHost(authority)
          ? new AuthError('forbidden_host', 'the request target must name a loopback address (localhost, 127.0.0.1, [::1])')
          : new AuthError('invalid_request', 'send the request target as a path (origin form), not as an absolute URL'),
      );
      return;
    }
    if (!guarded) {
      done();
      return;
    }
    const { host, origin } = req.headers;
    if (!loopbackHost(host)) {
      sendProblem(reply, new AuthError('forbidden_host', 'the Host header must name a loopback address (localhost, 127.0.0.1, [::1])'));
      return;
    }
    if (origin !== undefined && !isLoopbackOrigin(origin)) {
      sendProblem(reply, new AuthError('forbidden_host', 'cross-origin requests from a non-loopback origin are refused'));
      return;
    }
    done();
  });
}

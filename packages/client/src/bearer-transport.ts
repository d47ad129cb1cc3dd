import type { ClientFailureCode } from './failure-codes.js';
/**
 * Refused before anything is sent: a bearer or refresh token would have gone to (or a token
 * pair come back from) a non-loopback `http://` URL, where anyone on the path (or a listener
 * posing as the service) reads it. The same rule for both realms: an application gateway is
 * reached over `https://` (its built-in TLS or a proxy's). `code` is stable: `insecure_bearer_url`.
 */
export class InsecureBearerUrlError extends Error {
  readonly code = 'insecure_bearer_url' as const satisfies ClientFailureCode;
  readonly url: string;

  constructor(url: string) {
    super(
      `refusing to exchange tokens with ${url}: plain http:// is only allowed to a loopback address (127.0.0.1, [::1], localhost); use the https:// URL (an application gateway with :svc/app-tls or behind a TLS proxy), or reach a remote node through an SSH tunnel (ssh -L 9091:127.0.0.1:9091 host)`,
    );
    this.name = 'InsecureBearerUrlError';
    this.url = url;
  }
}

/**
 * Whether a bearer token may be sent to `url`: `https:` anywhere, `http:` only to a loopback
 * host (`localhost`, `127.0.0.0/8`, `[::1]`). The WHATWG URL parser has already normalised the
 * host (`127.1` is `127.0.0.1`, `0x7f.1` too), so the test is on its canonical form. Anything
 * unparsable or of another scheme is refused.
 *
 * @example
 * mayCarryBearer('http://127.0.0.1:9091'); // true
 * mayCarryBearer('http://192.0.2.7:9091'); // false
 */
export function mayCarryBearer(url: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (parsed.protocol === 'https:') return true;
  if (parsed.protocol !== 'http:') return false;
  const host = parsed.hostname.toLowerCase();
  if (host === 'localhost' || host === '[::1]') return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * Throws {@link InsecureBearerUrlError} unless {@link mayCarryBearer}(`url`).
 *
 * @example
 * assertMayCarryBearer(baseUrl); // before every request that sends Authorization: Bearer
 */
export function assertMayCarryBearer(url: string): void {
  if (!mayCarryBearer(url)) throw new InsecureBearerUrlError(url);
}

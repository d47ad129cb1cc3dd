import { isIPv6 } from 'node:net';
import { DEFAULT_APP_LISTEN } from '@svc/core/settings';
import { ListenAddressError } from './listen-address-error.js';
import { isIPv6Loopback, parseIPv4 } from './loopback.js';

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

function isHostName(host: string): boolean {
  return host.length <= 253 && host.split('.').every((label) => LABEL.test(label));
}

/**
 * Parses a `host:port` listen address of a listener that may bind a network address (the node
 * surface, the application gateway), wildcards included (`0.0.0.0`, `[::]`). Refused, before
 * anything binds: no port or a port outside 0..65535, an empty host, an IPv6 address without
 * brackets, a numeric host that is not a strict dotted quad (`127.1`, `010.0.0.1`,
 * `0x7f.0.0.1`), or a host name that is not one. `example` is the default address the message
 * suggests.
 *
 * @throws {ListenAddressError} with one line naming the address, where it came from, why, and what to do.
 * @example
 * parseNetworkListenAddress('0.0.0.0:8080', '--app-listen', '127.0.0.1:8080'); // { host: '0.0.0.0', port: 8080 }
 * parseNetworkListenAddress('[::1]:0', 'SVC_APP_LISTEN', '127.0.0.1:8080'); // { host: '::1', port: 0 }
 */
export function parseNetworkListenAddress(value: string, source: string, example: string): { host: string; port: number } {
  const port = example.slice(example.lastIndexOf(':') + 1);
  const refuse = (why: string) =>
    new ListenAddressError(
      `${source} ${JSON.stringify(value)} is refused: ${why}; use HOST:PORT, e.g. ${example}, 0.0.0.0:${port} or [::]:${port} (port 0 picks a free one)`,
    );
  let host: string;
  let portText: string;
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    if (end < 0 || value[end + 1] !== ':') throw refuse('expected [IPv6]:PORT');
    host = value.slice(1, end);
    portText = value.slice(end + 2);
    if (!isIPv6(host)) throw refuse(`${JSON.stringify(host)} is not an IPv6 address`);
  } else {
    const colon = value.lastIndexOf(':');
    if (colon < 0) throw refuse('expected HOST:PORT');
    host = value.slice(0, colon);
    portText = value.slice(colon + 1);
    if (host.includes(':')) throw refuse('an IPv6 address must be written in brackets');
    if (host === '') throw refuse('the host is empty (name the address to bind, 0.0.0.0 for every interface)');
    if (parseIPv4(host) === null) {
      if (/^[0-9.]+$/.test(host) || /^0x/i.test(host)) throw refuse(`${JSON.stringify(host)} is not a dotted-quad IPv4 address`);
      if (!isHostName(host)) throw refuse(`${JSON.stringify(host)} is not a host name or an IP address`);
      host = host.toLowerCase();
    }
  }
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) {
    throw refuse(`the port ${JSON.stringify(portText)} is not a number from 0 to 65535`);
  }
  return { host, port: Number(portText) };
}

/** Whether `host` (as {@link parseNetworkListenAddress} returns it) is a loopback address: `localhost`, `127.0.0.0/8`, `::1`. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || parseIPv4(host)?.[0] === 127 || isIPv6Loopback(host);
}

/** The names a network listener's address is looked up under, and what it does when none says. */
export interface NetworkListenNames {
  /** The flag, e.g. `--app-listen`. */
  readonly flag: string;
  /** The environment variable, e.g. `SVC_APP_LISTEN`. */
  readonly env: string;
  /** The `project.edn` key, e.g. `:svc/app-listen`. */
  readonly config: string;
  /** The address when none of them says. */
  readonly default: string;
  /** Where `off` is accepted: only from the environment (the node surface), or from any of the three (the gateway). */
  readonly offFrom: 'env' | 'any';
  /** What `off` disables, for the message when the flag may not say it. */
  readonly what: string;
}

/**
 * Decides where a network listener listens: the flag beats the environment variable, which
 * beats the `project.edn` key, which beats the default. `off` (any case) returns `'off'` where
 * `names.offFrom` allows it. Empty values count as unset.
 *
 * @throws {ListenAddressError} for a malformed address, naming where it came from.
 * @example
 * resolveNetworkListen({ flag: undefined, env: process.env.SVC_APP_LISTEN, config: 'off' }, APP_LISTEN_NAMES); // 'off'
 */
export function resolveNetworkListen(
  values: { flag?: string | undefined; env?: string | undefined; config?: string | null | undefined },
  names: NetworkListenNames,
): { host: string; port: number } | 'off' {
  const { flag, env, config } = values;
  const isOff = (v: string) => v.trim().toLowerCase() === 'off';
  if (flag !== undefined) {
    if (isOff(flag)) {
      if (names.offFrom === 'any') return 'off';
      throw new ListenAddressError(
        `${names.flag} "${flag}" is refused: the flag takes HOST:PORT; to disable ${names.what} set ${names.env}=off instead`,
      );
    }
    return parseNetworkListenAddress(flag, names.flag, names.default);
  }
  if (env !== undefined && env !== '') {
    if (isOff(env)) return 'off';
    return parseNetworkListenAddress(env, names.env, names.default);
  }
  if (config !== undefined && config !== null && config !== '') {
    if (names.offFrom === 'any' && isOff(config)) return 'off';
    return parseNetworkListenAddress(config, names.config, names.default);
  }
  return parseNetworkListenAddress(names.default, 'the default address', names.default);
}

/** The environment variable that sets the application gateway's address, or turns it `off`. */
export const APP_LISTEN_ENV = 'SVC_APP_LISTEN';

/** Where the application gateway's address is looked up: `--app-listen` > `SVC_APP_LISTEN` > `:svc/app-listen` > `127.0.0.1:8080`. */
export const APP_LISTEN_NAMES: NetworkListenNames = Object.freeze({
  flag: '--app-listen',
  env: APP_LISTEN_ENV,
  config: ':svc/app-listen',
  default: DEFAULT_APP_LISTEN,
  offFrom: 'any',
  what: 'the application gateway',
});

/**
 * Decides where the application gateway listens (the contract's precedence):
 * `--app-listen` > `SVC_APP_LISTEN` > `:svc/app-listen` > `127.0.0.1:8080`. `off` from any of
 * them disables it. Unlike the management API it may bind a network address.
 *
 * @throws {ListenAddressError} for a malformed address, naming where it came from.
 * @example
 * resolveAppListen({ flag: args.values['app-listen'], env: process.env.SVC_APP_LISTEN, config: project.config.app.listen });
 * // { host: '127.0.0.1', port: 8080 } when none is set
 */
export function resolveAppListen(values: {
  flag?: string | undefined;
  env?: string | undefined;
  config?: string | null | undefined;
}): { host: string; port: number } | 'off' {
  return resolveNetworkListen(values, APP_LISTEN_NAMES);
}

/**
 * Whether a listener on `host` serves bearer tokens in clear text over the network: plain HTTP
 * on a non-loopback address, with neither built-in TLS nor a trusted proxy that terminates TLS
 * in front of it. The caller warns loudly when it is.
 *
 * @example
 * cleartextExposed('0.0.0.0', { tls: false, trustedProxies: [] }); // true
 * cleartextExposed('0.0.0.0', { tls: false, trustedProxies: ['10.0.0.5'] }); // false: a proxy terminates TLS
 * cleartextExposed('127.0.0.1', { tls: false, trustedProxies: [] }); // false
 */
export function cleartextExposed(host: string, opts: { readonly tls: boolean; readonly trustedProxies: readonly string[] }): boolean {
  return !isLoopbackHost(host) && !opts.tls && opts.trustedProxies.length === 0;
}

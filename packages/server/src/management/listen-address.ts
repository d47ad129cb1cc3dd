import { isIPv6 } from 'node:net';
import { ListenAddressError } from '../http/listen-address-error.js';
import { isIPv6Loopback, isIPv6Unspecified, parseIPv4 } from '../http/loopback.js';

/** Where the management API listens when neither `--listen` nor `SVC_MANAGEMENT_LISTEN` says otherwise. */
export const DEFAULT_MANAGEMENT_LISTEN = '127.0.0.1:9090';

/** The environment variable that overrides the default listen address, or turns the embedded API `off`. */
export const MANAGEMENT_LISTEN_ENV = 'SVC_MANAGEMENT_LISTEN';

const REMOTE_HINT = 'use 127.0.0.1:<port>, [::1]:<port> or localhost:<port>, and an SSH tunnel for remote administration';

function refuse(source: string, value: string, why: string, what: string = REMOTE_HINT): ListenAddressError {
  return new ListenAddressError(`${source} ${JSON.stringify(value)} is refused: ${why}; ${what}`);
}

function parse(value: string, source: string): { host: string; port: number } {
  let host: string;
  let portText: string;
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    if (end < 0 || value[end + 1] !== ':') {
      throw refuse(source, value, 'expected host:port, with an IPv6 address in brackets', 'e.g. [::1]:9090');
    }
    host = value.slice(1, end);
    portText = value.slice(end + 2);
    if (host === '' || isIPv6Unspecified(host)) {
      throw refuse(source, value, 'a wildcard address would expose the management API to the network');
    }
    if (!isIPv6(host)) throw refuse(source, value, `${JSON.stringify(host)} is not an IPv6 address`, 'e.g. [::1]:9090');
    if (!isIPv6Loopback(host)) throw refuse(source, value, 'the management API only listens on a loopback address');
    host = '::1';
  } else {
    const colon = value.lastIndexOf(':');
    if (colon < 0) throw refuse(source, value, 'expected host:port', `e.g. ${DEFAULT_MANAGEMENT_LISTEN}`);
    host = value.slice(0, colon);
    portText = value.slice(colon + 1);
    if (host.includes(':')) {
      if (isIPv6Unspecified(host)) throw refuse(source, value, 'a wildcard address would expose the management API to the network');
      throw refuse(source, value, 'an IPv6 address must be written in brackets', 'e.g. [::1]:9090');
    }
    if (host === '' || host === '*' || host === '0.0.0.0') {
      throw refuse(source, value, 'a wildcard address would expose the management API to the network');
    }
    const v4 = parseIPv4(host);
    if (v4 !== null) {
      if (v4[0] !== 127) throw refuse(source, value, 'the management API only listens on a loopback address (127.0.0.0/8)');
    } else if (host.toLowerCase() === 'localhost') {
      host = 'localhost';
    } else if (/^[0-9.]+$/.test(host) || /^0x/i.test(host)) {
      throw refuse(source, value, `${JSON.stringify(host)} is not a dotted-quad IPv4 address`);
    } else {
      throw refuse(source, value, 'host names other than localhost are refused (a name may resolve to a non-loopback address)');
    }
  }
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) {
    throw refuse(
      source,
      value,
      `the port ${JSON.stringify(portText)} is not a number from 0 to 65535`,
      'e.g. 127.0.0.1:9090 (port 0 picks a free one)',
    );
  }
  return { host, port: Number(portText) };
}

/**
 * Parses a management listen address `host:port` and refuses, before anything binds, every
 * address that is not loopback: wildcards (`0.0.0.0`, `[::]`, an empty host), other IP
 * addresses, and every host name but `localhost`. Accepted: `127.0.0.0/8` in dotted-quad form,
 * `[::1]` (any spelling of it, in brackets), `localhost`. Port 0 picks a free port.
 *
 * @throws {ListenAddressError} with one line naming the address, why, and what to do.
 * @example
 * parseListenAddress('127.0.0.1:9090'); // { host: '127.0.0.1', port: 9090 }
 * parseListenAddress('[::1]:0'); // { host: '::1', port: 0 }
 * parseListenAddress('0.0.0.0:9090'); // throws ListenAddressError
 */
export function parseListenAddress(value: string): { host: string; port: number } {
  return parse(value, 'listen address');
}

/**
 * Decides where the management API listens: `--listen` beats `SVC_MANAGEMENT_LISTEN`, which
 * beats {@link DEFAULT_MANAGEMENT_LISTEN}. `SVC_MANAGEMENT_LISTEN=off` returns `'off'` (the
 * embedded API of `svc serve` is disabled); the flag itself cannot be `off`. An empty
 * environment value counts as unset.
 *
 * @throws {ListenAddressError} for a refused address, naming where it came from.
 * @example
 * resolveManagementListen({ flag: undefined, env: process.env.SVC_MANAGEMENT_LISTEN });
 * // { host: '127.0.0.1', port: 9090 } when neither is set
 */
export function resolveManagementListen(opts: {
  flag?: string | undefined;
  env?: string | undefined;
}): { host: string; port: number } | 'off' {
  const { flag, env } = opts;
  if (flag !== undefined) {
    if (flag.trim().toLowerCase() === 'off') {
      throw new ListenAddressError(
        `--listen "${flag}" is refused: the flag takes host:port; to disable the embedded management API set ${MANAGEMENT_LISTEN_ENV}=off instead`,
      );
    }
    return parse(flag, '--listen');
  }
  if (env !== undefined && env !== '') {
    if (env.trim().toLowerCase() === 'off') return 'off';
    return parse(env, MANAGEMENT_LISTEN_ENV);
  }
  return parse(DEFAULT_MANAGEMENT_LISTEN, 'default listen address');
}

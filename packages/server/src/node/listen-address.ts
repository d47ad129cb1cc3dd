import { isIPv6 } from 'node:net';
import { DEFAULT_NODE_LISTEN } from '@svc/core';
import { parseIPv4 } from '../http/loopback.js';
import { ListenAddressError } from '../management/listen-address.js';

/** Where the node surface listens when neither `--listen`, `SVC_NODE_LISTEN` nor `:svc/node-listen` says otherwise: core's configuration table. */
export { DEFAULT_NODE_LISTEN };

/** The environment variable that overrides the node listen address, or turns the node surface of `svc serve` `off`. */
export const NODE_LISTEN_ENV = 'SVC_NODE_LISTEN';

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

function refuse(source: string, value: string, why: string): ListenAddressError {
  return new ListenAddressError(
    `${source} ${JSON.stringify(value)} is refused: ${why}; use HOST:PORT, e.g. ${DEFAULT_NODE_LISTEN}, 0.0.0.0:9091 or [::]:9091 (port 0 picks a free one)`,
  );
}

function isHostName(host: string): boolean {
  return host.length <= 253 && host.split('.').every((label) => LABEL.test(label));
}

/**
 * Parses a node listen address `host:port`. Unlike the management API, the node surface may
 * bind a network address, wildcards included (`0.0.0.0`, `[::]`); what is refused, before
 * anything binds, is an address that is malformed: no port or a port outside 0..65535, an
 * empty host, an IPv6 address without brackets, a numeric host that is not a strict dotted
 * quad (`127.1`, `010.0.0.1`, `0x7f.0.0.1`), or a host name that is not one.
 *
 * @throws {ListenAddressError} with one line naming the address, why, and what to do.
 * @example
 * parseNodeListenAddress('0.0.0.0:9091'); // { host: '0.0.0.0', port: 9091 }
 * parseNodeListenAddress('[::1]:0'); // { host: '::1', port: 0 }
 * parseNodeListenAddress('127.1:9091'); // throws ListenAddressError
 */
export function parseNodeListenAddress(value: string, source = 'node listen address'): { host: string; port: number } {
  let host: string;
  let portText: string;
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    if (end < 0 || value[end + 1] !== ':') throw refuse(source, value, 'expected [IPv6]:PORT');
    host = value.slice(1, end);
    portText = value.slice(end + 2);
    if (!isIPv6(host)) throw refuse(source, value, `${JSON.stringify(host)} is not an IPv6 address`);
  } else {
    const colon = value.lastIndexOf(':');
    if (colon < 0) throw refuse(source, value, 'expected HOST:PORT');
    host = value.slice(0, colon);
    portText = value.slice(colon + 1);
    if (host.includes(':')) throw refuse(source, value, 'an IPv6 address must be written in brackets');
    if (host === '') throw refuse(source, value, 'the host is empty (name the address to bind, 0.0.0.0 for every interface)');
    if (parseIPv4(host) === null) {
      if (/^[0-9.]+$/.test(host) || /^0x/i.test(host))
        throw refuse(source, value, `${JSON.stringify(host)} is not a dotted-quad IPv4 address`);
      if (!isHostName(host)) throw refuse(source, value, `${JSON.stringify(host)} is not a host name or an IP address`);
      host = host.toLowerCase();
    }
  }
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) {
    throw refuse(source, value, `the port ${JSON.stringify(portText)} is not a number from 0 to 65535`);
  }
  return { host, port: Number(portText) };
}

/**
 * Decides where the node surface listens: `--listen` beats `SVC_NODE_LISTEN`, which beats
 * `:svc/node-listen` of `project.edn`, which beats {@link DEFAULT_NODE_LISTEN}.
 * `SVC_NODE_LISTEN=off` returns `'off'` (the node surface of `svc serve` is disabled); the flag
 * and the project file cannot say `off`. Empty values count as unset.
 *
 * @throws {ListenAddressError} for a malformed address, naming where it came from.
 * @example
 * resolveNodeListen({ flag: undefined, env: process.env.SVC_NODE_LISTEN, config: project.config.nodeListen });
 * // { host: '127.0.0.1', port: 9091 } when none is set
 */
export function resolveNodeListen(opts: {
  flag?: string | undefined;
  env?: string | undefined;
  config?: string | null | undefined;
}): { host: string; port: number } | 'off' {
  const { flag, env, config } = opts;
  if (flag !== undefined) {
    if (flag.trim().toLowerCase() === 'off') {
      throw new ListenAddressError(
        `--listen "${flag}" is refused: the flag takes HOST:PORT; to disable the node surface of \`svc serve\` set ${NODE_LISTEN_ENV}=off instead`,
      );
    }
    return parseNodeListenAddress(flag, '--listen');
  }
  if (env !== undefined && env !== '') {
    if (env.trim().toLowerCase() === 'off') return 'off';
    return parseNodeListenAddress(env, NODE_LISTEN_ENV);
  }
  if (config !== undefined && config !== null && config !== '') return parseNodeListenAddress(config, ':svc/node-listen');
  return parseNodeListenAddress(DEFAULT_NODE_LISTEN, 'default node listen address');
}

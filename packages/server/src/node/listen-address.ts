import { DEFAULT_NODE_LISTEN } from '@svc/core/settings';
import { type NetworkListenNames, parseNetworkListenAddress, resolveNetworkListen } from '../http/network-listen.js';

/** Where the node surface listens when neither `--listen`, `SVC_NODE_LISTEN` nor `:svc/node-listen` says otherwise: core's configuration table. */
export { DEFAULT_NODE_LISTEN };

/** The environment variable that overrides the node listen address, or turns the node surface of `svc serve` `off`. */
export const NODE_LISTEN_ENV = 'SVC_NODE_LISTEN';

const NODE_LISTEN_NAMES: NetworkListenNames = Object.freeze({
  flag: '--listen',
  env: NODE_LISTEN_ENV,
  config: ':svc/node-listen',
  default: DEFAULT_NODE_LISTEN,
  offFrom: 'env',
  what: 'the node surface of `svc serve`',
});

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
  return parseNetworkListenAddress(value, source, DEFAULT_NODE_LISTEN);
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
  return resolveNetworkListen(opts, NODE_LISTEN_NAMES);
}

import { ListenAddressError } from '../http/listen-address-error.js';
import { isLoopbackHost } from '../http/network-listen.js';
import { parseNodeListenAddress } from '../node/listen-address.js';

/** The environment variable that sets the metrics listen address, or turns the listener `off`. */
export const METRICS_LISTEN_ENV = 'SVC_METRICS_LISTEN';

/** Whether `host` (as {@link parseNodeListenAddress} returns it) is a loopback address. */
export { isLoopbackHost };

/** A resolved metrics listen address, and whether it came from `project.edn`. */
export interface MetricsListen {
  readonly host: string;
  readonly port: number;
  /** True when the address is not a loopback one (only possible from `:svc/metrics-listen`). */
  readonly exposed: boolean;
}

function parse(value: string, source: string, mayExpose: boolean): MetricsListen {
  const { host, port } = parseNodeListenAddress(value, source);
  const exposed = !isLoopbackHost(host);
  if (exposed && !mayExpose) {
    throw new ListenAddressError(
      `${source} ${JSON.stringify(value)} is refused: the metrics listener binds a loopback address unless :svc/metrics-listen in project.edn names another one; use 127.0.0.1:<port> or [::1]:<port> here, or write the network address into project.edn`,
    );
  }
  return { host, port, exposed };
}

/**
 * Decides where the Prometheus metrics and probes listener listens: `--metrics-listen` beats
 * `SVC_METRICS_LISTEN`, which beats `:svc/metrics-listen` of `project.edn`; with none of them
 * it is `'off'` (the default), as it is with `SVC_METRICS_LISTEN=off`. The flag and the
 * environment only take loopback addresses; a network address (a wildcard included) is only
 * accepted from `project.edn`, where it is configured on purpose, and the caller then logs a
 * warning. Empty values count as unset.
 *
 * @throws {ListenAddressError} for a malformed or refused address, naming where it came from.
 * @example
 * resolveMetricsListen({ flag: undefined, env: process.env.SVC_METRICS_LISTEN, config: project.config.metricsListen });
 * // 'off' when none is set
 */
export function resolveMetricsListen(opts: {
  flag?: string | undefined;
  env?: string | undefined;
  config?: string | null | undefined;
}): MetricsListen | 'off' {
  const { flag, env, config } = opts;
  if (flag !== undefined) {
    if (flag.trim().toLowerCase() === 'off') {
      throw new ListenAddressError(
        `--metrics-listen "${flag}" is refused: the flag takes HOST:PORT; the metrics listener is off unless an address is given (or set ${METRICS_LISTEN_ENV}=off)`,
      );
    }
    return parse(flag, '--metrics-listen', false);
  }
  if (env !== undefined && env !== '') {
    if (env.trim().toLowerCase() === 'off') return 'off';
    return parse(env, METRICS_LISTEN_ENV, false);
  }
  if (config !== undefined && config !== null && config !== '') return parse(config, ':svc/metrics-listen', true);
  return 'off';
}

import { type MetricsListen, resolveAppListen, resolveManagementListen, resolveMetricsListen, resolveNodeListen } from '@svc/server';
import type { Project } from './project.js';

/** A listener of the running service. */
export type ListenerName = 'management' | 'node' | 'application' | 'metrics';

/** An address a listener binds, already checked (`'off'`: the listener is not started). */
export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** The environment variable that chooses each listener's address. */
export const LISTEN_ENV: Readonly<Record<ListenerName, string>> = {
  management: 'SVC_MANAGEMENT_LISTEN',
  node: 'SVC_NODE_LISTEN',
  application: 'SVC_APP_LISTEN',
  metrics: 'SVC_METRICS_LISTEN',
};

/**
 * Where a listener binds: `given` (a `HOST:PORT` an embedding program or a flag chose) beats the
 * listener's environment variable, which beats `project.edn` (`:svc/node-listen`,
 * `:svc/app-listen`, `:svc/metrics-listen`; the management API has none), which beats the
 * default (`127.0.0.1:9090`, `:9091`, `:8080`; metrics off); only the management API's needs no
 * project. A refused address (the management
 * API off loopback, a malformed one, a wildcard where none is allowed) throws an error with code
 * `listen_address_refused` before anything binds.
 *
 * @example
 * resolveListen('node', { given: '127.0.0.1:0', env: process.env, project }); // { host: '127.0.0.1', port: 0 }
 */
export function resolveListen(
  listener: ListenerName,
  opts: { readonly given: string | undefined; readonly env: NodeJS.ProcessEnv; readonly project?: Project | undefined },
): ListenAddress | MetricsListen | 'off' {
  const env = opts.env[LISTEN_ENV[listener]];
  if (listener === 'management') return resolveManagementListen({ flag: opts.given, env });
  if (opts.project === undefined)
    throw new TypeError(`resolveListen: the ${listener} listener's address depends on project.edn; pass the project`);
  const config = opts.project.config;
  switch (listener) {
    case 'node':
      return resolveNodeListen({ flag: opts.given, env, config: config.nodeListen });
    case 'application':
      return resolveAppListen({ flag: opts.given, env, config: config.app.listen });
    case 'metrics':
      return resolveMetricsListen({ flag: opts.given, env, config: config.metricsListen });
  }
}

import { buildManagementApp, instrumentStore, type ServiceMetrics } from '@svc/server';
import { listenOn } from './listen-on.js';
import type { Surface } from './surface.js';

/**
 * The loopback management API as a surface of the foreground service, on an address already
 * checked by `resolveManagementListen` (so nothing non-loopback ever binds).
 *
 * @example
 * const running = await managementSurface({ host: '127.0.0.1', port: 9090 }, { flag: '--listen' }).start(ctx);
 */
export function managementSurface(
  listen: { readonly host: string; readonly port: number },
  opts: { readonly flag?: string | undefined; readonly metrics?: ServiceMetrics | undefined },
): Surface {
  return {
    kind: 'management',
    async start({ deps: base, log, connections }) {
      const metrics = opts.metrics;
      const deps = metrics === undefined ? base : { ...base, store: instrumentStore(base.store, metrics) };
      const app = await buildManagementApp({
        deps,
        logger: log,
        connectionLimits: connections.management,
        ...(metrics === undefined ? {} : { metrics }),
      });
      const url = await listenOn(app, listen, { what: null, flag: opts.flag, env: 'SVC_MANAGEMENT_LISTEN' });
      log.info({ event: 'listening', surface: 'management', url }, 'management API listening');
      return {
        url,
        close: () => app.close(),
      };
    },
  };
}

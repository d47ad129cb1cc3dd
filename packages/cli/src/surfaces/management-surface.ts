import type { AddressInfo } from 'node:net';
import { buildManagementApp, instrumentStore, type ServiceMetrics } from '@svc/server';
import { CliError } from '../cli-error.js';
import type { Surface } from './surface.js';

function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * The loopback management API as a surface of the foreground service, on an address already
 * checked by `resolveManagementListen` (so nothing non-loopback ever binds).
 *
 * @example
 * const running = await managementSurface({ host: '127.0.0.1', port: 9090 }, { flag: '--listen' }).start(ctx);
 */
export function managementSurface(
  listen: { readonly host: string; readonly port: number },
  opts: { readonly flag: string; readonly metrics?: ServiceMetrics | undefined },
): Surface {
  return {
    name: 'management API',
    async start({ deps: base, log }) {
      const metrics = opts.metrics;
      const deps = metrics === undefined ? base : { ...base, store: instrumentStore(base.store, metrics) };
      const app = await buildManagementApp({ deps, logger: log, ...(metrics === undefined ? {} : { metrics }) });
      try {
        await app.listen({ host: listen.host, port: listen.port });
      } catch (error) {
        await app.close().catch(() => undefined);
        const code = (error as NodeJS.ErrnoException).code;
        const why = code === 'EADDRINUSE' ? 'the address is already in use' : (error as Error).message;
        throw new CliError(
          `cannot listen on ${urlHost(listen.host)}:${listen.port}: ${why}; choose another address with ${opts.flag} or SVC_MANAGEMENT_LISTEN`,
          {
            cause: error,
          },
        );
      }
      const address = app.server.address() as AddressInfo;
      const url = `http://${urlHost(listen.host)}:${address.port}`;
      log.info({ event: 'listening', surface: 'management', url }, 'management API listening');
      return {
        readyLine: `svc auth: management API listening on ${url}`,
        close: () => app.close(),
      };
    },
  };
}

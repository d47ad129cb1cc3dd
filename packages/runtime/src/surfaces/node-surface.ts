import { buildNodeApp, type ComponentStatus, ed25519KeyProvider, instrumentStore, isLoopbackHost, type ServiceMetrics } from '@svc/server';
import { addonStatusOf, assertOwnerOnly } from '../control.js';
import { liveNodeIdentity } from '../node-keys.js';
import type { Project } from '../project.js';
import { listenOn } from './listen-on.js';
import type { Surface } from './surface.js';

/**
 * What status reports about the installed components: this `svc`'s version, the store addon as
 * `openControlStore` verified it (or, without a record, its pin with `verified: null`), and the
 * modules of `project.edn` (names only, never their configuration).
 *
 * @example
 * const components = componentStatus(project, store, VERSION);
 */
export function componentStatus(project: Project, store: Parameters<typeof addonStatusOf>[0], version: string): ComponentStatus {
  const addon = addonStatusOf(store);
  const storePackage = project.config.store.package;
  const pin = storePackage === null ? undefined : project.config.packages[storePackage];
  return {
    service: { name: 'svc', version },
    store_addon:
      addon !== undefined
        ? { ...addon }
        : storePackage === null
          ? null
          : {
              package: storePackage,
              version: pin?.version ?? 'unknown',
              sha256: pin?.sha256 ?? null,
              verified: null,
              detail: 'no verification result was recorded when the store was opened',
            },
    modules: Object.values(project.config.modules).map((m) => ({
      alias: m.alias,
      module: m.module,
      package: m.package,
      activate: [...m.activate],
    })),
  };
}

/**
 * The node HTTP surface as a surface of the foreground service: reads the node key (refusing
 * one others can read), builds the app over the open store and listens on an address already
 * checked by {@link nodeListen}. Unlike the management API it may bind a network address; it
 * then warns that tokens travel in clear text unless a TLS proxy fronts it.
 *
 * @example
 * const running = await nodeSurface({ host: '127.0.0.1', port: 9091 }, { version: VERSION, flag: '--listen' }).start(ctx);
 */
export function nodeSurface(
  listen: { readonly host: string; readonly port: number },
  opts: { readonly version: string; readonly flag?: string | undefined; readonly metrics?: ServiceMetrics | undefined },
): Surface {
  return {
    usesProviders: true,
    kind: 'node',
    async start({ project, deps: base, log, providers, auditShipping, connections }) {
      const metrics = opts.metrics;
      const deps = metrics === undefined ? base : { ...base, store: instrumentStore(base.store, metrics) };
      assertOwnerOnly(project.nodeKey, 'the node key');
      // Re-read when `svc node rotate-key` replaces the key: no restart needed.
      const identity = liveNodeIdentity(project.nodeKey, (error) =>
        log.error(
          { err: error, event: 'node.key_reload_failed' },
          'reading the rotated node key failed; still signing with the previous one',
        ),
      );
      const components = componentStatus(project, base.store, opts.version);
      const app = await buildNodeApp({
        deps,
        identity,
        components: () => components,
        providers: [ed25519KeyProvider],
        providerPackages: providers,
        auditShipping,
        logger: log,
        connectionLimits: connections.node,
        ...(metrics === undefined ? {} : { metrics }),
      });
      const url = await listenOn(app, listen, { what: 'the node surface', flag: opts.flag, env: 'SVC_NODE_LISTEN' });
      if (!isLoopbackHost(listen.host)) {
        log.warn(
          { event: 'node_surface_exposed', url },
          'the node surface listens on a network address over plain HTTP: management tokens sent to status, diagnostics and pairing/prepare travel in clear text; put a TLS-terminating proxy in front of it',
        );
      }
      log.info({ event: 'listening', surface: 'node', url, node_id: identity().nodeId }, 'node surface listening');
      return {
        url,
        close: () => app.close(),
      };
    },
  };
}

import { type GatewayAttach, ModuleHostError, moduleHostAttach, startModuleHost, svcIdentityHeaders, upstreamAttach } from '@svc/server';
import { loadAppModules } from '../app-modules.js';
import { gatewayAssertionSigner } from '../assertion-keys.js';
import { assertOwnerOnly, dependenciesDir, ensureNodeIdentity } from '../control.js';
import { RuntimeError } from '../errors.js';
import { liveNodeIdentity } from '../node-keys.js';
import type { SurfaceContext } from './surface.js';

/**
 * What serves the application behind the gateway, and the keys `GET /.svc/jwks.json`
 * publishes. THE HOOK POINT of the application surface: upstream mode (`:svc/app-upstream`,
 * gw-upstream's `upstreamAttach` with gw-assert's `Svc-Assertion` signer) and module mode
 * (`project.edn` modules that activate `:svc/app`, gw-modules' attach) plug in here, and
 * nowhere else in the surface.
 */
export interface AppAttachment {
  /** Absent: every authenticated, non-reserved path answers 404 (no application configured). */
  readonly attach?: GatewayAttach;
  /** Absent: `{"keys":[]}`. */
  readonly jwks?: () => { readonly keys: readonly object[] };
  /** Released when the surface closes (e.g. the assertion key set's follower, the module host). */
  close?(): Promise<void>;
}

/**
 * Decides what the gateway attaches after identity, from the project's configuration.
 *
 * Upstream mode (`:svc/app-upstream`): every request that passed identity is proxied with the
 * `Svc-*` headers and a `Svc-Assertion` signed by the cluster's assertion key set (kept in the
 * control store, created or imported on first start, followed across `svc app rotate-key` made on
 * any node), issued by this node's id; the JWK Set
 * publishes the set's public keys. Module mode: the verified `:svc/app` modules, served by their
 * confined process (`startModuleHost`), which is closed with the surface. Neither: the
 * gateway serves only its own `/.svc/` routes.
 *
 * @example
 * const attachment = await appAttachment(ctx);
 * await buildGatewayApp({ ...options, ...attachment });
 */
export async function appAttachment(ctx: SurfaceContext): Promise<AppAttachment> {
  const { app } = ctx.project.config;
  const routes = app.routes ?? [];
  const first = routes[0];
  if (app.upstream !== null || first !== undefined) {
    // The node id is the assertions' issuer: the same identity key the node surface signs with.
    if (ensureNodeIdentity(ctx.project)) {
      ctx.log.info({ event: 'node.key_created', file: ctx.project.nodeKey }, "created this node's identity key");
    }
    assertOwnerOnly(ctx.project.nodeKey, 'the node key');
    const identity = liveNodeIdentity(ctx.project.nodeKey, (error) =>
      ctx.log.error({ err: error }, 'node key reload failed; the assertions keep the last good issuer'),
    );
    // With routes, every request is signed with its own route's audience and origin (the
    // route's; see svcIdentityHeaders): the signer's own defaults are never used then.
    const signer = await gatewayAssertionSigner(ctx.project, ctx.deps, {
      app: first === undefined ? app : { audience: first.audience, upstream: first.to, publicOrigin: first.origin },
      issuer: () => identity().nodeId,
      log: ctx.log,
    });
    return {
      close: async () => signer.close(),
      attach: upstreamAttach({
        upstream: first === undefined ? new URL(app.upstream as string) : 'routes',
        identityHeaders: svcIdentityHeaders(signer),
        // The plan's upstream connections, shared among the distinct upstreams (one pool each).
        maxConnections: Math.max(1, Math.floor(ctx.connections.upstreamConnections / Math.max(1, new Set(routes.map((r) => r.to)).size))),
      }),
      jwks: () => signer.jwks(),
    };
  }
  // Module mode: every module that activates :svc/app, verified before any of its code runs
  // (config validation already refuses :svc/app-upstream together with :svc/app modules).
  // Their code runs only in the confined module process: no store, no control directory, no keys.
  const modules = await loadAppModules(ctx.project);
  if (modules.length === 0) return {};
  let host: Awaited<ReturnType<typeof startModuleHost>>;
  try {
    host = await startModuleHost({ modules, sharedDependencies: dependenciesDir(), log: ctx.log });
  } catch (error) {
    if (error instanceof ModuleHostError) throw new RuntimeError(`${error.message} (no application module was loaded)`, { cause: error });
    throw error;
  }
  return {
    attach: moduleHostAttach(host, undefined, ctx.connections.upstreamConnections),
    close: () => host.close(),
  };
}

import { requirementNeeds } from '@svc/core';
import type { AppGatewayConfig, AppPathRequirement } from '@svc/core/config';
import { buildManagementApp, ed25519KeyProvider, instrumentStore, type ServiceMetrics } from '@svc/server';
import { reviewExportedCheckpoints } from '../audit-checkpoints.js';
import { verifyProjectAudit } from '../project-operations.js';
import { upstreamProber } from '../upstream-health.js';
import { listenOn } from './listen-on.js';
import { componentStatus } from './node-surface.js';
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
  opts: { readonly flag?: string | undefined; readonly metrics?: ServiceMetrics | undefined; readonly version?: string },
): Surface {
  return {
    kind: 'management',
    async start({ project, deps: base, log, connections, providers, env }) {
      const metrics = opts.metrics;
      const deps = metrics === undefined ? base : { ...base, store: instrumentStore(base.store, metrics) };
      const probeUpstream = upstreamProber();
      const app = await buildManagementApp({
        deps,
        logger: log,
        connectionLimits: connections.management,
        // `GET /v1/auth/audit/checkpoints` and the console's Audit page: the exported checkpoints, each checked.
        auditCheckpoints: (latest) => reviewExportedCheckpoints({ project, deps: base, ...(env === undefined ? {} : { env }) }, latest),
        // The console's Status and Pairing pages: the components and each provider's own health
        // check, run when the page is opened (bounded by the provider host's call timeout).
        console: {
          providers: providers.map((p) => ({ name: p.policy.name, realms: p.policy.realms })),
          status: async () => {
            const c = componentStatus(project, base.store, opts.version ?? 'unknown');
            return {
              service: c.service,
              store_addon: c.store_addon,
              // The applications behind the gateway, each upstream probed (bounded, cached).
              routes: await Promise.all(
                gatewayRoutesOf(project.config.app).map(async (r) => ({ ...r, health: await probeUpstream(r.to) })),
              ),
              providers: [
                {
                  name: ed25519KeyProvider.name,
                  kind: ed25519KeyProvider.kind,
                  health: await ed25519KeyProvider.check().then(
                    () => 'healthy',
                    () => 'down: the Ed25519 self-test failed',
                  ),
                },
                ...(await Promise.all(
                  providers.map(async (p) => ({
                    name: p.policy.name,
                    kind: p.kind,
                    package: p.packageName,
                    version: p.packageVersion,
                    verification: 'verified',
                    health: await p.health().then(
                      (h) => (h.status === 'ok' ? 'healthy' : `${h.status}${h.detail === undefined ? '' : `: ${h.detail}`}`),
                      () => 'down: the health check failed',
                    ),
                  })),
                )),
              ],
            };
          },
          // The whole chain, read from the store and checked link by link (`svc auth audit verify`).
          verifyAudit: async () => {
            const v = await verifyProjectAudit({ project, store: base.store, deps: base, log }, {});
            return v.ok
              ? { ok: true, events: v.events, head: v.head }
              : v.broken === 'chain'
                ? { ok: false, seq: v.seq, problem: v.problem }
                : { ok: false, seq: null, problem: v.failures.join('; ') };
          },
        },
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

/**
 * The applications behind the gateway as the console lists them: each `:svc/app-routes` entry,
 * or the one `:svc/app-upstream` (any host); what each asks beyond being signed in, in words.
 */
function gatewayRoutesOf(app: AppGatewayConfig): { from: string; to: string; public: string[]; requires: string; audience: string }[] {
  const words = (r: AppPathRequirement) => requirementNeeds(r).join(' and ');
  if (app.routes !== undefined) {
    return app.routes.map((r) => ({
      from: r.from,
      to: r.to,
      public: [...r.publicPaths],
      requires: r.requirement === null ? 'signed in' : words(r.requirement),
      audience: r.audience,
    }));
  }
  if (app.upstream === null) return [];
  return [
    {
      from: '* (any host)',
      to: app.upstream,
      public: [...app.publicPaths],
      requires: app.requirements.length === 0 ? 'signed in' : app.requirements.map((r) => `${r.path}: ${words(r)}`).join('; '),
      audience: app.audience ?? app.upstream,
    },
  ];
}

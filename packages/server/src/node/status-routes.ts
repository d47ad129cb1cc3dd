import { clusterIdOf, type NodeStatusJson, rfc3339 } from '@svc/core';
import type { FastifyPluginAsync } from 'fastify';
import { requireManagementPrincipal } from '../http/principal.js';
import { documented, problemResponses } from '../http/problem-schema.js';
import type { StatusRouteOptions } from './route-options.js';
import { NODE_API_VERSION, NODE_PATHS } from './routes.js';
import { MANAGEMENT_BEARER, nodeStatusResponse } from './schemas.js';

/**
 * `GET /edge/0-alpha/status` (management-realm bearer token): the installed components — the
 * service version, the store addon (package, version, pinned digest, verification result), the
 * providers (a provider package with its package, version, signer, verification and realms)
 * and the modules — as the composition root reports them. Configuration values are
 * never included.
 *
 * @example
 * await app.register(statusRoutes, { deps, identity, providers, components: () => componentStatus });
 */
export const statusRoutes: FastifyPluginAsync<StatusRouteOptions> = async (app, { deps, identity, providers, components }) => {
  const schema = documented({
    summary: 'The installed components',
    security: MANAGEMENT_BEARER,
    response: { 200: { description: 'The installed components', ...nodeStatusResponse }, ...problemResponses(401, 503) },
  });
  app.get(NODE_PATHS.status, { onRequest: requireManagementPrincipal(deps), schema }, async () => {
    const c = await components();
    const body: NodeStatusJson = {
      node_id: identity().nodeId,
      cluster_id: clusterIdOf(deps.projectId),
      api_version: NODE_API_VERSION,
      checked_at: rfc3339(deps.clock.now()),
      service: { name: c.service.name, version: c.service.version },
      store_addon: c.store_addon === null ? null : { ...c.store_addon },
      providers: providers.map((p) => ({
        name: p.name,
        kind: p.kind,
        builtin: p.builtin,
        version: p.version,
        // A provider package: what was verified before it was started, and where it may sign in.
        ...(p.package === undefined
          ? {}
          : { package: p.package.name, signer: p.package.signer, verification: 'verified' as const, realms: [...p.package.realms] }),
      })),
      modules: c.modules.map((m) => ({ alias: m.alias, module: m.module, package: m.package, activate: [...m.activate] })),
    };
    return body;
  });
};

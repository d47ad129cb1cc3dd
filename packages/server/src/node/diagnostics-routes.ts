import type { FastifyPluginAsync } from 'fastify';
import { requireManagementPrincipal } from '../management/route-options.js';
import { diagnosticsPayload, signDiagnostics } from './diagnostics.js';
import type { NodeRouteOptions } from './route-options.js';
import { NODE_PATHS } from './routes.js';
import { type DiagnosticsBody, diagnosticsBody } from './schemas.js';

/**
 * `POST /edge/0-alpha/diagnostics` (management-realm bearer token), body
 * `{"nonce": "<8..128 printable ASCII>"}`: aggregate counters of the control store with the
 * caller's nonce, the time and the node id, signed by the node's Ed25519 key over the RFC 8785
 * canonical JSON of the payload. The bearer is checked before the body is parsed.
 *
 * @example
 * await app.register(diagnosticsRoutes, { deps, identity, providers });
 */
export const diagnosticsRoutes: FastifyPluginAsync<NodeRouteOptions> = async (app, { deps, identity }) => {
  app.post<{ Body: DiagnosticsBody }>(
    NODE_PATHS.diagnostics,
    { onRequest: requireManagementPrincipal(deps), schema: { body: diagnosticsBody } },
    async (req) => {
      const now = deps.clock.now();
      const stats = await deps.store.stats(now);
      const payload = diagnosticsPayload(stats, { nodeId: identity.nodeId, projectId: deps.projectId, nonce: req.body.nonce, now });
      return signDiagnostics(identity, payload);
    },
  );
};

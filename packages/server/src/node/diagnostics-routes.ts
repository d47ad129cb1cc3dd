import type { FastifyPluginAsync } from 'fastify';
import { requireManagementPrincipal } from '../http/principal.js';
import { BODY_PROBLEMS, documented, problemResponses } from '../http/problem-schema.js';
import { diagnosticsPayload, signDiagnostics } from './diagnostics.js';
import type { NodeRouteOptions } from './route-options.js';
import { NODE_PATHS } from './routes.js';
import { type DiagnosticsBody, diagnosticsBody, MANAGEMENT_BEARER, signedDiagnosticsResponse } from './schemas.js';

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
    {
      onRequest: requireManagementPrincipal(deps),
      schema: documented({
        summary: 'Aggregate counters signed by the node key over the caller nonce',
        security: MANAGEMENT_BEARER,
        body: diagnosticsBody,
        response: {
          200: { description: 'The payload and the node signature over its RFC 8785 form', ...signedDiagnosticsResponse },
          ...problemResponses(...BODY_PROBLEMS, 401, 503),
        },
      }),
    },
    async (req) => {
      const now = deps.clock.now();
      const stats = await deps.store.stats(now);
      const signer = identity();
      const payload = diagnosticsPayload(stats, { nodeId: signer.nodeId, projectId: deps.projectId, nonce: req.body.nonce, now });
      return signDiagnostics(signer, payload);
    },
  );
};

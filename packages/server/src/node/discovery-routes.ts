import { clusterIdOf, type NodeDiscoveryJson } from '@svc/core';
import type { FastifyPluginAsync } from 'fastify';
import { documented, problemResponses } from '../http/problem-schema.js';
import type { NodeRouteOptions } from './route-options.js';
import { NODE_API_VERSION, NODE_PATHS, NODE_ROUTES } from './routes.js';
import { discoveryResponse } from './schemas.js';

/**
 * `GET /.well-known/edge` (public): who this node is (its id and Ed25519 public key, so a
 * person can compare the id and anyone can verify its signed diagnostics), the keys it signed
 * with before a rotation and when each was valid (so older reports still verify), and exactly the
 * routes it serves, each with how it is authorised, and the names and kinds of its
 * authentication providers as data (the same ones public health names; a provider package
 * adds no route). Nothing else: no version banner, no versions or packages (that is `status`,
 * behind a management token).
 *
 * @example
 * await app.register(discoveryRoutes, { deps, identity, providers });
 */
export const discoveryRoutes: FastifyPluginAsync<NodeRouteOptions> = async (app, { deps, identity, providers }) => {
  app.get(
    NODE_PATHS.discovery,
    {
      schema: documented({
        summary: 'Who this node is, which cluster it serves in, and the routes it serves',
        response: { 200: { description: 'The node id, its public key and its routes', ...discoveryResponse }, ...problemResponses() },
      }),
    },
    async (): Promise<NodeDiscoveryJson> => {
      // Read per request: the key may be rotated while the node runs (`svc node rotate-key`).
      const current = identity();
      return {
        node_id: current.nodeId,
        cluster_id: clusterIdOf(deps.projectId),
        public_key: current.publicKeyHex,
        valid_from: current.validFrom ?? null,
        previous_keys: current.previousKeys ?? [],
        alg: 'Ed25519',
        api_version: NODE_API_VERSION,
        routes: NODE_ROUTES,
        // Data only: a provider package never adds a route here (buildNodeApp checks the routes).
        providers: providers.map((p) => ({ name: p.name, kind: p.kind })),
      };
    },
  );
};

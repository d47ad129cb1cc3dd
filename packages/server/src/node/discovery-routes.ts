import type { RetiredNodeKeyJson } from '@svc/core';
import type { FastifyPluginAsync } from 'fastify';
import { documented, problemResponses } from '../http/problem-schema.js';
import type { NodeRouteOptions } from './route-options.js';
import { NODE_API_VERSION, NODE_PATHS, NODE_ROUTES } from './routes.js';
import { discoveryResponse } from './schemas.js';

/** The answer of `GET /.well-known/edge`. */
export interface DiscoveryJson {
  readonly node_id: string;
  readonly public_key: string;
  /** When the current key became the node key, or null when not known (never rotated). */
  readonly valid_from: string | null;
  /** The keys this node signed with before, newest first, with the window each was valid in. */
  readonly previous_keys: readonly RetiredNodeKeyJson[];
  readonly alg: 'Ed25519';
  readonly api_version: typeof NODE_API_VERSION;
  readonly routes: typeof NODE_ROUTES;
}

/**
 * `GET /.well-known/edge` (public): who this node is (its id and Ed25519 public key, so a
 * person can compare the id and anyone can verify its signed diagnostics), the keys it signed
 * with before a rotation and when each was valid (so older reports still verify), and exactly the
 * routes it serves, each with how it is authorised. Nothing else: no version banner, no
 * component list (that is `status`, behind a management token).
 *
 * @example
 * await app.register(discoveryRoutes, { deps, identity, providers });
 */
export const discoveryRoutes: FastifyPluginAsync<NodeRouteOptions> = async (app, { identity }) => {
  app.get(
    NODE_PATHS.discovery,
    {
      schema: documented({
        summary: 'Who this node is and the routes it serves',
        response: { 200: { description: 'The node id, its public key and its routes', ...discoveryResponse }, ...problemResponses() },
      }),
    },
    async (): Promise<DiscoveryJson> => {
      const current = identity();
      return {
        node_id: current.nodeId,
        public_key: current.publicKeyHex,
        valid_from: current.validFrom ?? null,
        previous_keys: current.previousKeys ?? [],
        alg: 'Ed25519',
        api_version: NODE_API_VERSION,
        routes: NODE_ROUTES,
      };
    },
  );
};

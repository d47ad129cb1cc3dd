import type { FastifyPluginAsync } from 'fastify';
import { documented, problemResponses } from '../http/problem-schema.js';

/** Where the management API serves its OpenAPI document. */
export const OPENAPI_PATH = '/v1/openapi.json';

/** What {@link openApiRoute} receives: the document as JSON text. */
export interface OpenApiRouteOptions {
  readonly document: () => Promise<string>;
}

const openApiResponse = {
  type: 'object',
  description: "The OpenAPI 3.1 document of the management API, the node surface and the gateway's /.svc/ routes",
  required: ['openapi', 'info', 'paths'],
  additionalProperties: true,
  properties: {
    openapi: { type: 'string' },
    info: { type: 'object', additionalProperties: true },
    paths: { type: 'object', additionalProperties: true },
  },
} as const;

/**
 * `GET /v1/openapi.json` on the management API (loopback, behind the DNS-rebinding guard like
 * every management route; no bearer: it describes the API, it holds no data): the OpenAPI 3.1
 * document generated from the route schemas, the same one committed as docs/openapi.json.
 *
 * @example
 * await app.register(openApiRoute, { document: openApiJson });
 */
export const openApiRoute: FastifyPluginAsync<OpenApiRouteOptions> = async (app, { document }) => {
  app.get(
    OPENAPI_PATH,
    { schema: documented({ summary: 'This OpenAPI document', response: { 200: openApiResponse, ...problemResponses(403) } }) },
    async (_req, reply) => reply.type('application/json').send(await document()),
  );
};

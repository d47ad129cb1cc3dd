import type { FastifyInstance } from 'fastify';
import { openApiRoute } from '../openapi/route.js';
import { healthRoutes } from './health-routes.js';
import { operatorRoutes } from './operator-routes.js';
import type { SignInRouteOptions } from './route-options.js';
import { sessionRoutes } from './session-routes.js';
import { signInRoutes } from './sign-in-routes.js';

/** What {@link registerManagementRoutes} needs: the sign-in plugin's options and the OpenAPI document to serve. */
export interface ManagementRoutesOptions extends SignInRouteOptions {
  /** The OpenAPI document as JSON text, for `GET /v1/openapi.json`. */
  readonly openApiJson: () => Promise<string>;
}

/**
 * Registers every route of the management API on `app`: the one list both the running API and
 * the OpenAPI generator use, so the document describes exactly the routes served.
 *
 * @example
 * await registerManagementRoutes(app, { deps, limiter, challenges, openApiJson });
 */
export async function registerManagementRoutes(app: FastifyInstance, opts: ManagementRoutesOptions): Promise<void> {
  const { deps, limiter, challenges } = opts;
  await app.register(healthRoutes, { deps });
  await app.register(signInRoutes, { deps, limiter, challenges });
  await app.register(sessionRoutes, { deps });
  await app.register(operatorRoutes, { deps });
  await app.register(openApiRoute, { document: opts.openApiJson });
}

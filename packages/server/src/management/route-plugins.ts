import type { FastifyInstance } from 'fastify';
import { decoratePrincipal } from '../http/principal.js';
import { sessionRoutes } from '../http/session-routes.js';
import { type SignInRouteOptions, signInRoutes } from '../http/sign-in-routes.js';
import { openApiRoute } from '../openapi/route.js';
import { consoleLinkRoutes } from './console-link-routes.js';
import { enrollRoutes } from './enroll-routes.js';
import { healthRoutes } from './health-routes.js';
import { operatorRoutes } from './operator-routes.js';
import type { AuditCheckpointSource } from './route-options.js';
import { LOOPBACK_GUARD, MANAGEMENT_BEARER } from './schemas.js';
import { scimTokenRoutes } from './scim-token-routes.js';
import { userRoutes } from './user-routes.js';

/** What {@link registerManagementRoutes} needs: the budgets of the sign-in plugin and the OpenAPI document to serve. */
export interface ManagementRoutesOptions extends Pick<SignInRouteOptions, 'deps' | 'limiter' | 'challenges'> {
  /** The OpenAPI document as JSON text, for `GET /v1/openapi.json`. */
  readonly openApiJson: () => Promise<string>;
  /** The exported audit checkpoints, reviewed (`GET /v1/auth/audit/checkpoints`); none exported when absent. */
  readonly auditCheckpoints?: AuditCheckpointSource | undefined;
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
  decoratePrincipal(app);
  await app.register(healthRoutes, { deps });
  // Enrollment and sign-in share one budget of failed proofs.
  await app.register(enrollRoutes, { deps, limiter });
  await app.register(signInRoutes, { prefix: '/v1/auth', realm: 'management', deps, limiter, challenges, guardProblems: [LOOPBACK_GUARD] });
  await app.register(sessionRoutes, {
    prefix: '/v1/auth',
    deps,
    realm: 'management',
    guardProblems: [LOOPBACK_GUARD],
    security: MANAGEMENT_BEARER,
  });
  await app.register(operatorRoutes, { deps, auditCheckpoints: opts.auditCheckpoints });
  await app.register(userRoutes, { deps });
  await app.register(scimTokenRoutes, { deps });
  await app.register(consoleLinkRoutes, { deps });
  await app.register(openApiRoute, { document: opts.openApiJson });
}

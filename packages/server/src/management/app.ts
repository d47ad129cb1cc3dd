import type { AuthDeps } from '@svc/core';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { type ChallengeBudget, createChallengeBudget } from '../http/challenge-budget.js';
import { type ConnectionLimits, installConnectionLimits, MANAGEMENT_CONNECTION_LIMITS } from '../http/connection-limits.js';
import { installDpopNonces } from '../http/dpop-nonce.js';
import { createFailureLimiter, type FailureLimiter } from '../http/failure-limiter.js';
import { hardenSurface } from '../http/harden.js';
import { serverOptions } from '../http/server-options.js';
import { instrumentHttp } from '../metrics/instrument-http.js';
import type { ServiceMetrics } from '../metrics/metrics.js';
import { openApiJson } from '../openapi/document.js';
import { type ConsoleOptions, registerConsole } from './console/console-routes.js';
import type { AuditCheckpointSource } from './route-options.js';
import { registerManagementRoutes } from './route-plugins.js';

/** Options of {@link buildManagementApp}. */
export interface ManagementAppOptions {
  /** Store, clock, randomness, log, project id and settings of the auth module. */
  deps: AuthDeps;
  /** A pino logger (passed to Fastify as `loggerInstance`, behind redaction), or no logging. */
  logger?: FastifyBaseLogger | false;
  /** Where to count and time the requests this surface answers (see {@link instrumentHttp}); none by default. */
  metrics?: ServiceMetrics;
  /** The budget of failed proofs. Default: 30 failures per address unit (or per session, for refresh) per 60 s. */
  limiter?: FailureLimiter;
  /** The budget of unanswered challenges. Default: 100 per source (address unit; on loopback, local account) per 60 s, never per public key. */
  challenges?: ChallengeBudget;
  /** Connection caps of this listener. Default {@link MANAGEMENT_CONNECTION_LIMITS}: 128; smaller under a low descriptor limit (`planConnectionLimits`). */
  connectionLimits?: ConnectionLimits;
  /** What the management console shows beyond the store (the node's status, its providers for link intents). */
  console?: ConsoleOptions;
  /** The exported signed audit checkpoints, reviewed: `GET /v1/auth/audit/checkpoints` and the console's Audit page. None exported when absent. */
  auditCheckpoints?: AuditCheckpointSource;
}

/**
 * Builds the loopback management API: the contract's routes, the operator routes and the
 * OpenAPI document (`GET /v1/openapi.json`), behind
 * the DNS-rebinding guard, JSON-only bodies of at most 64 KiB, problem+json errors,
 * `Cache-Control: no-store` on every response, and a failed-attempt limit on the credential
 * routes. Not listening and not necessarily ready; the caller listens on an address from
 * {@link resolveManagementListen} and closes the app (in-flight requests finish) before
 * closing the store.
 *
 * @example
 * const app = await buildManagementApp({ deps, logger: pino() });
 * await app.listen(resolveManagementListen({ flag: args.listen, env: process.env.SVC_MANAGEMENT_LISTEN }));
 */
export async function buildManagementApp(opts: ManagementAppOptions): Promise<FastifyInstance> {
  const { deps } = opts;
  const app: FastifyInstance = Fastify(serverOptions(opts.logger));
  // The management API is loopback-only: the DNS-rebinding guard runs before any parser.
  hardenSurface(app, { loopbackOnly: true });
  installDpopNonces(app, opts.deps);
  installConnectionLimits(app, opts.connectionLimits ?? MANAGEMENT_CONNECTION_LIMITS);
  if (opts.metrics !== undefined) instrumentHttp(app, opts.metrics, 'management');

  const limiter = opts.limiter ?? createFailureLimiter({ clock: deps.clock, store: deps.store, scope: 'signin' });
  const challenges = opts.challenges ?? createChallengeBudget({ clock: deps.clock });
  await registerManagementRoutes(app, { deps, limiter, challenges, openApiJson, auditCheckpoints: opts.auditCheckpoints });
  // The console's HTML pages are not API routes: outside the OpenAPI document's list.
  await registerConsole(app, deps, {
    ...opts.console,
    ...(opts.auditCheckpoints === undefined ? {} : { auditCheckpoints: opts.auditCheckpoints }),
  });
  return app;
}

import type { Server } from 'node:http';
import type { FastifyBaseLogger, FastifyHttpOptions } from 'fastify';
import { clientErrorHandler, frameworkErrors } from './error-handling.js';
import { BODY_LIMIT } from './json-body.js';
import { requestLogger, safeLogger } from './logging.js';

/**
 * The Fastify factory options every svc surface shares: the 64 KiB body limit, prototype
 * poisoning refused, schema validation that never strips or coerces (an extra or ill-typed
 * field is a 400, not silently fixed), problem+json for framework-level errors, no trusted
 * proxy, short head, idle and keep-alive timeouts, and a logger that cannot log secrets (or none),
 * whose per-request child is made only when the request logs something.
 *
 * `return503OnClosing` is off on purpose: while `app.close()` drains, a request that still
 * arrives on an open keep-alive connection is answered normally (with `Connection: close`)
 * instead of Fastify's bare 503, so every response keeps the contract's headers and body shape.
 *
 * @example
 * const app = Fastify({ ...serverOptions(logger) });
 */
export function serverOptions(logger: FastifyBaseLogger | false | undefined) {
  const base = {
    bodyLimit: BODY_LIMIT,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    return503OnClosing: false,
    trustProxy: false,
    requestIdHeader: false,
    requestTimeout: 30_000,
    // Idle and slow sockets are closed early, so they cannot pile up against the connection
    // caps: the request head must arrive within 10 s of connecting (checked every second), an
    // idle keep-alive connection goes after 5 s, and any socket silent for 30 s is closed.
    http: { headersTimeout: 10_000, connectionsCheckingInterval: 1_000 },
    keepAliveTimeout: 5_000,
    connectionTimeout: 30_000,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } },
    frameworkErrors,
    clientErrorHandler,
  } satisfies FastifyHttpOptions<Server>;
  return logger === undefined || logger === false
    ? { ...base, logger: false as const }
    : { ...base, loggerInstance: safeLogger(logger), childLoggerFactory: requestLogger };
}

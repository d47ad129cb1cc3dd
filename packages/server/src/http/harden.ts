import type { FastifyInstance, FastifyRequest } from 'fastify';
import { installDrainOnClose } from './drain-on-close.js';
import { installErrorHandling } from './error-handling.js';
import { installJsonBodyParser } from './json-body.js';
import { installLoopbackGuard, isLoopbackAddress } from './loopback.js';
import { installPipelineGuard } from './pipelining.js';
import { installSharedSchemas } from './problem-schema.js';
import { trackRoutes } from './route-registry.js';
import { installSecurityHeaders } from './security-headers.js';

/**
 * Installs the shared HTTP hardening of a svc surface on a fresh app, in the order that
 * matters: a request pipelined behind an answer that closed its connection is never run (RFC
 * 9112 §9.6), then security headers (so every later refusal carries them), then, for a
 * loopback-only surface, the DNS-rebinding guard (before any parser or handler; on any other
 * surface, for the requests that arrived on a loopback address), then JSON-only bodies, the
 * problem+json error path, a close that drains in-flight requests without waiting out
 * keep-alive timeouts, the shared schemas the routes refer to (the problem+json body) and the
 * record of the installed routes. Call it before registering routes; build
 * the app with {@link serverOptions}.
 *
 * @example
 * const app = Fastify(serverOptions(logger));
 * hardenSurface(app, { loopbackOnly: true });
 * await app.register(routes, { deps });
 */
export function hardenSurface(
  app: FastifyInstance,
  opts: {
    readonly loopbackOnly: boolean;
    /** On a surface that is not loopback-only: requests the DNS-rebinding guard lets through anyway (those from a trusted reverse proxy, which names the public host). */
    readonly guardExempt?: (req: FastifyRequest) => boolean;
  },
): void {
  installPipelineGuard(app);
  installSecurityHeaders(app);
  // A surface that may bind a network address still gets the DNS-rebinding guard for every
  // request that arrived on a loopback address (bound to 127.0.0.1, or a wildcard reached over
  // loopback): there a hostile page's rebound name is the only way a browser gets in.
  if (opts.loopbackOnly) installLoopbackGuard(app);
  else {
    const exempt = opts.guardExempt;
    installLoopbackGuard(app, {
      when:
        exempt === undefined
          ? (req) => isLoopbackAddress(req.socket.localAddress)
          : (req) => isLoopbackAddress(req.socket.localAddress) && !exempt(req),
    });
  }
  installJsonBodyParser(app);
  installErrorHandling(app);
  installDrainOnClose(app);
  installSharedSchemas(app);
  trackRoutes(app);
}

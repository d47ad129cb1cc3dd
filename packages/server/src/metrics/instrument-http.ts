import type { FastifyInstance } from 'fastify';
import { PROBLEM_CONTENT_TYPE } from '../http/problem.js';
import type { ServiceMetrics } from './metrics.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The error `code` of the problem+json answer to this request, for the metrics; null otherwise. */
    problemCode: string | null;
  }
}

/** The route label of a request that matched no route (a 404): never the raw URL. */
export const UNMATCHED_ROUTE = '(unmatched)';

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * The method label of a request: one of the usual methods, or `OTHER` (labels stay a bounded set).
 *
 * @example
 * methodLabel('PROPFIND'); // 'OTHER'
 */
export function methodLabel(method: string | undefined): string {
  return method !== undefined && KNOWN_METHODS.has(method) ? method : 'OTHER';
}

function codeOf(payload: unknown): string | undefined {
  if (typeof payload !== 'string') return undefined;
  try {
    const code = (JSON.parse(payload) as { code?: unknown }).code;
    return typeof code === 'string' && /^[a-z_]{1,40}$/.test(code) ? code : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Counts and times every request a surface answers, errors and 404s included, labelled by the
 * route PATTERN (`/v1/auth/devices/:id`; `(unmatched)` when no route matched), method and
 * status; a problem+json answer also counts under its error `code`. Call it before the routes
 * are registered.
 *
 * @example
 * instrumentHttp(app, metrics, 'management');
 */
export function instrumentHttp(app: FastifyInstance, metrics: ServiceMetrics, surface: string): void {
  app.decorateRequest('problemCode', null);
  // Fastify's callback hooks: an async one costs every request a promise and a turn of the
  // microtask queue (docs/performance.md, 2026-11-29 at 07:00).
  app.addHook('onSend', (request, reply, payload, done) => {
    const type = reply.getHeader('content-type');
    if (typeof type === 'string' && type.startsWith(PROBLEM_CONTENT_TYPE)) {
      const code = codeOf(payload);
      if (code !== undefined) request.problemCode = code;
    }
    done(null, payload);
  });
  app.addHook('onResponse', (request, reply, done) => {
    metrics.observeRequest({
      surface,
      method: methodLabel(request.method),
      route: request.routeOptions.url ?? UNMATCHED_ROUTE,
      status: reply.statusCode,
      seconds: reply.elapsedTime / 1000,
      code: request.problemCode ?? undefined,
    });
    done();
  });
}

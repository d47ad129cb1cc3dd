import type { FastifyInstance, FastifyReply } from 'fastify';

/**
 * Headers every response carries, errors and 404s included: nothing is cached (responses
 * hold tokens and principals), nothing is sniffed or framed.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'cache-control': 'no-store',
  pragma: 'no-cache',
  'x-content-type-options': 'nosniff',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
});

// Their names and values, listed once: `reply.headers(SECURITY_HEADERS)` took the object's keys
// anew and read each value by a key of the moment on every request (docs/performance.md,
// 2026-11-29 at 16:00).
const NAMES = Object.keys(SECURITY_HEADERS);
const VALUES = NAMES.map((name) => SECURITY_HEADERS[name] as string);

/**
 * Sets {@link SECURITY_HEADERS} on a reply. Idempotent; the error paths call it again because
 * some of them (bad URLs) answer before any hook has run.
 *
 * @example
 * applySecurityHeaders(reply);
 */
export function applySecurityHeaders(reply: FastifyReply): void {
  for (let i = 0; i < NAMES.length; i++) reply.header(NAMES[i] as string, VALUES[i]);
}

/**
 * Adds an `onRequest` hook that sets {@link SECURITY_HEADERS} first thing, so every later
 * refusal (host guard, rate limit, body limit, validation, 404) carries them.
 *
 * @example
 * installSecurityHeaders(app); // before any other onRequest hook
 */
export function installSecurityHeaders(app: FastifyInstance): void {
  app.addHook('onRequest', (_req, reply, done) => {
    applySecurityHeaders(reply);
    done();
  });
}

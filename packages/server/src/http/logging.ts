import type { FastifyBaseLogger, FastifyRequest } from 'fastify';

/**
 * Log paths that could hold a secret, censored even if a caller or a future change logs them:
 * credentials in headers and every token, signature or code in a body.
 */
export const LOG_REDACT_PATHS: readonly string[] = Object.freeze([
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers.cookie',
  'authorization',
  'body.bootstrap_token',
  'body.access_token',
  'body.refresh_token',
  'body.signature',
  'body.pairing_code',
  'body.code',
  '*.bootstrap_token',
  '*.access_token',
  '*.refresh_token',
  '*.signature',
  '*.pairing_code',
  'bootstrap_token',
  'access_token',
  'refresh_token',
  'signature',
  'pairing_code',
]);

/**
 * The request as logged: method, URL and peer, never headers or body. Replaces any
 * serializer of the given logger (pino's standard one logs every header). Under the gateway's
 * reserved `/.svc/` prefix the query is left out: a provider's callback carries an
 * authorization code and state there.
 *
 * @example
 * pino({ serializers: { req: serializeRequest } });
 */
export function serializeRequest(req: FastifyRequest): { method: string; url: string; remoteAddress: string | undefined } {
  const url = req.url;
  // Anything may be logged as `req` (a plain object too): only a string URL is trimmed.
  const q = typeof url === 'string' ? url.indexOf('?') : -1;
  const logged = q >= 0 && url.startsWith('/.svc/') ? `${url.slice(0, q)}?[redacted]` : url;
  return { method: req.method, url: logged, remoteAddress: req.ip };
}

/**
 * A child of `logger` that censors {@link LOG_REDACT_PATHS} and logs requests with
 * {@link serializeRequest}: whatever logger the composition root passes, no token reaches it.
 *
 * @example
 * const app = Fastify({ loggerInstance: safeLogger(pino()) });
 */
export function safeLogger(logger: FastifyBaseLogger): FastifyBaseLogger {
  return logger.child(
    {},
    {
      redact: { paths: [...LOG_REDACT_PATHS], censor: '[redacted]' },
      serializers: { req: serializeRequest as (value: unknown) => unknown },
    },
  );
}

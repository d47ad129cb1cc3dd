import { type Logger, pino } from 'pino';

/**
 * Fields that may carry a secret. Use cases never log tokens; this is the second line of
 * defence should a request, header or body ever reach a log line.
 */
const SECRET_FIELDS = [
  'authorization',
  'cookie',
  'token',
  'access_token',
  'refresh_token',
  'bootstrap_token',
  'bootstrapToken',
  'accessToken',
  'refreshToken',
  'signature',
  'private_key',
  // A DPoP proof (RFC 9449) is single-use and bound to one request, but still a credential.
  'dpop',
];

/** Redaction paths: each secret field at the top level and up to three levels deep. */
export const REDACT_PATHS: readonly string[] = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers.dpop',
  'headers.authorization',
  'request.headers.authorization',
  ...SECRET_FIELDS.flatMap((f) => [f, `*.${f}`, `*.*.${f}`, `*.*.*.${f}`]),
];

/**
 * The structured JSON logger of `svc`: pino on stderr (stdout is the command's output), with
 * authorization headers and every `*token*` or signature field redacted. The level comes from
 * `SVC_LOG_LEVEL`, else `fallback`.
 *
 * @example
 * const log = createLogger({ env: process.env, fallback: 'info' });
 */
export function createLogger(opts: { readonly env: NodeJS.ProcessEnv; readonly fallback: 'info' | 'warn' | 'error' | 'silent' }): Logger {
  const level = opts.env.SVC_LOG_LEVEL !== undefined && opts.env.SVC_LOG_LEVEL !== '' ? opts.env.SVC_LOG_LEVEL : opts.fallback;
  return pino(
    {
      level,
      base: { service: 'svc', pid: process.pid },
      redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.destination({ fd: 2, sync: true }),
  );
}

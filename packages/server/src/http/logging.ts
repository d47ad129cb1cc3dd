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

type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';
type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildLoggerOptions = NonNullable<Parameters<FastifyBaseLogger['child']>[1]>;
/** pino's level check, which a Fastify logger need not have. */
type LevelCheck = { isLevelEnabled?(level: string): boolean };

/**
 * Fastify's logger of one request (`req.log`), made only when that request logs something at an
 * enabled level. Fastify asks for a child logger on every request; with redaction that costs
 * about 2 µs (pino runs the redaction over the child's bindings), a twentieth of a bearer
 * check's CPU, and at the default level most requests log nothing. What is logged is exactly
 * what the child would have logged: the same bindings (the request id), options and redaction.
 */
class RequestLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger;
  readonly #bindings: Bindings;
  readonly #opts: ChildLoggerOptions;
  #made: FastifyBaseLogger | undefined;

  constructor(parent: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#opts = opts;
  }

  #logger(): FastifyBaseLogger {
    this.#made ??= this.#parent.child(this.#bindings, this.#opts);
    return this.#made;
  }

  /** Whether `level` is logged, asked of the parent while there is no child (they share the level). */
  #enabled(level: Level): boolean {
    return this.#made !== undefined || (this.#parent as LevelCheck).isLevelEnabled?.(level) !== false;
  }

  get level(): string {
    return this.#made?.level ?? this.#parent.level;
  }

  set level(level: string) {
    this.#logger().level = level;
  }

  /** Logs `args` at `level` through the child, made now if this is the first line logged. */
  #log(level: Level, args: unknown[]): void {
    if (!this.#enabled(level)) return;
    const logger = this.#logger();
    (logger[level] as (...a: unknown[]) => void).apply(logger, args);
  }

  trace(...args: unknown[]): void {
    this.#log('trace', args);
  }
  debug(...args: unknown[]): void {
    this.#log('debug', args);
  }
  info(...args: unknown[]): void {
    this.#log('info', args);
  }
  warn(...args: unknown[]): void {
    this.#log('warn', args);
  }
  error(...args: unknown[]): void {
    this.#log('error', args);
  }
  fatal(...args: unknown[]): void {
    this.#log('fatal', args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger().child(bindings, options);
  }
}

/**
 * Fastify's `childLoggerFactory` for every svc surface: a {@link RequestLogger} per request, or
 * the plain child where a route sets its own level (the level is then the child's, not the
 * parent's, so nothing can be asked of the parent).
 *
 * @example
 * const app = Fastify({ loggerInstance: safeLogger(logger), childLoggerFactory: requestLogger });
 */
export function requestLogger(logger: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions): FastifyBaseLogger {
  return opts.level === undefined ? new RequestLogger(logger, bindings, opts) : logger.child(bindings, opts);
}

import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { AuthError, type ErrorCode } from '@svc/core';
import { formatLimit, MAX_REQUEST_BODY_BYTES } from '@svc/core/settings';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bearerChallenge } from './bearer.js';
import { afterPendingAnswers, answerPending, answerUnderWay } from './pipelining.js';
import { internalError, PROBLEM_CONTENT_TYPE, problemJson, sendProblem } from './problem.js';
import { applySecurityHeaders, SECURITY_HEADERS } from './security-headers.js';

/** Fastify's own refusals, by their code, and what the contract calls them. */
const FASTIFY_ERRORS: Readonly<Record<string, readonly [ErrorCode, string]>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: ['payload_too_large', `the request body is over ${formatLimit(MAX_REQUEST_BODY_BYTES, 'bytes')}`],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ['unsupported_media_type', 'bodies must be application/json'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ['invalid_request', 'the Content-Length does not match the body'],
  FST_ERR_CTP_INVALID_JSON_BODY: ['invalid_request', 'the body is not valid JSON, or it has a __proto__ or constructor.prototype key'],
  FST_ERR_CTP_EMPTY_JSON_BODY: ['invalid_request', 'the body is empty but declared as application/json'],
  FST_ERR_BAD_URL: ['invalid_request', 'the URL is malformed'],
};

/** Codes for other 4xx statuses Fastify or Node may attach to an error. */
const CODE_BY_STATUS: Readonly<Record<number, ErrorCode>> = {
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
};

function isFastifyError(err: unknown): err is FastifyError {
  return err instanceof Error && typeof (err as { code?: unknown }).code === 'string';
}

/**
 * Maps anything a request can throw to an {@link AuthError}: an AuthError as it is; Fastify's
 * refusals of bad input (body too large, wrong media type, malformed JSON, schema validation)
 * to their contract code; any other 4xx to `invalid_request`; everything else, a bug or an
 * outage, to `500 internal_error`. Bad input never becomes a 5xx.
 *
 * @example
 * toAuthError(new SyntaxError('x')).code; // 'internal_error'
 */
export function toAuthError(err: unknown): AuthError {
  if (err instanceof AuthError) return err;
  if (isFastifyError(err)) {
    if (err.validation !== undefined) return new AuthError('invalid_request', err.message, { cause: err });
    const known = FASTIFY_ERRORS[err.code];
    if (known !== undefined) return new AuthError(known[0], known[1], { cause: err });
  }
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new AuthError(CODE_BY_STATUS[status] ?? 'invalid_request', 'the request was refused', { cause: err });
  }
  return internalError(err);
}

/** A surface's pages for refusals: the reply sent as a page, or null for problem+json. */
export type HtmlRefusal = (req: FastifyRequest, reply: FastifyReply, err: AuthError) => FastifyReply | null;

const htmlRefusals = new WeakMap<object, HtmlRefusal>();

/**
 * Lets a surface answer its refusals as pages to the clients that want one (the gateway's
 * browsers): `page` is asked first, on the one error path, and answers null for every other
 * client, which keeps problem+json.
 *
 * @example
 * setHtmlRefusals(app, gatewayRefusalPage({ brand, providers }));
 */
export function setHtmlRefusals(app: FastifyInstance, page: HtmlRefusal): void {
  htmlRefusals.set(app.server, page);
}

/** Sends `err` as problem+json with the security headers and, for a bearer refusal, `WWW-Authenticate`. */
function reject(req: FastifyRequest, reply: FastifyReply, err: AuthError): FastifyReply {
  applySecurityHeaders(reply);
  if (err.code === 'invalid_token' && err.realm !== undefined) {
    reply.header('www-authenticate', bearerChallenge(err.realm, req.headers.authorization !== undefined));
  }
  const page = htmlRefusals.get(req.server.server);
  const sent = page === undefined ? null : page(req, reply, err);
  return sent ?? sendProblem(reply, err);
}

/** A route pattern, as a matcher for concrete paths, with its methods. */
interface KnownPath {
  readonly pattern: RegExp;
  readonly methods: Set<string>;
}

function patternOf(url: string): RegExp {
  const escaped = url
    .split('/')
    .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${escaped}$`);
}

/**
 * Installs the one error path of a surface: every refusal is `application/problem+json`
 * with the contract's `code`, the security headers and, for bearer refusals,
 * `WWW-Authenticate`; anything unexpected is a generic 500 whose detail goes only to the log.
 * Must be called before the routes are registered (it learns their paths).
 *
 * An unknown path is `404 not_found`. A known path with another method is
 * `405 method_not_allowed` with an `Allow` header: `/v1/auth/sessions` is both GET (operator
 * listing) and POST (sign-in), and telling a client it used the wrong method beats a 404 that
 * suggests a wrong URL.
 *
 * @example
 * installErrorHandling(app);
 * await app.register(routes);
 */
export function installErrorHandling(app: FastifyInstance): void {
  const known = new Map<string, KnownPath>();
  app.addHook('onRoute', (route) => {
    let entry = known.get(route.url);
    if (entry === undefined) {
      entry = { pattern: patternOf(route.url), methods: new Set() };
      known.set(route.url, entry);
    }
    for (const m of Array.isArray(route.method) ? route.method : [route.method]) entry.methods.add(String(m).toUpperCase());
  });

  app.setErrorHandler((err, req, reply) => {
    const authError = toAuthError(err);
    if (authError.status >= 500) {
      req.log.error({ err }, 'request failed');
    } else {
      req.log.info({ code: authError.code, status: authError.status }, 'request refused');
    }
    return reject(req, reply, authError);
  });

  /** The methods of the known path `url` matches, as an `Allow` value, or null for an unknown path. */
  const allowedAt = (url: string): string | null => {
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    for (const entry of known.values()) {
      if (entry.pattern.test(path)) return [...entry.methods].sort().join(', ');
    }
    return null;
  };

  app.setNotFoundHandler((req, reply) => {
    const allow = allowedAt(req.url);
    if (allow !== null) {
      reply.header('allow', allow);
      return reject(req, reply, new AuthError('method_not_allowed', `${req.method} is not allowed here; use ${allow}`));
    }
    return reject(req, reply, new AuthError('not_found', 'no such route'));
  });

  // Node hands a CONNECT request to the server's 'connect' event, never to the request handler,
  // and destroys the socket when nobody listens: the client got its connection closed with no
  // answer. No route is a tunnel, so it is refused exactly like another method the path lacks.
  app.server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    const allow = allowedAt(req.url ?? '');
    const err =
      allow === null
        ? new AuthError('not_found', 'no such route')
        : new AuthError('method_not_allowed', `CONNECT is not allowed here; use ${allow}`);
    writeRawProblem(socket, err, allow === null ? {} : { allow });
  });
}

/** Sockets whose refusal waits for the answers before it ({@link writeRawProblem}). */
const refusing = new WeakSet<Duplex>();

/** How long an error answer may take to reach the kernel before its socket is reset anyway. */
export const ERROR_ANSWER_LINGER_MS = 1_000;

/**
 * Answers `err` as problem+json with the security headers straight onto `socket` (a request
 * Fastify never sees: a CONNECT, an upgrade, a refused raw request), then closes it: destroyed
 * as soon as the answer is handed to the kernel (the kernel still delivers it, then closes),
 * and at most {@link ERROR_ANSWER_LINGER_MS} later. Only ending it would leave the socket
 * half-closed, holding a descriptor and a slot of the listener's connection cap for as long as
 * a client that never reads (or reads nothing and keeps sending) cares to hold it.
 *
 * @example
 * writeRawProblem(socket, new AuthError('invalid_request', 'the request is not valid HTTP'));
 */
export function writeRawProblem(socket: Duplex, err: AuthError, extra: Readonly<Record<string, string>> = {}): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  if (answerPending(socket)) {
    // The answer to an earlier request on this connection is still to come: written now, the
    // problem would be read as that request's answer (saying it was refused, when it ran). It
    // goes after it; once one is refused, a later refusal (more bytes of a broken stream) adds
    // nothing.
    if (refusing.has(socket)) return;
    refusing.add(socket);
    afterPendingAnswers(socket, () => writeRawProblem(socket, err, extra));
    return;
  }
  socket.on('error', () => socket.destroy());
  const linger = setTimeout(() => socket.destroy(), ERROR_ANSWER_LINGER_MS);
  linger.unref();
  socket.once('close', () => clearTimeout(linger));
  const problem = problemJson(err);
  const body = JSON.stringify(problem);
  const headers = Object.entries({ ...SECURITY_HEADERS, ...err.headers, ...extra })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${problem.status} ${problem.title}\r\nconnection: close\r\ncontent-type: ${PROBLEM_CONTENT_TYPE}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${headers}\r\n${body}`,
    () => socket.destroy(),
  );
}

/**
 * Fastify's `frameworkErrors` option: malformed URLs are refused before any hook runs, so
 * they get the security headers and problem+json here.
 *
 * @example
 * Fastify({ frameworkErrors });
 */
export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  reject(req, reply, toAuthError(err));
}

/**
 * Fastify's `clientErrorHandler` option: a request Node could not even parse (or whose head
 * did not arrive in time) gets a problem+json 400 with the security headers, then the
 * connection is reset ({@link writeRawProblem}), after the answers to the requests before it on
 * the connection; while one of them is already being written, it is cut without one.
 *
 * @example
 * Fastify({ clientErrorHandler });
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  // A response already under way on this socket (a pipelined head that broke or timed out
  // while it streams): a problem written now would land inside its body. Cut the connection,
  // as Node's own handler does. An answer still to come goes first ({@link writeRawProblem}).
  if (answerUnderWay(socket)) {
    socket.destroy();
    return;
  }
  writeRawProblem(socket, new AuthError('invalid_request', 'the request is not valid HTTP'));
}

import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { Transform } from 'node:stream';
import httpProxy from '@fastify/http-proxy';
import {
  AuthError,
  connectionNamedHeaders,
  type Principal,
  relaysRequestHeader,
  relaysResponseHeader,
  upstreamHeaderName,
} from '@svc/core';
import { formatLimit } from '@svc/core/settings';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DEFAULT_UPSTREAM_CONNECTIONS } from '../http/connection-limits.js';
import type { GatewayAttach, UpstreamAttachOptions } from './options.js';
import { routeOf } from './routing.js';
import { installWebSocketRelay } from './upstream-websocket.js';

/** How long the gateway waits on its upstream before answering `504 upstream_timeout`. */
export interface UpstreamTimeouts {
  /** To open the TCP (and TLS) connection. */
  readonly connectMs: number;
  /** From the request sent to the response head. */
  readonly responseMs: number;
  /** Between two chunks of the response body once it streams (the head is already sent: the connection is cut). */
  readonly idleMs: number;
}

/** The defaults: 5 s to connect, 30 s to the response head, 30 s idle in a body. */
export const DEFAULT_UPSTREAM_TIMEOUTS: UpstreamTimeouts = Object.freeze({ connectMs: 5_000, responseMs: 30_000, idleMs: 30_000 });

/** How much longer than the upstream's own deadline the caller's socket may stay silent, so the 504 is written before it is cut. */
const ANSWER_MARGIN_MS = 5_000;

/**
 * How long the caller's socket may stay silent while its request is proxied: longer than the
 * gateway waits on the upstream (connect, then the response head; or a gap in the body), so
 * the caller gets `504 upstream_timeout` rather than the listener's own idle cut (30 s, the
 * same as the default response timeout, which reset every caller at 30.0 s). A caller that
 * never reads is still cut after it: no write completes, so the socket stays silent.
 *
 * @example
 * proxiedSocketTimeout(DEFAULT_UPSTREAM_TIMEOUTS); // 40_000
 */
export function proxiedSocketTimeout(timeouts: UpstreamTimeouts): number {
  return Math.max(timeouts.connectMs + timeouts.responseMs, timeouts.idleMs) + ANSWER_MARGIN_MS;
}

/**
 * The methods the gateway proxies: every method Fastify routes but `TRACE`, which would echo the
 * request as the upstream received it (its `Svc-Assertion` included) back to the caller, who
 * could then replay the assertion straight to the upstream. `CONNECT` never reaches the router.
 */
export const PROXIED_METHODS: readonly string[] = Object.freeze(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'QUERY']);

/**
 * The request headers the upstream receives: the inbound ones core's {@link relaysRequestHeader}
 * lets through (no hop-by-hop header, none the inbound `Connection` names, no forwarding claim,
 * no `Expect`, nothing of an identity header's name); then `X-Forwarded-For`, `-Proto`
 * and `-Host` made fresh from what Fastify believes (`trustProxy` decides); then the identity
 * headers, last, so nothing of their names survives from the caller. `base` already has the
 * upstream's `Host`, and `Connection` was taken out with what it named. With `dropLength`,
 * `Content-Length` goes too (a body that is not relayed).
 *
 * @example
 * upstreamRequestHeaders(req, req.headers, { 'svc-subject': 'sub_1' });
 */
export function upstreamRequestHeaders(
  req: FastifyRequest,
  base: IncomingHttpHeaders,
  identityHeaders: Readonly<Record<string, string>>,
  dropLength = false,
): IncomingHttpHeaders {
  const named = connectionNamedHeaders(req.raw.headers.connection);
  const identityNames = Object.keys(identityHeaders);
  const identity = new Set<string>();
  for (const name of identityNames) identity.add(upstreamHeaderName(name));
  const out: IncomingHttpHeaders = {};
  for (const name of Object.keys(base)) {
    if (dropLength && name === 'content-length') continue;
    if (relaysRequestHeader(name, named, identity)) out[name] = base[name];
  }
  out['x-forwarded-for'] = req.ip;
  out['x-forwarded-proto'] = req.protocol;
  if (req.host !== '') out['x-forwarded-host'] = req.host;
  for (const name of identityNames) out[name.toLowerCase()] = identityHeaders[name];
  return out;
}

/**
 * The response headers the caller receives: the upstream's, without hop-by-hop headers and
 * those the upstream's `Connection` names (core's {@link relaysResponseHeader}).
 *
 * @example
 * upstreamResponseHeaders({ connection: 'close, x-secret', 'x-secret': '1', 'content-type': 'text/plain' });
 * // { 'content-type': 'text/plain' }
 */
export function upstreamResponseHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const named = connectionNamedHeaders(headers.connection);
  const out: IncomingHttpHeaders = {};
  for (const name of Object.keys(headers)) {
    if (relaysResponseHeader(name, named)) out[name] = headers[name];
  }
  return out;
}

/** The error codes of undici (and Node) that mean the upstream took too long. */
const TIMEOUT_CODES = new Set([
  'FST_REPLY_FROM_TIMEOUT',
  'FST_REPLY_FROM_GATEWAY_TIMEOUT',
  'FST_REPLY_FROM_HTTP_REQUEST_TIMEOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);

/**
 * What a failed proxied request becomes: `504 upstream_timeout` when the upstream did not
 * connect or answer in time, `502 upstream_unavailable` for everything else (refused, reset,
 * closed, not HTTP). The cause stays on the error for the log, never in the answer.
 *
 * @example
 * upstreamError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })).code; // 'upstream_unavailable'
 */
export function upstreamError(err: Error): AuthError {
  const codes = [(err as { code?: unknown }).code, (err.cause as { code?: unknown } | undefined)?.code];
  if (codes.some((c) => typeof c === 'string' && TIMEOUT_CODES.has(c))) {
    return new AuthError('upstream_timeout', 'the application did not answer in time', { cause: err });
  }
  return new AuthError('upstream_unavailable', 'the application could not be reached', { cause: err });
}

/** The principal the gateway settled (read-only on the request), or null on a public path. */
function principalOf(req: FastifyRequest): Principal | null {
  return (req as FastifyRequest & { principal?: Principal | null }).principal ?? null;
}

const IDENTITY = Symbol('svc.upstreamIdentity');
/** Set on a request whose relayed body went past `bodyLimit`. */
const TOO_LARGE = Symbol('svc.upstreamBodyTooLarge');
type WithIdentity = FastifyRequest & { [IDENTITY]?: Readonly<Record<string, string>>; [TOO_LARGE]?: boolean };

/** `413 payload_too_large` for a body over `limit` bytes. */
function bodyTooLarge(limit: number): AuthError {
  return new AuthError('payload_too_large', `the request body is over ${formatLimit(limit, 'bytes')}`);
}

/**
 * Upstream mode of the application gateway (`:svc/app-upstream`): every request that gets past
 * the gateway's strip and authenticate steps is proxied to `opts.upstream`, any method but
 * `TRACE` (refused 405), any path and content type, with bodies streamed both ways (nothing is
 * buffered or parsed: a catch-all content-type parser hands the raw stream on). Websockets are
 * relayed only once the gateway settled the upgrade's identity (it refuses an unauthenticated
 * upgrade before any `upgrade` listener sees it; see {@link installWebSocketRelay}). Hop-by-hop
 * headers (RFC 9110 §7.6.1) are dropped both ways; `X-Forwarded-For`/`-Proto`/`-Host` are set
 * fresh from `req.ip`, `req.protocol` and `req.host` (inbound `X-Forwarded-*`, `Forwarded` and
 * `X-Real-IP` are never relayed); `opts.identityHeaders(req, req.principal)` are set last, on
 * plain requests and on the upstream's websocket handshake alike. The response carries the
 * upstream's status, headers (less hop-by-hop ones) and body; nothing is retried. An unreachable
 * upstream is `502 upstream_unavailable`, a slow one `504 upstream_timeout` (problem+json).
 *
 * Built on `@fastify/http-proxy` (reply-from on undici) for HTTP and `ws` for websockets.
 *
 * @example
 * const attach = upstreamAttach({ upstream: new URL('http://127.0.0.1:3000'), identityHeaders: (_req, p) => (p ? { 'svc-subject': p.subject } : {}) });
 * await buildGatewayApp({ deps, policy, trustedProxies: [], attach });
 */
export function upstreamAttach(opts: UpstreamAttachOptions, timeouts: UpstreamTimeouts = DEFAULT_UPSTREAM_TIMEOUTS): GatewayAttach {
  const fixed = opts.upstream === 'routes' ? null : opts.upstream;
  if (fixed !== null && fixed.protocol !== 'http:' && fixed.protocol !== 'https:') {
    throw new TypeError(`the upstream must be an http:// or https:// origin, not ${fixed.protocol}`);
  }
  if (fixed === null && opts.socketPath !== undefined) throw new TypeError('routes go to their :to origins, never to a socket');
  // With routes, the upstream of each request is its route's `:to` (matched by the identity
  // step; a request without one never got this far, but is refused here too, never guessed).
  const routeUpstream = (req: IncomingMessage): string => {
    const route = routeOf(req);
    if (route === undefined) throw new AuthError('not_found', 'no application is served at this address');
    return route.to;
  };
  /** The identity headers of `req`, computed (and signed) once, whichever way the request goes on. */
  const identityOf = (req: FastifyRequest): Readonly<Record<string, string>> => {
    const r = req as WithIdentity;
    r[IDENTITY] ??= opts.identityHeaders(req, principalOf(req));
    return r[IDENTITY];
  };

  return async (app: FastifyInstance) => {
    // Its own encapsulated context, whatever context the gateway hands over: the parsers and
    // routes below never leak into the gateway's own routes.
    await app.register(async (proxy) => {
      // Bodies are relayed, never parsed: the gateway's JSON-only parser (and its 64 KiB
      // limit) stays on the gateway's own routes. No parseAs: Fastify hands the raw stream on.
      const socketTimeout = proxiedSocketTimeout(timeouts);
      const bodyLimit = opts.bodyLimit;
      proxy.addHook('onRequest', (req, reply, done) => {
        // Node sets the listener's own idle timeout again at the connection's next request.
        req.raw.socket.setTimeout(socketTimeout);
        if (bodyLimit !== undefined && Number(req.headers['content-length']) > bodyLimit) {
          // The unread rest of the body may still be on its way: the connection ends with this answer.
          reply.header('connection', 'close');
          done(bodyTooLarge(bodyLimit));
          return;
        }
        done();
      });
      proxy.removeAllContentTypeParsers();
      proxy.addContentTypeParser('*', (req, payload, done) => {
        // A body with `Content-Length` was judged by it already (Node's parser holds it to that
        // length). One sent without (chunked) is counted as it is relayed: the byte past the
        // limit is never sent, the upload fails, and `onError` answers 413 for it.
        if (bodyLimit === undefined || req.headers['content-length'] !== undefined) {
          done(null, payload);
          return;
        }
        let relayed = 0;
        const counted = new Transform({
          transform(chunk: Buffer, _encoding, next) {
            relayed += chunk.length;
            if (relayed <= bodyLimit) {
              next(null, chunk);
              return;
            }
            (req as WithIdentity)[TOO_LARGE] = true;
            next(new Error('the request body is over the limit'));
          },
        });
        payload.pipe(counted);
        done(null, counted);
      });

      for (const url of ['/', '/*']) {
        proxy.route({
          method: 'TRACE',
          url,
          handler: async (_req, reply) => {
            reply.header('allow', PROXIED_METHODS.join(', '));
            throw new AuthError('method_not_allowed', 'TRACE is not proxied: it would echo the identity headers back');
          },
        });
      }

      await proxy.register(httpProxy, {
        // One upstream: its own pool. Routes: reply-from's undici Agent, one pool per upstream origin.
        upstream: fixed === null ? '' : fixed.origin,
        httpMethods: [...PROXIED_METHODS],
        proxyPayloads: false,
        internalRewriteLocationHeader: false,
        disableRequestLogging: true,
        undici: {
          // Bounded, so proxied requests can never hold more descriptors than the plan gave them.
          connections: opts.maxConnections ?? DEFAULT_UPSTREAM_CONNECTIONS,
          connect: { timeout: timeouts.connectMs },
          headersTimeout: timeouts.responseMs,
          bodyTimeout: timeouts.idleMs,
          ...(opts.socketPath === undefined ? {} : { socketPath: opts.socketPath }),
        },
        // A gateway relays; it never replays a request (an upstream's 503 included).
        replyOptions: {
          // reply-from types the request for any server; the gateway's is Node's http(s) one.
          ...(fixed === null ? { getUpstream: (req: { raw: unknown }) => routeUpstream(req.raw as IncomingMessage) } : {}),
          retryDelay: () => null,
          rewriteRequestHeaders: (generic, headers) => {
            // reply-from types the request for any server; the gateway's is Node's http(s) one.
            const req = generic as unknown as FastifyRequest;
            // The `Content-Length` of a body that is not relayed (Fastify leaves a `GET` or `HEAD`
            // body unread) would announce bytes that never come: it goes, so the upstream sees no body.
            return upstreamRequestHeaders(
              req,
              headers as IncomingHttpHeaders,
              identityOf(req),
              req.body === undefined || req.body === null,
            );
          },
          rewriteHeaders: (headers) => upstreamResponseHeaders(headers as IncomingHttpHeaders),
          onError: (reply, { error }) => {
            if ((reply.request as WithIdentity)[TOO_LARGE] === true) {
              // The rest of the body may still be on its way: the connection ends with this answer.
              reply.header('connection', 'close');
              reply.send(bodyTooLarge(bodyLimit as number));
              return;
            }
            const failure = upstreamError(error);
            reply.send(failure);
            opts.onFailure?.(failure);
          },
        },
      });
      // Websockets: the gateway settles identity for an upgrade before any `upgrade` listener
      // runs; the relay proxies only those (http-proxy's own websocket support routes the
      // upgrade through Fastify a second time, after the bearer is already removed).
      installWebSocketRelay(proxy, {
        upstream: fixed ?? ((req) => new URL(routeUpstream(req))),
        ...(opts.socketPath === undefined ? {} : { socketPath: opts.socketPath }),
        handshakeMs: timeouts.connectMs + timeouts.responseMs,
        headers: (req, principal) => websocketHeaders(req, opts.identityHeaders(req, principal)),
      });
    });
  };
}

/** The WebSocket handshake's own headers, which the ws client makes anew for the upstream. */
const HANDSHAKE = new Set(['host', 'sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions', 'sec-websocket-protocol']);

/** The headers of the upstream's websocket handshake: the inbound ones, treated like a plain request's, less the handshake's own. */
function websocketHeaders(req: FastifyRequest, identity: Readonly<Record<string, string>>): IncomingHttpHeaders {
  const base: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (!HANDSHAKE.has(upstreamHeaderName(name))) base[name] = value;
  }
  const out = upstreamRequestHeaders(req, base, identity);
  delete out['content-length'];
  return out;
}

import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { AuthError, type Principal } from '@svc/core';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { type RawData, WebSocket, WebSocketServer } from 'ws';
import { writeRawProblem } from '../http/error-handling.js';
import { internalError } from '../http/problem.js';
import { upgradePrincipal } from './app.js';
import { onUpgradeSessionEnd } from './session-watch.js';

/** What the websocket relay needs from the upstream attach. */
export interface WebSocketRelayOptions {
  /**
   * The upstream's origin (`http:` or `https:`); websockets go to its `ws:`/`wss:` twin. A
   * function: the upstream of each upgrade (its route's `:to`); one that throws refuses it.
   */
  readonly upstream: URL | ((req: IncomingMessage) => URL);
  /** A unix socket to connect to instead of the upstream's host and port (module mode). */
  readonly socketPath?: string;
  /** Connect and handshake with the upstream within this many ms, or `504 upstream_timeout`. */
  readonly handshakeMs: number;
  /** The headers of the upstream's handshake for an upgrade whose identity the gateway settled. */
  readonly headers: (req: FastifyRequest, principal: Principal | null) => IncomingHttpHeaders;
}

/**
 * A view of a raw `upgrade` request as a Fastify request of `app`: Fastify never routes an
 * upgrade, but the identity headers (and `Svc-Assertion`'s request binding) read `req.ip`,
 * `req.protocol` and `req.host`, which must mean what they mean on every other request (the
 * gateway's `trustProxy`). The getters of `app`'s own request class give exactly that; if this
 * Fastify keeps it elsewhere, the view falls back to the TCP peer, the socket's scheme and the
 * `Host` header (believing no proxy, never more than Fastify would).
 */
function requestView(app: FastifyInstance, raw: IncomingMessage): FastifyRequest {
  for (let o: object | null = app; o !== null; o = Object.getPrototypeOf(o)) {
    const key = Object.getOwnPropertySymbols(o).find((s) => s.description === 'fastify.Request');
    const Request = key === undefined ? undefined : (o as Record<symbol, unknown>)[key];
    if (typeof Request === 'function') {
      const view = Object.create(Request.prototype as object) as FastifyRequest;
      Object.defineProperty(view, 'raw', { value: raw });
      return view;
    }
  }
  const encrypted = (raw.socket as { encrypted?: boolean }).encrypted === true;
  return {
    raw,
    method: raw.method ?? 'GET',
    url: raw.url ?? '/',
    headers: raw.headers,
    socket: raw.socket,
    ip: raw.socket.remoteAddress ?? '',
    protocol: encrypted ? 'https' : 'http',
    host: raw.headers.host ?? '',
  } as unknown as FastifyRequest;
}

/** Whether `code` may be sent in a close frame (RFC 6455 §7.4). */
function sendableCloseCode(code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

/** Closes `ws` with the code and reason the other side closed with, when they can be sent on. */
function closeWith(ws: WebSocket, code: number, reason: Buffer): void {
  if (ws.readyState === WebSocket.CLOSED || ws.readyState === WebSocket.CLOSING) return;
  if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
  else if (sendableCloseCode(code)) ws.close(code, reason);
  else ws.close();
}

/**
 * Relays websockets to the upstream, as an `upgrade` listener on the gateway's server. The
 * gateway settles identity for an upgrade before any `upgrade` listener sees it (an
 * unauthenticated one is refused `401` and never gets here); this relay proxies only upgrades
 * that went through that step ({@link upgradePrincipal}), and destroys any other. It opens the
 * upstream's websocket first, with the handshake headers `opts.headers` gives and the
 * subprotocols the caller offered, and completes the caller's handshake only once the upstream
 * accepted (with the subprotocol the upstream chose): an upstream that refuses, is down or is
 * slow is an HTTP `502 upstream_unavailable` / `504 upstream_timeout` to the caller, like any
 * other request. Messages are relayed both ways as they are (text or binary), closes with
 * their code and reason. When the gateway sees the session that opened the websocket end
 * ({@link onUpgradeSessionEnd}), relaying stops and both sides are closed with 1008.
 *
 * @example
 * installWebSocketRelay(app, { upstream: new URL('http://127.0.0.1:3000'), handshakeMs: 35_000, headers });
 */
export function installWebSocketRelay(app: FastifyInstance, opts: WebSocketRelayOptions): void {
  const wsOrigin = (upstream: URL): URL => {
    const origin = new URL(upstream.origin);
    origin.protocol = origin.protocol === 'https:' ? 'wss:' : 'ws:';
    return origin;
  };
  const fixedOrigin = typeof opts.upstream === 'function' ? null : wsOrigin(opts.upstream);
  const upstreamOf = opts.upstream;
  const chosen = new WeakMap<IncomingMessage, string>();
  const accepting = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    handleProtocols: (_offered, req) => chosen.get(req) ?? false,
  });
  const open = new Set<WebSocket>();

  app.server.on('upgrade', (raw: IncomingMessage, socket: Duplex, head: Buffer) => {
    let principal: Principal | null;
    try {
      principal = upgradePrincipal(raw);
    } catch {
      // Not through the gateway's identity step: never proxied.
      socket.destroy();
      return;
    }
    const path = raw.url ?? '';
    if (!path.startsWith('/') || path.startsWith('//')) {
      writeRawProblem(socket, new AuthError('invalid_request', 'the request target is not a path'));
      return;
    }
    let headers: IncomingHttpHeaders;
    try {
      headers = opts.headers(requestView(app, raw), principal);
    } catch (err) {
      app.log.error({ err }, 'websocket identity headers failed');
      writeRawProblem(socket, internalError(err));
      return;
    }
    const offered = String(raw.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p !== '');
    // ws's unix socket form: `ws+unix:<socket>:<path>`.
    let origin: URL;
    try {
      origin = fixedOrigin ?? wsOrigin((upstreamOf as (req: IncomingMessage) => URL)(raw));
    } catch (err) {
      writeRawProblem(socket, err instanceof AuthError ? err : internalError(err));
      return;
    }
    const address = opts.socketPath === undefined ? new URL(path, origin) : `ws+unix:${opts.socketPath}:${path}`;
    const target = new WebSocket(address, offered, {
      headers: headers as Record<string, string>,
      followRedirects: false,
      perMessageDeflate: false,
      handshakeTimeout: opts.handshakeMs,
    });
    open.add(target);
    target.once('close', () => open.delete(target));
    let client: WebSocket | null = null;
    let refused = false;
    const refuse = (err: AuthError) => {
      if (refused) return;
      refused = true;
      target.terminate();
      writeRawProblem(socket, err);
    };
    target.once('unexpected-response', (_req, res) => {
      res.resume();
      refuse(new AuthError('upstream_unavailable', `the application refused the websocket (${res.statusCode})`));
    });
    target.on('error', (err: Error) => {
      if (client !== null) {
        client.terminate();
        return;
      }
      const timedOut = /timed out|timeout/i.test(err.message);
      refuse(new AuthError(timedOut ? 'upstream_timeout' : 'upstream_unavailable', 'the application could not be reached', { cause: err }));
    });
    socket.once('close', () => {
      if (target.readyState === WebSocket.CONNECTING) target.terminate();
    });
    target.once('open', () => {
      if (socket.destroyed) {
        target.terminate();
        return;
      }
      if (target.protocol !== '') chosen.set(raw, target.protocol);
      accepting.handleUpgrade(raw, socket, head, (accepted) => {
        client = accepted;
        open.add(accepted);
        accepted.once('close', () => open.delete(accepted));
        // When the session that opened it ends, nothing more is relayed either way, and both
        // sides are closed with 1008 (policy violation).
        let ended = false;
        onUpgradeSessionEnd(raw, (reason) => {
          ended = true;
          closeWith(accepted, 1008, Buffer.from(reason));
          closeWith(target, 1008, Buffer.from(reason));
        });
        accepted.on('message', (data: RawData, binary: boolean) => {
          if (!ended) target.send(data, { binary });
        });
        target.on('message', (data: RawData, binary: boolean) => {
          if (!ended) accepted.send(data, { binary });
        });
        accepted.once('close', (code, reason) => closeWith(target, code, reason));
        target.once('close', (code, reason) => closeWith(accepted, code, reason));
        accepted.on('error', () => target.terminate());
      });
    });
  });

  app.addHook('onClose', (_app, done) => {
    for (const ws of open) ws.terminate();
    accepting.close();
    done();
  });
}

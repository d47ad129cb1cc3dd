// Real upstreams for the gateway's upstream mode: a node:http echo that answers with what it
// received (and a few special paths), a websocket echo on the same server, and a gateway in front
// of it. Everything listens on 127.0.0.1 port 0.
import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { type AuthDeps, AuthError, authenticate, identityHeaders, type Principal } from '@svc/core';
import Fastify, { type FastifyInstance } from 'fastify';
import { type WebSocket, WebSocketServer } from 'ws';
import type { GatewayAttach, UpstreamIdentityHeaders } from '../../src/gateway/options.js';
import { type UpstreamTimeouts, upstreamAttach } from '../../src/gateway/upstream.js';
import { hardenSurface } from '../../src/http/harden.js';
import { serverOptions } from '../../src/http/server-options.js';
import { applicationUser, startGatewayHarness, testPolicy } from './gateway-harness.js';

/** What the echo upstream answers: the request as it arrived there. */
export interface EchoBody {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: string[];
  readonly body: string;
  readonly bytes: number;
  readonly sha256: string;
}

/**
 * What the echo answers on its other paths: `request`, an {@link EchoBody}; `attach`, the `Echo`
 * of the gateway tests' in-process attach (see {@link attachEcho}), so those tests run through
 * the proxy too.
 */
export type EchoShape = 'request' | 'attach';

/** A running upstream, with what reached it. */
export interface Upstream {
  readonly url: URL;
  /** Every HTTP request that reached the upstream (paths only), in order. */
  readonly requests: string[];
  /** The handshake headers of every websocket upgrade that reached the upstream. */
  readonly upgrades: IncomingHttpHeaders[];
  close(): Promise<void>;
}

/** The identity headers {@link testIdentityHeaders} sets, lower-cased. */
const GATEWAY_SET = ['svc-subject', 'svc-realm', 'svc-session', 'svc-device', 'svc-email', 'svc-name', 'svc-groups', 'svc-assertion'];

/**
 * The answer of the gateway tests' in-process echo attach (`Echo` of gateway-harness.ts), made
 * by the upstream from what it received: the identity headers the gateway set (the last one of
 * each name: any other is a forgery that got through, and stays in the echo) are taken out and
 * read back as the principal (null without `Svc-Subject`).
 */
function attachEcho(req: IncomingMessage): object {
  const raw = [...req.rawHeaders];
  const set: Record<string, string> = {};
  for (const name of GATEWAY_SET) {
    for (let i = raw.length - 2; i >= 0; i -= 2) {
      if ((raw[i] as string).toLowerCase() === name) {
        set[name] = raw[i + 1] as string;
        raw.splice(i, 2);
        break;
      }
    }
  }
  const headers: Record<string, string | string[]> = {};
  const headersDistinct: Record<string, string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    const value = raw[i + 1] as string;
    headersDistinct[name] = [...(headersDistinct[name] ?? []), value];
    const prior = headers[name];
    headers[name] = prior === undefined ? value : name === 'set-cookie' ? [...[prior].flat(), value] : `${prior}, ${value}`;
  }
  const subject = set['svc-subject'];
  return {
    attach: 'upstream proxy',
    method: req.method,
    url: req.url,
    headers,
    rawHeaders: raw,
    headersDistinct,
    principal:
      subject === undefined
        ? null
        : {
            subject,
            realm: set['svc-realm'],
            session: set['svc-session'],
            device: set['svc-device'],
            assertion: set['svc-assertion'],
            // Who the caller is, read back from Svc-Email, Svc-Name (percent-decoded) and Svc-Groups.
            claims: {
              ...(set['svc-email'] === undefined ? {} : { email: set['svc-email'] }),
              ...(set['svc-name'] === undefined ? {} : { name: decodeURIComponent(set['svc-name']) }),
              ...(set['svc-groups'] === undefined ? {} : { groups: set['svc-groups'].split(',') }),
            },
          },
  };
}

/**
 * Special paths: `/slow?ms=N` answers after N ms; `/download?bytes=N` streams N bytes (64 KiB
 * chunks, with backpressure) without holding them; `/upload` counts and hashes the body as it
 * streams and answers only the count and digest; `/hop` answers with hop-by-hop headers and
 * headers its `Connection` names; `/status?code=N` answers N; `/csp` answers HTML with its own
 * CSP; `/stall` sends its head and a first chunk, then nothing.
 * Every other path: an {@link EchoBody} of the request.
 */
function handle(req: IncomingMessage, res: ServerResponse, shape: EchoShape): void {
  const url = new URL(req.url ?? '/', 'http://upstream');
  if (url.pathname === '/download') {
    const total = Number(url.searchParams.get('bytes'));
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let sent = 0;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(total) });
    const pump = () => {
      while (sent < total) {
        const n = Math.min(chunk.length, total - sent);
        sent += n;
        if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
    return;
  }
  if (url.pathname === '/status') {
    res.writeHead(Number(url.searchParams.get('code')), { 'content-type': 'text/plain', 'retry-after': '0' });
    res.end('as asked');
    return;
  }
  if (url.pathname === '/csp') {
    res.writeHead(200, { 'content-type': 'text/html', 'content-security-policy': "default-src 'self'" });
    res.end('<p>app</p>');
    return;
  }
  if (url.pathname === '/stall') {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('first chunk');
    return;
  }
  const hash = createHash('sha256');
  const parts: Buffer[] = [];
  let bytes = 0;
  const keep = url.pathname !== '/upload';
  req.on('data', (d: Buffer) => {
    bytes += d.length;
    hash.update(d);
    if (keep) parts.push(d);
  });
  req.on('end', () => {
    const answer = () => {
      if (url.pathname === '/hop') {
        res.writeHead(200, {
          connection: 'keep-alive, X-Upstream-Private',
          'keep-alive': 'timeout=77',
          'x-upstream-private': 'connection-scoped',
          'proxy-connection': 'keep-alive',
          trailer: 'x-checksum',
          upgrade: 'h2c',
          'x-end-to-end': 'kept',
          'content-type': 'text/plain',
        });
        res.end('hop');
        return;
      }
      const body: EchoBody | object =
        shape === 'attach'
          ? attachEcho(req)
          : {
              method: req.method ?? '',
              url: req.url ?? '',
              headers: req.headers,
              rawHeaders: req.rawHeaders,
              body: keep ? Buffer.concat(parts).toString('utf8') : '',
              bytes,
              sha256: hash.digest('hex'),
            };
      const text = JSON.stringify(body);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
      res.end(text);
    };
    const ms = url.pathname === '/slow' ? Number(url.searchParams.get('ms')) : 0;
    if (ms > 0) {
      // A request the gateway gave up on is never answered: its timer goes with it, so an
      // upstream that "never answers" (a huge `ms`) keeps no test process alive.
      const timer = setTimeout(answer, ms);
      res.once('close', () => clearTimeout(timer));
    } else answer();
  });
}

/**
 * Starts the echo upstream (HTTP and websocket on one port). A websocket connection first
 * sends the handshake headers it got (JSON), then echoes every message; an upgrade to
 * `/ws-refuse` is answered 403.
 *
 * @example
 * const up = await startEchoUpstream();
 */
export async function startEchoUpstream(shape: EchoShape = 'request'): Promise<Upstream> {
  const requests: string[] = [];
  const upgrades: IncomingHttpHeaders[] = [];
  const server: Server = createServer((req, res) => {
    requests.push(req.url ?? '');
    handle(req, res, shape);
  });
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    upgrades.push(req.headers);
    if (req.url?.startsWith('/ws-refuse')) {
      socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
      ws.send(JSON.stringify({ handshake: req.headers }));
      ws.on('message', (data, binary) => ws.send(data, { binary }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: new URL(`http://127.0.0.1:${port}`),
    requests,
    upgrades,
    async close() {
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The identity headers the tests attach: the principal's fields, and a marker that it was the gateway. */
export const testIdentityHeaders: UpstreamIdentityHeaders = (_req, principal) =>
  principal === null
    ? {}
    : {
        'Svc-Subject': principal.subject,
        'Svc-Realm': principal.realm,
        'Svc-Session': principal.session,
        'Svc-Device': principal.device,
        // The gateway's own rule for who the caller is (Svc-Email, Svc-Name, Svc-Groups).
        ...identityHeaders(principal.claims),
        'Svc-Assertion': `test-assertion-for-${principal.subject}`,
      };

/** The bearer the minimal gateway accepts: `Bearer good-<subject>`. */
export const goodBearer = (subject = 'sub_alice') => `Bearer good-${subject}`;

/**
 * A stand-in for the gateway app, for the attach's own properties: the shared hardening (JSON-only
 * parser at the root, problem+json errors, security headers), an `onRequest` hook that settles
 * `request.principal` from a fake bearer (`/public/*` needs none) and removes the
 * `Authorization` header, and the attach in its own encapsulated context, like the gateway does.
 */
export async function buildStandInGateway(attach: GatewayAttach, opts: { trustedProxies?: string[] } = {}): Promise<FastifyInstance> {
  const app = Fastify({ ...serverOptions(false), trustProxy: opts.trustedProxies ?? false });
  hardenSurface(app, { loopbackOnly: false });
  app.addHook('onRequest', async (req) => {
    const auth = req.headers.authorization;
    let principal: Principal | null = null;
    if (auth?.startsWith('Bearer good-')) {
      const subject = auth.slice('Bearer good-'.length);
      principal = Object.freeze({
        subject,
        realm: 'application',
        session: `ses_${subject}`,
        device: `dev_${subject}`,
        claims: Object.freeze({ amr: Object.freeze(['ed25519']), auth_time: '2026-11-23T18:00:00Z', exp: '2026-11-23T19:00:00Z' }),
      }) as Principal;
      delete req.headers.authorization;
    } else if (!req.url.startsWith('/public/')) {
      throw new AuthError('invalid_token', 'no application bearer', { realm: 'application' });
    }
    Object.defineProperty(req, 'principal', { value: principal, writable: false, configurable: false, enumerable: true });
  });
  await app.register(async (scope) => {
    await attach(scope);
  });
  return app;
}

/** A gateway in upstream mode in front of `upstream`, listening on 127.0.0.1:0, with a signed-in caller. */
export interface ProxyGateway {
  readonly app: FastifyInstance;
  readonly base: string;
  readonly port: number;
  /** The caller's `Authorization` value. */
  readonly bearer: string;
  /** The caller as the gateway knows it. */
  readonly principal: Principal;
  /** The gateway's store and clock (the real gateway only). */
  readonly deps?: AuthDeps;
  close(): Promise<void>;
}

export interface ProxyGatewayOptions {
  readonly identityHeaders?: UpstreamIdentityHeaders;
  readonly timeouts?: UpstreamTimeouts;
  /** Peers whose `X-Forwarded-*` the gateway believes (`trustedProxies`). */
  readonly trustedProxies?: string[];
}

/**
 * Starts the real gateway (`buildGatewayApp`: hygiene, application-realm bearer against a real
 * SQLite store, public paths `/healthz` and `/public/*`) whose attach is `upstreamAttach` to
 * `upstream`, and signs one application device in (paired through the node surface).
 *
 * @example
 * const gw = await startProxyGateway(up.url);
 * await fetch(`${gw.base}/x`, { headers: { authorization: gw.bearer } });
 */
export async function startProxyGateway(upstream: URL, opts: ProxyGatewayOptions = {}): Promise<ProxyGateway> {
  const attach = upstreamAttach({ upstream, identityHeaders: opts.identityHeaders ?? testIdentityHeaders }, opts.timeouts);
  const h = await startGatewayHarness({ attach, policy: testPolicy(), gateway: { trustedProxies: opts.trustedProxies ?? [] } });
  try {
    const user = await applicationUser(h);
    const principal = await authenticate(h.deps, { token: user.pair.access_token, realm: 'application' });
    return {
      app: h.gateway,
      base: h.gatewayBase,
      port: h.gatewayPort,
      bearer: `Bearer ${user.pair.access_token}`,
      principal,
      deps: h.deps,
      close: () => h.close(),
    };
  } catch (err) {
    await h.close();
    throw err;
  }
}

/**
 * The stand-in gateway with `upstreamAttach` to `upstream`: the attach alone, without the real
 * gateway's stripping, for the properties the attach must hold by itself (defence in depth).
 */
export async function startStandInProxyGateway(upstream: URL, opts: ProxyGatewayOptions = {}): Promise<ProxyGateway> {
  const attach = upstreamAttach({ upstream, identityHeaders: opts.identityHeaders ?? testIdentityHeaders }, opts.timeouts);
  const app = await buildStandInGateway(attach, opts.trustedProxies === undefined ? {} : { trustedProxies: opts.trustedProxies });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  const subject = 'sub_alice';
  return {
    app,
    base: `http://127.0.0.1:${port}`,
    port,
    bearer: goodBearer(subject),
    principal: { subject, realm: 'application', session: `ses_${subject}`, device: `dev_${subject}` } as Principal,
    close: () => app.close(),
  };
}

import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, test } from 'node:test';
import { DEFAULT_UPSTREAM_TIMEOUTS, proxiedSocketTimeout } from '../../src/gateway/upstream.js';
import { UPLOAD_RATE_FLOOR } from '../../src/http/connection-limits.js';
import { serverOptions } from '../../src/http/server-options.js';
import { until, within } from '../support/bounded.js';
import { startGatewayHarness } from '../support/gateway-harness.js';
import { raw, startHarness } from '../support/harness.js';
import { startNodeHarness } from '../support/node-harness.js';
import { startEchoUpstream, startProxyGateway } from '../support/upstream-harness.js';

/** The listener's own deadline for a request head: what would free a lingering socket without the fix. */
const HEAD_TIMEOUT_MS = serverOptions(false).http.headersTimeout;

function openConnections(server: Server): Promise<number> {
  return new Promise((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
}

/**
 * `count` clients from `peers` loopback addresses (127.0.0.2, 127.0.0.3, ...) that each send a
 * line that is not HTTP and never read a byte of the answer. Resolves once the server has
 * either answered each one (its `clientError`) or dropped it at its cap.
 */
async function garbageFlood(server: Server, port: number, count: number, peers: number): Promise<Socket[]> {
  let accepted = 0;
  let dropped = 0;
  let answered = 0;
  const onConnection = () => accepted++;
  const onDrop = () => dropped++;
  const onClientError = () => answered++;
  server.on('connection', onConnection);
  server.on('drop', onDrop);
  server.on('clientError', onClientError);
  const sockets: Socket[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const s = connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${2 + (i % peers)}` });
      s.on('error', () => {});
      s.on('connect', () => s.write('GARBAGE \x01\x02 NOT-HTTP\r\n\r\n'));
      // Never read: no 'data' listener, so the socket stays paused.
      sockets.push(s);
    }
    await until(
      () => accepted + dropped === count && answered === accepted,
      60_000,
      `the listener to answer or drop ${count} garbage connections`,
      () => ({ accepted, dropped, answered }),
    );
  } finally {
    server.off('connection', onConnection);
    server.off('drop', onDrop);
    server.off('clientError', onClientError);
  }
  return sockets;
}

describe('connections that never read cannot hold a listener', () => {
  let sockets: Socket[] = [];
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    for (const s of sockets) s.destroy();
    sockets = [];
    await close?.();
    close = undefined;
  });

  const surfaces = [
    {
      name: 'management API',
      count: 300,
      async start() {
        const h = await startHarness();
        return { server: h.app.server, port: h.port, health: () => raw(h, { path: '/health' }), close: () => h.close() };
      },
    },
    {
      name: 'node surface',
      count: 300,
      async start() {
        const h = await startNodeHarness();
        const port = Number(new URL(h.nodeBase).port);
        return {
          server: h.node.server,
          port,
          health: () => raw({ port }, { path: '/edge/0-alpha/health' }),
          close: () => h.close(),
        };
      },
    },
    {
      name: 'application gateway',
      count: 1100,
      async start() {
        const h = await startGatewayHarness({
          attach: async (app) => {
            app.get('/healthz', async () => ({ ok: true }));
          },
        });
        return {
          server: h.gateway.server,
          port: h.gatewayPort,
          health: () => raw({ port: h.gatewayPort }, { path: '/healthz' }),
          close: () => h.close(),
        };
      },
    },
  ];

  for (const surface of surfaces) {
    test(`garbage-flood-never-read: ${surface.count} clients from 22 addresses that send garbage and never read free their slots once answered (${surface.name})`, async () => {
      const l = await surface.start();
      close = l.close;
      sockets = await garbageFlood(l.server, l.port, surface.count, 22);
      // Answered with 400, the attack sockets must go at once (reset), not linger half-closed
      // until the listener's own head timeout: the wait is bounded below that timeout, so only
      // closing them after the answer can meet it.
      await until(
        async () => (await openConnections(l.server)) === 0,
        HEAD_TIMEOUT_MS / 2,
        `the ${surface.name} to free the slots of ${surface.count} answered garbage connections`,
        () => openConnections(l.server),
      );
      const r = await within(l.health(), 10_000, `a new client's health request to the ${surface.name}`);
      assert.equal(r.status, 200, r.text);
    });
  }
});

describe('a client that stops reading is cut', () => {
  test('never-reading-download: a caller that asks for 64 MiB through the gateway, never reads and keeps sending bytes is cut, freeing its slot', async () => {
    const up = await startEchoUpstream();
    const gw = await startProxyGateway(up.url);
    const socket = connect({ host: '127.0.0.1', port: gw.port, localAddress: '127.0.0.9' });
    socket.on('error', () => {});
    let trickle: NodeJS.Timeout | undefined;
    try {
      await within(new Promise<void>((resolve) => socket.once('connect', () => resolve())), 10_000, 'the raw client to connect');
      socket.write(`GET /download?bytes=${64 * 1024 * 1024} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${gw.bearer}\r\n\r\n`);
      // Bytes keep arriving from the caller (the start of a pipelined request, one byte at a
      // time), so the socket is never idle on the read side; it never reads a byte of the answer.
      socket.write('GET /');
      trickle = setInterval(() => socket.write('a'), 1_000);
      const server = gw.app.server as Server;
      await until(() => up.requests.some((r) => r.startsWith('/download')), 10_000, 'the download to reach the upstream');
      await until(
        async () => (await openConnections(server)) === 0,
        proxiedSocketTimeout(DEFAULT_UPSTREAM_TIMEOUTS) + 20_000,
        'the gateway to cut the caller that never reads',
        () => openConnections(server),
      );
    } finally {
      clearInterval(trickle);
      socket.destroy();
      await gw.close();
      await up.close();
    }
  });
});

describe('a deadline that fires during a response never writes into it', () => {
  test('error-answer-inside-a-response: a pipelined head that times out while a response streams cuts the connection without writing a 400 into the body', async () => {
    const up = await startEchoUpstream();
    const gw = await startProxyGateway(up.url);
    const socket = connect({ host: '127.0.0.1', port: gw.port });
    socket.on('error', () => {});
    let received = '';
    socket.on('data', (d: Buffer) => {
      received += d.toString('latin1');
    });
    try {
      await within(new Promise<void>((resolve) => socket.once('connect', () => resolve())), 10_000, 'the raw client to connect');
      // `/stall` sends its head and a first chunk, then nothing; the half-sent next request's
      // head deadline (10 s) fires while that response is still open.
      socket.write(`GET /stall HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${gw.bearer}\r\n\r\nGET /`);
      await within(
        new Promise<void>((resolve) => socket.once('close', () => resolve())),
        HEAD_TIMEOUT_MS + DEFAULT_UPSTREAM_TIMEOUTS.idleMs + 20_000,
        'the gateway to close the connection',
      );
      assert.match(received, /^HTTP\/1\.1 200 /);
      assert.match(received, /first chunk/);
      assert.equal(
        received.match(/HTTP\/1\.1 /g)?.length,
        1,
        `no second status line inside the body: ${JSON.stringify(received.slice(-300))}`,
      );
    } finally {
      socket.destroy();
      await gw.close();
      await up.close();
    }
  });
});

describe('a request body that barely moves is cut', () => {
  test('slow-body-upload: a caller that declares 1 MB and sends 10 bytes a second to a public upstream path is cut, freeing its slot', async () => {
    const up = await startEchoUpstream();
    const gw = await startProxyGateway(up.url);
    const server = gw.app.server as Server;
    const socket = connect({ host: '127.0.0.1', port: gw.port });
    socket.on('error', () => {});
    let trickle: NodeJS.Timeout | undefined;
    try {
      await within(new Promise<void>((resolve) => socket.once('connect', () => resolve())), 10_000, 'the raw client to connect');
      socket.write(
        'POST /public/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n',
      );
      // Never silent for long (so the idle timeout never fires), never anywhere near done.
      trickle = setInterval(() => socket.write('0123456789'), 1_000);
      await until(() => up.requests.includes('/public/upload'), 10_000, 'the upload to reach the upstream');
      await within(
        new Promise<void>((resolve) => socket.once('close', () => resolve())),
        3 * UPLOAD_RATE_FLOOR.windowMs,
        `the gateway to cut an upload slower than ${UPLOAD_RATE_FLOOR.bytesPerSecond} bytes/s`,
      );
      await until(
        async () => (await openConnections(server)) === 0,
        10_000,
        'the slot to be free',
        () => openConnections(server),
      );
    } finally {
      clearInterval(trickle);
      socket.destroy();
      await gw.close();
      await up.close();
    }
  });

  test('an upload that keeps a modest pace through the gateway is not cut', async () => {
    const up = await startEchoUpstream();
    const gw = await startProxyGateway(up.url);
    try {
      const chunk = Buffer.alloc(4 * UPLOAD_RATE_FLOOR.bytesPerSecond, 0x61);
      const chunks = Math.ceil((2.5 * UPLOAD_RATE_FLOOR.windowMs) / 1_000);
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          if (chunks === sent) {
            controller.close();
            return;
          }
          sent++;
          await new Promise((resolve) => setTimeout(resolve, 1_000));
          controller.enqueue(chunk);
        },
      });
      let sent = 0;
      const r = await within(
        fetch(`${gw.base}/public/upload`, {
          method: 'POST',
          body,
          duplex: 'half',
          headers: { 'content-type': 'application/octet-stream' },
        } as RequestInit),
        6 * UPLOAD_RATE_FLOOR.windowMs,
        'the answer to a paced upload',
      );
      assert.equal(r.status, 200);
      assert.equal(((await r.json()) as { bytes: number }).bytes, chunks * chunk.length);
    } finally {
      await gw.close();
      await up.close();
    }
  });
});

// Websockets through the gateway's upstream mode: upgraded only after authentication, with the
// identity headers on the upstream's handshake, against a real ws echo upstream on 127.0.0.1.
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { WebSocket } from 'ws';
import { within } from '../support/bounded.js';
import { rawText } from '../support/raw-http.js';
import {
  type ProxyGateway,
  startEchoUpstream,
  startProxyGateway,
  startStandInProxyGateway,
  type Upstream,
} from '../support/upstream-harness.js';

/** Opens a websocket; resolves with it once open, or rejects with the HTTP status of a refused upgrade. */
function connect(url: string, headers: Record<string, string>): Promise<{ ws: WebSocket; first: Promise<string> }> {
  const opened = new Promise<{ ws: WebSocket; first: Promise<string> }>((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const first = within(new Promise<string>((r) => ws.once('message', (data) => r(String(data)))), 20_000, `the first message on ${url}`);
    // A test that expects no first message never awaits it: its bound must not fail the run.
    first.catch(() => {});
    ws.once('open', () => resolve({ ws, first }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => {
        body += d.toString();
      });
      res.on('end', () => reject(Object.assign(new Error(`upgrade refused ${res.statusCode}`), { status: res.statusCode, body })));
    });
    ws.once('error', reject);
  });
  return within(opened, 20_000, `the websocket upgrade of ${url}`);
}

function nextMessage(ws: WebSocket): Promise<{ data: string; binary: boolean }> {
  return within(
    new Promise((resolve) => ws.once('message', (data, binary) => resolve({ data: String(data), binary }))),
    20_000,
    'the next websocket message',
  );
}

describe('gateway upstream mode, websockets', () => {
  let up: Upstream;
  let gw: ProxyGateway;
  before(async () => {
    up = await startEchoUpstream();
    gw = await startProxyGateway(up.url);
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  test('unauthenticated websocket upgrade: refused 401 by the gateway, and the upstream never sees it', async () => {
    const ws = `ws://127.0.0.1:${gw.port}/socket`;
    for (const headers of [{}, { authorization: 'Bearer forged' }, { 'svc-subject': 'sub_mallory' }]) {
      const refused = await connect(ws, headers).then(
        () => null,
        (err: { status?: number; body?: string }) => err,
      );
      assert.ok(refused !== null, 'the upgrade was accepted');
      assert.equal(refused.status, 401);
      assert.equal(JSON.parse(refused.body ?? '{}').code, 'invalid_token');
    }
    assert.equal(up.upgrades.length, 0, 'an unauthenticated upgrade reached the upstream');
    assert.equal(up.requests.length, 0);
  });

  test("an authenticated websocket echoes through the proxy, with the identity headers on the upstream's handshake", async () => {
    const { ws, first } = await connect(`ws://127.0.0.1:${gw.port}/socket?room=7`, {
      authorization: gw.bearer,
      'svc-subject': 'sub_mallory',
      'x-forwarded-for': '203.0.113.66',
      'x-app-header': 'kept',
    });
    try {
      const { handshake } = JSON.parse(await first) as { handshake: IncomingHttpHeaders };
      assert.equal(handshake['svc-subject'], gw.principal.subject);
      assert.equal(handshake['svc-assertion'], `test-assertion-for-${gw.principal.subject}`);
      assert.equal(handshake['svc-session'], gw.principal.session);
      assert.equal(handshake.authorization, undefined, 'the bearer reached the upstream');
      assert.equal(handshake['x-forwarded-for'], '127.0.0.1');
      assert.equal(handshake['x-app-header'], 'kept');
      assert.equal(handshake.host, up.url.host);

      ws.send('hello through the gateway');
      assert.deepEqual(await nextMessage(ws), { data: 'hello through the gateway', binary: false });
      ws.send(Buffer.from([1, 2, 3]));
      const echoed = await nextMessage(ws);
      assert.equal(echoed.binary, true);
    } finally {
      ws.close();
    }
    assert.equal(up.upgrades.length, 1);
  });

  // #24.11: a request that is not a valid websocket handshake made the gateway open a GET
  // handshake upstream (with the identity headers), then answer the caller 405/400.
  const KEY = 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
  const WS = `Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n`;
  const INVALID_UPGRADES: readonly (readonly [string, (bearer: string) => string])[] = [
    [
      'POST with Upgrade: websocket',
      (b) => `POST /socket HTTP/1.1\r\nHost: x\r\n${WS}${KEY}Authorization: ${b}\r\nContent-Length: 0\r\n\r\n`,
    ],
    [
      'PUT with Upgrade: websocket',
      (b) => `PUT /socket HTTP/1.1\r\nHost: x\r\n${WS}${KEY}Authorization: ${b}\r\nContent-Length: 0\r\n\r\n`,
    ],
    [
      'GET with Upgrade: h2c',
      (b) =>
        `GET /socket HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nAuthorization: ${b}\r\n\r\n`,
    ],
    [
      'POST with Upgrade: h2c',
      (b) =>
        `POST /socket HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nAuthorization: ${b}\r\nContent-Length: 0\r\n\r\n`,
    ],
    [
      'Upgrade naming two protocols',
      (b) =>
        `GET /socket HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket, h2c\r\nSec-WebSocket-Version: 13\r\n${KEY}Authorization: ${b}\r\n\r\n`,
    ],
    ['websocket without Sec-WebSocket-Key', (b) => `GET /socket HTTP/1.1\r\nHost: x\r\n${WS}Authorization: ${b}\r\n\r\n`],
    [
      'websocket with a malformed Sec-WebSocket-Key',
      (b) => `GET /socket HTTP/1.1\r\nHost: x\r\n${WS}Sec-WebSocket-Key: short\r\nAuthorization: ${b}\r\n\r\n`,
    ],
    [
      'websocket with another Sec-WebSocket-Version',
      (b) =>
        `GET /socket HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 12\r\n${KEY}Authorization: ${b}\r\n\r\n`,
    ],
    ['websocket in HTTP/1.0', (b) => `GET /socket HTTP/1.0\r\nHost: x\r\n${WS}${KEY}Authorization: ${b}\r\n\r\n`],
  ];
  for (const [attack, request] of INVALID_UPGRADES) {
    test(`an invalid upgrade reaches the upstream: ${attack} is refused before the gateway contacts the upstream`, async () => {
      const upgrades = up.upgrades.length;
      const requests = up.requests.length;
      const r = await within(rawText(gw.port, request(gw.bearer)), 10_000, `the gateway's answer to ${attack}`);
      // The refusal is the gateway's answer: whatever it did before answering has happened.
      assert.equal(up.upgrades.length, upgrades, `${attack}: a handshake reached the upstream`);
      assert.equal(up.requests.length, requests, `${attack}: a request reached the upstream`);
      assert.equal(r.status, 400, `${attack}: ${r.text}`);
      assert.equal(r.body?.code, 'invalid_request', attack);
    });
  }

  test('an upstream that refuses the websocket is 502 upstream_unavailable to the caller, whose handshake never completed', async () => {
    const refused = await connect(`ws://127.0.0.1:${gw.port}/ws-refuse`, { authorization: gw.bearer }).then(
      () => null,
      (err: { status?: number; body?: string }) => err,
    );
    assert.ok(refused !== null, 'the caller got a websocket');
    assert.equal(refused.status, 502);
    assert.equal(JSON.parse(refused.body ?? '{}').code, 'upstream_unavailable');
  });
});

describe('gateway upstream mode, websockets behind a trusted proxy', () => {
  test("the upstream's handshake carries the X-Forwarded-* the gateway believes, as for any request", async () => {
    const up = await startEchoUpstream();
    const gw = await startProxyGateway(up.url, { trustedProxies: ['127.0.0.1'] });
    try {
      const { ws, first } = await connect(`ws://127.0.0.1:${gw.port}/socket`, {
        authorization: gw.bearer,
        'x-forwarded-for': '198.51.100.1, 203.0.113.7',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'app.example',
      });
      const { handshake } = JSON.parse(await first) as { handshake: IncomingHttpHeaders };
      ws.close();
      assert.equal(handshake['x-forwarded-for'], '203.0.113.7');
      assert.equal(handshake['x-forwarded-proto'], 'https');
      assert.equal(handshake['x-forwarded-host'], 'app.example');
    } finally {
      await gw.close();
      await up.close();
    }
  });
});

describe('gateway upstream mode, websockets without the gateway identity step', () => {
  test('an upgrade that did not go through the identity step is never proxied (the attach fails closed)', async () => {
    const up = await startEchoUpstream();
    // The stand-in settles identity only for routed requests, never for an upgrade.
    const gw = await startStandInProxyGateway(up.url);
    try {
      const outcome = await connect(`ws://127.0.0.1:${gw.port}/socket`, { authorization: gw.bearer }).then(
        ({ ws }) => {
          ws.close();
          return 'open';
        },
        () => 'refused',
      );
      assert.equal(outcome, 'refused');
      assert.equal(up.upgrades.length, 0);
    } finally {
      await gw.close();
      await up.close();
    }
  });
});

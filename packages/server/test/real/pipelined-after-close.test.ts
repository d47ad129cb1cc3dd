import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { within } from '../support/bounded.js';
import { applicationUser, type GatewayHarness, startGatewayHarness, testPolicy } from '../support/gateway-harness.js';
import { admin, api, type Harness, startHarness } from '../support/harness.js';
import { type ProxyGateway, startEchoUpstream, startProxyGateway, type Upstream } from '../support/upstream-harness.js';

/**
 * RFC 9112 §9.6: a server that answers `Connection: close` "MUST NOT process any further
 * requests received on that connection". A client may write several requests at once
 * (pipelining); Node's parser reads them all and hands each to the app at once, so a request
 * written behind one that is answered with `close` (a refused framing or path, a body that does
 * not parse or is too large) would still run: its effect happens, and its answer never leaves, so
 * the caller cannot know it ran (and may send it again). Each attack writes a refused request and a
 * second one in one write, then checks the second never ran.
 */

/** Writes `request` (one or more requests) in one write; what came back before the server closed, as text. */
function written(port: number, request: string): Promise<string> {
  const answer = new Promise<string>((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' }, () => socket.write(request));
    const parts: Buffer[] = [];
    socket.on('data', (c: Buffer) => parts.push(c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(parts).toString('utf8')));
  });
  return within(answer, 10_000, 'the server to answer and close the connection');
}

/** The `code` of every problem+json answer in what came back, in order. */
function problemCodes(text: string): string[] {
  return [...text.matchAll(/"code":"([a-z_]+)"/g)].map((m) => m[1] as string);
}

/** The answers' status lines in what came back. */
function statusLines(text: string): string[] {
  return text.match(/HTTP\/1\.1 \d{3}/g) ?? [];
}

describe('a request pipelined behind one answered with Connection: close is not run (gateway)', () => {
  let h: GatewayHarness;
  let token: string;
  /** The paths the application saw, in order. */
  const seen: string[] = [];
  before(async () => {
    h = await startGatewayHarness({
      attach: async (app) => {
        app.all('/*', async (req) => {
          seen.push(req.url);
          return { attach: true, url: req.url };
        });
      },
      policy: testPolicy({ publicPaths: ['/healthz', '/public/*'] }),
    });
    token = (await applicationUser(h)).pair.access_token;
  });
  after(() => h.close());

  const gateway = (request: string) => written(h.gatewayPort, request);

  const malformed = '{"not json';
  const oversized = `"${'a'.repeat(70_000)}"`;
  /** A first request the gateway answers with `Connection: close`, at `path`, and the status it gets. */
  const REFUSED_FIRST = [
    {
      attack: 'pipelined-behind-a-refused-path',
      what: 'an ambiguous path',
      status: 400,
      code: 'invalid_request',
      path: '/public/../admin',
      request: 'GET /public/../admin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n',
    },
    {
      attack: 'pipelined-behind-a-body-that-does-not-parse',
      what: 'a malformed JSON body',
      status: 400,
      code: 'invalid_request',
      path: '/public/malformed',
      request: `POST /public/malformed HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${malformed.length}\r\n\r\n${malformed}`,
    },
    {
      attack: 'pipelined-behind-an-oversized-body',
      what: 'a body over 64 KiB',
      status: 413,
      code: 'payload_too_large',
      path: '/public/oversized',
      request: `POST /public/oversized HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${oversized.length}\r\n\r\n${oversized}`,
    },
  ] as const;
  for (const c of REFUSED_FIRST) {
    test(`${c.attack}: the request after ${c.what} (${c.status}, closed) never reaches the application`, async () => {
      const after = `/public/after-${c.attack}`;
      const r = await gateway(
        `${c.request}POST ${after} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Length: 0\r\n\r\n`,
      );
      assert.deepEqual(statusLines(r), [`HTTP/1.1 ${c.status}`], `one answer, then the connection closed: ${r.slice(0, 400)}`);
      assert.deepEqual(problemCodes(r), [c.code]);
      assert.match(r, /^connection: close$/im);
      // A request on a new connection is run: the application is reachable.
      assert.deepEqual(statusLines(await gateway('GET /public/probe HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n')), [
        'HTTP/1.1 200',
      ]);
      assert.deepEqual(
        seen.filter((u) => u === after || u === c.path),
        [],
        'neither the refused request nor the one pipelined behind it ran',
      );
    });
  }

  test('pipelining without a close still works: three requests in one write are each answered, in order', async () => {
    const r = await gateway(
      'GET /public/p1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' +
        'GET /public/p2 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' +
        'GET /public/p3 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
    );
    assert.deepEqual(statusLines(r), ['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 200'], r);
    assert.deepEqual(
      [...r.matchAll(/"url":"(\/public\/p\d)"/g)].map((m) => m[1]),
      ['/public/p1', '/public/p2', '/public/p3'],
    );
  });
});

describe('a request pipelined behind one answered with Connection: close is not run (management API)', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(() => h.close());

  test('pipelined-logout-behind-a-malformed-body: a revoke written after a body that does not parse never ends the session', async () => {
    const { pair } = await admin(h);
    const bad = '{"public_key":';
    const r = await written(
      h.port,
      `POST /v1/auth/challenges HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${bad.length}\r\n\r\n${bad}` +
        `POST /v1/auth/revoke HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${pair.access_token}\r\nContent-Length: 0\r\n\r\n`,
    );
    assert.deepEqual(statusLines(r), ['HTTP/1.1 400'], `one answer, then the connection closed: ${r}`);
    assert.deepEqual(problemCodes(r), ['invalid_request']);
    assert.match(r, /^connection: close$/im);
    // Given time to have run, the logout did not: the session is live.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const me = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
    assert.equal(me.status, 200, `the pipelined logout ran: ${me.text}`);
  });
});

/** A websocket opening handshake's own header lines. */
const UPGRADE = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';

describe('an upgrade pipelined behind another request is not relayed (gateway, upstream mode)', () => {
  let up: Upstream;
  let gw: ProxyGateway;
  before(async () => {
    up = await startEchoUpstream('attach');
    gw = await startProxyGateway(up.url);
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  const malformed = '{"not json';
  /** The gateway's own route answers a body that does not parse with 400 and closes the connection. */
  const MALFORMED = `POST /.svc/auth/v1/challenges HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${malformed.length}\r\n\r\n${malformed}`;
  const CASES = [
    ['an ambiguous path (400, closed)', 'GET /public/../admin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', ['HTTP/1.1 400'], ['invalid_request']],
    ['a malformed body (400, closed)', MALFORMED, ['HTTP/1.1 400'], ['invalid_request']],
    // Node hands the upgrade over at once, while the slow answer and the 400 are still to come:
    // relayed, its 101 went out first and the two answers were written into the websocket.
    [
      'a slow request and a malformed body',
      `GET /public/slow?ms=300 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n${MALFORMED}`,
      ['HTTP/1.1 200', 'HTTP/1.1 400'],
      ['invalid_request'],
    ],
    // Behind an answer that keeps the connection open: that answer, then the upgrade's refusal.
    [
      'a request answered with keep-alive',
      'GET /public/slow?ms=100 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n',
      ['HTTP/1.1 200', 'HTTP/1.1 400'],
      ['invalid_request'],
    ],
  ] as const;
  for (const [what, first, answers, codes] of CASES) {
    test(`upgrade-pipelined-behind ${what}: the upstream never sees the handshake, and no 101 overtakes an answer`, async () => {
      const before = up.upgrades.length;
      const r = await written(gw.port, `${first}GET /app/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${gw.bearer}\r\n${UPGRADE}\r\n`);
      assert.deepEqual(statusLines(r), [...answers], r.slice(0, 600));
      assert.deepEqual(problemCodes(r), [...codes]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(up.upgrades.length - before, 0, 'the pipelined handshake reached the upstream');
    });
  }

  test('an upgrade on a connection of its own still goes through (101)', async () => {
    const before = up.upgrades.length;
    const socket = connect({ port: gw.port, host: '127.0.0.1' }, () =>
      socket.write(`GET /app/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${gw.bearer}\r\n${UPGRADE}\r\n`),
    );
    const head = await within(
      new Promise<string>((resolve, reject) => {
        socket.once('data', (c: Buffer) => resolve(c.toString('utf8')));
        socket.once('error', reject);
      }),
      10_000,
      'the 101 of an upgrade on its own connection',
    );
    socket.destroy();
    assert.match(head, /^HTTP\/1\.1 101/);
    assert.equal(up.upgrades.length - before, 1);
  });
});

describe('a raw refusal never answers for an earlier request that is still running (management API)', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(() => h.close());

  const TAILS = [
    ['bytes that are not HTTP', 'GARBAGE\r\n\r\n', 'HTTP/1.1 400', 'invalid_request'],
    ['a CONNECT', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 'HTTP/1.1 404', 'not_found'],
  ] as const;
  for (const [what, tail, refusal, code] of TAILS) {
    test(`refusal-overtakes-a-logout: ${what} written after a logout never come back as the logout's answer`, async () => {
      const { pair } = await admin(h);
      const r = await written(
        h.port,
        `POST /v1/auth/revoke HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${pair.access_token}\r\nContent-Length: 0\r\n\r\n${tail}`,
      );
      // The logout's own answer first, then the refusal: never a refusal the caller would take
      // for the logout's (it ran).
      assert.deepEqual(statusLines(r), ['HTTP/1.1 200', refusal], r.slice(0, 600));
      assert.deepEqual(problemCodes(r), [code]);
      assert.equal((await api(h, 'GET', '/v1/auth/me', { token: pair.access_token })).status, 401, 'the logout ran');
    });
  }
});

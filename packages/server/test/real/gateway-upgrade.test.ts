import assert from 'node:assert/strict';
import { type IncomingMessage, ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import type { Principal } from '@svc/core';
import { upgradePrincipal } from '../../src/gateway/app.js';
import type { GatewayAttach } from '../../src/index.js';
import { within } from '../support/bounded.js';
import { applicationUser, echoAttach, type GatewayHarness, gatewayApi, startGatewayHarness } from '../support/gateway-harness.js';
import { admin } from '../support/harness.js';

/** What an `upgrade` listener of the attach saw. */
interface SeenUpgrade {
  readonly url: string;
  readonly principal: Principal | null;
  readonly authorization: string | undefined;
  readonly rawHeaders: string[];
  readonly data: string;
}

const UPGRADE = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';

describe('websocket upgrades go through the same identity step', () => {
  let h: GatewayHarness;
  const seen: SeenUpgrade[] = [];
  before(async () => {
    const attach: GatewayAttach = async (app) => {
      await echoAttach(app);
      app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
        socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
        // What the client sent after its request head, whether it came with the head or while the gateway authenticated.
        let data = head.toString('utf8');
        const done = () => {
          seen.push({
            url: req.url ?? '',
            principal: upgradePrincipal(req),
            authorization: req.headers.authorization,
            rawHeaders: req.rawHeaders,
            data,
          });
          socket.end();
        };
        if (data.includes('PING')) done();
        else
          socket.on('data', (c: Buffer) => {
            data += c.toString('utf8');
            if (data.includes('PING')) done();
          });
      });
    };
    h = await startGatewayHarness({ attach });
  });
  after(() => h.close());

  /** Sends an upgrade request (then `PING` a moment later) and reads everything until the server closes. */
  const upgrade = (target: string, headers = '') =>
    within(
      new Promise<string>((resolve, reject) => {
        const socket = connect(h.gatewayPort, '127.0.0.1', () => {
          socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${UPGRADE}${headers}\r\n`);
          setTimeout(() => {
            if (!socket.destroyed) socket.write('PING');
          }, 5);
        });
        let text = '';
        socket.on('data', (c) => {
          text += c.toString('utf8');
        });
        socket.on('close', () => resolve(text));
        socket.on('error', (err: NodeJS.ErrnoException) =>
          err.code === 'ECONNRESET' || err.code === 'EPIPE' ? resolve(text) : reject(err),
        );
      }),
      20_000,
      `the gateway to answer and close an upgrade of ${target}`,
    );

  test('no token on a non-public path: 401 with the application challenge, the listener never sees it', async () => {
    const before = seen.length;
    const r = await upgrade('/ws');
    assert.match(r, /^HTTP\/1\.1 401 /);
    assert.match(r, /www-authenticate: Bearer realm="application"\r\n/i);
    assert.match(r, /"code":"invalid_token"/);
    assert.equal(seen.length, before);
  });

  test('an application token: upgraded with the principal fixed on the request and the token removed; no client byte is lost', async () => {
    const user = await applicationUser(h);
    const r = await upgrade('/ws', `Authorization: Bearer ${user.pair.access_token}\r\nSvc-Subject: sub_admin\r\n`);
    assert.match(r, /^HTTP\/1\.1 101 /);
    const last = seen.at(-1) as SeenUpgrade;
    assert.equal(last.principal?.session, user.pair.session_id);
    assert.equal(last.authorization, undefined);
    assert.ok(!last.rawHeaders.some((v) => v.includes(user.pair.access_token) || /svc-subject/i.test(v)));
    assert.match(last.data, /PING/);
  });

  test('a management token, a revoked token: 401; a public path: upgraded with principal null', async () => {
    const mgmt = (await admin(h)).pair;
    assert.match(await upgrade('/ws', `Authorization: Bearer ${mgmt.access_token}\r\n`), /^HTTP\/1\.1 401 [\s\S]*error="invalid_token"/);
    const user = await applicationUser(h);
    assert.equal((await gatewayApi(h, 'POST', '/.svc/auth/v1/revoke', { token: user.pair.access_token })).status, 200);
    assert.match(await upgrade('/ws', `Authorization: Bearer ${user.pair.access_token}\r\n`), /^HTTP\/1\.1 401 /);
    const before = seen.length;
    assert.match(await upgrade('/public/live'), /^HTTP\/1\.1 101 /);
    assert.equal(seen.length, before + 1);
    assert.equal(seen.at(-1)?.principal, null);
  });

  test('a reserved path is 404 and an ambiguous one 400, never upgraded', async () => {
    const user = await applicationUser(h);
    const before = seen.length;
    assert.match(await upgrade('/.svc/ws', `Authorization: Bearer ${user.pair.access_token}\r\n`), /^HTTP\/1\.1 404 /);
    // The reserved prefix in another letter case is reserved too.
    for (const path of ['/.SVC/ws', '/.Svc/ws', '/.sv%63/ws']) {
      assert.match(await upgrade(path, `Authorization: Bearer ${user.pair.access_token}\r\n`), /^HTTP\/1\.1 404 /, path);
    }
    assert.match(await upgrade('/public/../ws'), /^HTTP\/1\.1 400 /);
    assert.match(await upgrade('/public;x/ws'), /^HTTP\/1\.1 400 /, 'a path parameter');
    assert.equal(seen.length, before);
  });
});

describe('an upgrade routed through Fastify by its listener (as @fastify/http-proxy does for websockets)', () => {
  test('the route sees the principal the upgrade gate settled, without a second authentication, and without the token', async () => {
    const h = await startGatewayHarness({
      attach: async (app) => {
        app.get('/ws', async (req) => ({
          principal: req.principal,
          authorization: req.headers.authorization ?? null,
          upgrade: req.headers.upgrade ?? null,
        }));
        app.server.on('upgrade', (raw: IncomingMessage, socket: Duplex) => {
          const res = new ServerResponse(raw);
          res.assignSocket(socket as Socket);
          res.shouldKeepAlive = false;
          res.on('finish', () => socket.destroy());
          app.routing(raw, res);
        });
      },
    });
    try {
      const user = await applicationUser(h);
      const send = (headers: string) =>
        new Promise<string>((resolve, reject) => {
          const socket = connect(h.gatewayPort, '127.0.0.1', () =>
            socket.write(`GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\n${UPGRADE}${headers}\r\n`),
          );
          let text = '';
          socket.on('data', (c) => {
            text += c.toString('utf8');
            if (text.includes('}')) socket.destroy();
          });
          socket.on('close', () => resolve(text));
          socket.on('error', reject);
        });
      const ok = await send(`Authorization: Bearer ${user.pair.access_token}\r\n`);
      assert.match(ok, /^HTTP\/1\.1 200 /);
      const body = JSON.parse(ok.slice(ok.indexOf('{'), ok.lastIndexOf('}') + 1));
      assert.equal(body.principal.session, user.pair.session_id);
      assert.equal(body.authorization, null);
      assert.equal(body.upgrade, 'websocket');
      assert.match(await send(''), /^HTTP\/1\.1 401 /, 'refused by the gate before the listener');
    } finally {
      await h.close();
    }
  });
});

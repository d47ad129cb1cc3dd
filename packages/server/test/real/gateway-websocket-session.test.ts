// #24.2: a websocket relayed by the gateway lives no longer than the session (and the access
// token) that opened it. Real sockets: a ws client, the real gateway in upstream mode, a real ws
// echo upstream, a SQLite store shared with a second gateway (another node).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import type { AuthDeps } from '@svc/core';
import { openSqliteStore } from 'svc-store-sqlite';
import { WebSocket } from 'ws';
import { type GatewayAttach, upstreamAttach } from '../../src/index.js';
import { within } from '../support/bounded.js';
import {
  applicationUser,
  type GatewayHarness,
  gatewayApi,
  startGateway,
  startGatewayHarness,
  testPolicy,
} from '../support/gateway-harness.js';
import { admin, api, type Pair } from '../support/harness.js';
import { startEchoUpstream, testIdentityHeaders, type Upstream } from '../support/upstream-harness.js';

/** How often the gateways of this file re-check a relayed websocket's session. */
const CHECK_MS = 100;
/** How long a test waits for a websocket to close (the re-check runs every {@link CHECK_MS}). */
const CLOSE_WAIT_MS = 10_000;

/** An open websocket through the gateway, with its close as a promise. */
interface Relayed {
  readonly ws: WebSocket;
  readonly closed: Promise<{ code: number; reason: string }>;
  /** Sends `text` and resolves with the next message that comes back. */
  echo(text: string): Promise<string>;
}

/** Opens a websocket through the gateway with `token` and waits for the upstream's first message (its handshake). */
async function open(port: number, token: string): Promise<Relayed> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/socket`, { headers: { authorization: `Bearer ${token}` } });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once('close', (code, reason) => resolve({ code, reason: reason.toString('utf8') })),
  );
  const first = new Promise<void>((resolve, reject) => {
    ws.once('message', () => resolve());
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused ${res.statusCode}`)));
  });
  await within(first, CLOSE_WAIT_MS, "the relayed websocket's first message");
  return {
    ws,
    closed,
    echo: (text) => {
      const echoed = new Promise<string>((resolve) => {
        ws.once('message', (data) => resolve(String(data)));
        ws.send(text);
      });
      return within(echoed, CLOSE_WAIT_MS, `the echo of ${text}`);
    },
  };
}

/** Waits for `relayed` to be closed by the gateway with 1008 (policy violation), after `what`. */
async function closedForPolicy(relayed: Relayed, what: string): Promise<string> {
  const { code, reason } = await within(relayed.closed, CLOSE_WAIT_MS, `the websocket to close after ${what}`);
  assert.equal(code, 1008, `${what}: closed with ${code} ${reason}`);
  return reason;
}

describe('a websocket outlives its session', () => {
  let up: Upstream;
  let h: GatewayHarness;
  let mgmt: Pair;
  /** A second gateway over its own connection to the same SQLite file, as another node would have. */
  let other: { base: string; close(): Promise<void> };
  before(async () => {
    up = await startEchoUpstream();
    const attach = () => upstreamAttach({ upstream: up.url, identityHeaders: testIdentityHeaders });
    h = await startGatewayHarness({ attach: attach(), policy: testPolicy(), gateway: { websocketSessionCheckMs: CHECK_MS } });
    mgmt = (await admin(h)).pair;
    const store = await openSqliteStore({ file: join(h.dir, 'control.db') });
    const deps: AuthDeps = { ...h.deps, store, random: (n) => randomBytes(n) };
    const g = await startGateway({ deps }, { attach: attach(), websocketSessionCheckMs: CHECK_MS });
    other = {
      base: g.base,
      async close() {
        await g.app.close();
        await store.close();
      },
    };
  });
  after(async () => {
    await other?.close();
    await h?.close();
    await up?.close();
  });

  test('logout closes the websocket with 1008, and a websocket of another session keeps relaying', async () => {
    const u = await applicationUser(h);
    const bystander = await applicationUser(h);
    const socket = await open(h.gatewayPort, u.pair.access_token);
    const kept = await open(h.gatewayPort, bystander.pair.access_token);
    assert.equal(await socket.echo('before logout'), 'before logout');
    const r = await gatewayApi(h, 'POST', '/.svc/auth/v1/revoke', { token: u.pair.access_token });
    assert.equal(r.status, 200, r.text);
    assert.equal(await closedForPolicy(socket, 'logout'), 'session_revoked');
    // The bystander's session went through the same re-checks and is still relayed.
    assert.equal(await kept.echo('still here'), 'still here');
    kept.ws.close();
  });

  test('logout on another node sharing the store closes the websocket on this one', async () => {
    const u = await applicationUser(h);
    const socket = await open(h.gatewayPort, u.pair.access_token);
    const r = await gatewayApi({ gatewayBase: other.base }, 'POST', '/.svc/auth/v1/revoke', { token: u.pair.access_token });
    assert.equal(r.status, 200, r.text);
    assert.equal(await closedForPolicy(socket, 'a logout on the other node'), 'session_revoked');
  });

  test('revocation by an administrator closes the websocket', async () => {
    const u = await applicationUser(h);
    const socket = await open(h.gatewayPort, u.pair.access_token);
    const r = await api(h, 'POST', '/v1/auth/revoke', { token: mgmt.access_token, body: { session_id: u.pair.session_id } });
    assert.equal(r.status, 200, r.text);
    assert.equal(await closedForPolicy(socket, 'an administrator revocation'), 'session_revoked');
  });

  test('device removal closes the websocket', async () => {
    const u = await applicationUser(h);
    const socket = await open(h.gatewayPort, u.pair.access_token);
    const r = await api(h, 'DELETE', `/v1/auth/devices/${u.deviceId}`, { token: mgmt.access_token });
    assert.equal(r.status, 200, r.text);
    assert.equal(await closedForPolicy(socket, 'device removal'), 'session_revoked');
  });

  test('refresh-token reuse detection closes the websocket opened with the rotated token', async () => {
    const u = await applicationUser(h);
    const rotated = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: u.pair.refresh_token } });
    assert.equal(rotated.status, 200, rotated.text);
    const socket = await open(h.gatewayPort, rotated.body.access_token);
    h.clock.advance((h.deps.settings.refreshReuseGraceSeconds + 1) * 1000);
    const reused = await gatewayApi({ gatewayBase: other.base }, 'POST', '/.svc/auth/v1/refresh', {
      body: { refresh_token: u.pair.refresh_token },
    });
    assert.equal(reused.body.code, 'refresh_token_reused');
    assert.equal(await closedForPolicy(socket, 'refresh reuse detection'), 'session_revoked');
  });

  test('the access token that opened the websocket expiring closes it, though the session lives on', async () => {
    const u = await applicationUser(h);
    const socket = await open(h.gatewayPort, u.pair.access_token);
    assert.equal(await socket.echo('before expiry'), 'before expiry');
    h.clock.advance((h.deps.settings.accessTokenTtlSeconds + 1) * 1000);
    assert.equal(await closedForPolicy(socket, 'the access token expired'), 'token_expired');
    const refreshed = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: u.pair.refresh_token } });
    assert.equal(refreshed.status, 200, 'the session itself was not ended');
  });
});

describe('an upgrade listener that does not close its websocket when the session ends', () => {
  test('the gateway destroys the connection itself (fail closed)', async () => {
    // An attach's own upgrade listener that switches protocols and holds the connection,
    // without asking to be told of the session's end.
    const attach: GatewayAttach = async (app) => {
      app.server.on('upgrade', (_req: IncomingMessage, socket: Duplex) => {
        socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
        socket.resume();
        socket.once('end', () => socket.end());
      });
    };
    const h = await startGatewayHarness({ attach, gateway: { websocketSessionCheckMs: CHECK_MS } });
    let socket: Socket | undefined;
    try {
      const u = await applicationUser(h);
      const client = connect(h.gatewayPort, '127.0.0.1');
      socket = client;
      const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
      const switched = new Promise<void>((resolve) => client.once('data', () => resolve()));
      client.write(
        `GET /socket HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer ${u.pair.access_token}\r\n\r\n`,
      );
      await within(switched, CLOSE_WAIT_MS, 'the 101 of the attach');
      const r = await gatewayApi(h, 'POST', '/.svc/auth/v1/revoke', { token: u.pair.access_token });
      assert.equal(r.status, 200, r.text);
      await within(closed, CLOSE_WAIT_MS, 'the gateway to destroy the connection after logout');
    } finally {
      socket?.destroy();
      await h.close();
    }
  });
});

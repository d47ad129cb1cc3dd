// The browser session where a socket or a process is the subject: the real upstream and module
// attach modes, and websocket upgrades over a raw socket (the in-process mode and the cookie,
// CSRF and logout rules run injected in gateway-browser-session.test.ts).
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import type { Duplex } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { upgradePrincipal } from '../../src/gateway/app.js';
import { applicationUser, echoAttach, type GatewayHarness, startGatewayHarness } from '../support/gateway-harness.js';
import { plantedCookieSuite, sessionCookieSuites } from '../support/session-cookie-suite.js';

// The gateway listens on 127.0.0.1, where the DNS-rebinding guard already refuses any
// non-loopback Origin (403 forbidden_host): the attacking page is another loopback origin, a
// different site (localhost vs 127.0.0.1) or the same site on another port, which only the CSRF
// rule stops.
const EVIL_ORIGIN = 'http://localhost:9';

sessionCookieSuites((m) => m.name !== 'in-process echo');

plantedCookieSuite(['module mode']);

describe('websocket upgrades with session cookies', () => {
  let h: GatewayHarness;
  before(async () => {
    h = await startGatewayHarness({
      attach: async (app) => {
        await echoAttach(app);
        app.server.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
          const seen = JSON.stringify({ principal: upgradePrincipal(req), cookie: req.headers.cookie ?? null });
          socket.end(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n${seen}`);
        });
      },
    });
  });
  after(() => h.close());

  const upgrade = (headers: string) =>
    new Promise<string>((resolve, reject) => {
      const socket = connect(h.gatewayPort, '127.0.0.1', () => {
        socket.write(
          `GET /ws HTTP/1.1\r\nHost: 127.0.0.1:${h.gatewayPort}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${headers}\r\n`,
        );
      });
      let data = '';
      socket.on('data', (c: Buffer) => {
        data += c.toString('utf8');
      });
      socket.on('end', () => resolve(data));
      socket.on('error', reject);
    });

  test('cross-site websocket hijacking: a cookie upgrade from another origin is refused 403 csrf_refused', async () => {
    const user = await applicationUser(h);
    const answer = await upgrade(`Origin: ${EVIL_ORIGIN}\r\nCookie: svc-access=${user.pair.access_token}\r\n`);
    assert.match(answer, /^HTTP\/1.1 403/);
    assert.match(answer, /csrf_refused/);
  });

  test('a cookie upgrade from the gateway origin gets the principal, without the cookie', async () => {
    const user = await applicationUser(h);
    const answer = await upgrade(`Origin: http://127.0.0.1:${h.gatewayPort}\r\nCookie: a=1; svc-access=${user.pair.access_token}\r\n`);
    assert.match(answer, /^HTTP\/1.1 101/);
    const seen = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
    assert.equal(seen.principal.session, user.pair.session_id);
    assert.equal(seen.cookie, 'a=1');
  });
});

// The gateway's authentication where the socket is the subject: a token arriving from a network
// address, and raw requests (Expect: 100-continue, CONNECT) that bypass Fastify's routing.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, test } from 'node:test';
import { applicationUser, echoAttach, gatewayApi, startGateway, startGatewayHarness } from '../support/gateway-harness.js';
import { admin, api } from '../support/harness.js';
import { rawRequest } from '../support/raw-http.js';
import { networkAddress } from './hardening/surfaces.js';

describe('a management token that crossed the network to the gateway', () => {
  const NET = networkAddress();
  test('is refused, and its session revoked as exposed (token_exposed, audited), as on the node surface', {
    skip: NET === undefined ? 'no non-loopback IPv4 address' : false,
  }, async () => {
    const h = await startGatewayHarness({ attach: echoAttach, gatewayHost: NET as string });
    try {
      const mgmt = (await admin(h)).pair;
      const port = h.gatewayPort;
      const onNet = { gatewayBase: `http://${NET}:${port}` };
      const loopbackOnly = await startGateway(h, { attach: echoAttach });
      try {
        const local = await gatewayApi({ gatewayBase: loopbackOnly.base }, 'GET', '/app/x', { token: mgmt.access_token });
        assert.equal(local.status, 401);
        assert.equal(
          (await api(h, 'GET', '/v1/auth/me', { token: mgmt.access_token })).status,
          200,
          'from this machine it is only refused',
        );
      } finally {
        await loopbackOnly.app.close();
      }
      const r = await gatewayApi(onNet, 'GET', '/public/x', { token: mgmt.access_token });
      assert.equal(r.status, 200, 'a public path still answers');
      assert.equal(r.body.principal, null);
      const me = await api(h, 'GET', '/v1/auth/me', { token: mgmt.access_token });
      assert.equal(me.status, 401, 'the exposed management session is revoked');
      const other = (await admin(h)).pair;
      const audit = await api(h, 'GET', '/v1/auth/audit?limit=1000', { token: other.access_token });
      const revoked = (audit.body.events as { type: string; session_id: string; data: { reason?: string } }[]).find(
        (e) => e.type === 'session.revoked' && e.session_id === mgmt.session_id,
      );
      assert.equal(revoked?.data.reason, 'token_exposed');
    } finally {
      await h.close();
    }
  });
});

describe('the reserved prefix and the principal', () => {
  test('code loaded into the application cannot run before identity at the raw level, nor take the hygiene out', async () => {
    const rawSeen: string[] = [];
    const h = await startGatewayHarness({
      attach: async (app) => {
        await echoAttach(app);
        // Raw listeners added by the application would see requests before the identity hook: they never get any.
        app.server.prependListener('request', (req: IncomingMessage) => rawSeen.push(`request ${req.url}`));
        app.server.on('checkContinue', (req: IncomingMessage) => rawSeen.push(`checkContinue ${req.url}`));
        app.server.on('connect', (req: IncomingMessage) => rawSeen.push(`connect ${req.url}`));
      },
    });
    try {
      assert.equal((await gatewayApi(h, 'GET', '/app/x')).status, 401);
      const user = await applicationUser(h);
      assert.equal((await gatewayApi(h, 'GET', '/app/x', { token: user.pair.access_token })).status, 200);
      const expect = await rawRequest(h.gatewayPort, {
        method: 'POST',
        target: '/app/x',
        headers: [
          ['Expect', '100-continue'],
          ['Content-Type', 'application/json'],
        ],
        body: '{}',
      });
      assert.equal(expect.status, 401, 'an Expect: 100-continue request still goes through the identity step');
      await rawRequest(h.gatewayPort, { method: 'CONNECT', target: '/app/x' }).catch(() => null);
      assert.deepEqual(rawSeen, []);
      await assert.rejects(
        startGateway(h, {
          attach: async (app) => {
            (app.server as { emit: unknown }).emit = () => true;
          },
        }),
        TypeError,
      );
    } finally {
      await h.close();
    }
  });
});

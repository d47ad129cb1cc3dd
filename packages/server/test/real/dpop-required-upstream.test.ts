import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { accessTokenHash, firstAssertionKeySet, thumbprintOfPublicKeyHex } from '@svc/core';
import { createAssertionSigner, svcIdentityHeaders, upstreamAttach } from '@svc/server';
import { dpopProof, type ProofParts } from '../support/dpop.js';
import { applicationUser, type GatewayHarness, gatewayApi, startGatewayHarness } from '../support/gateway-harness.js';
import { type DeviceKey as HarnessKey, newDeviceKey, type Reply } from '../support/harness.js';
import { startEchoUpstream, type Upstream } from '../support/upstream-harness.js';

// `:auth/sender-constraint :required` (DPoP, RFC 9449) through the gateway in upstream mode, to a
// real upstream over a socket (the real tier; dpop-required.test.ts has the injected surfaces).
// The access token is bound to the device key too. Each use carries `Authorization: DPoP <token>` and a proof with `ath`; a copied token
// without the key is `401 invalid_token` with `WWW-Authenticate: DPoP ...`, on the management
// API, the node surface and the application gateway (where it never reaches the upstream).

function proofFor(h: { clock: { now(): number } }, key: HarnessKey, htu: string, over: Partial<ProofParts> = {}): string {
  return dpopProof(key, { htm: 'GET', htu, now: h.clock.now(), ...over });
}

function assertDpopTokenRefused(r: Reply, what: string): void {
  assert.equal(r.status, 401, `${what}: ${r.text}`);
  assert.equal(r.body?.code, 'invalid_token', what);
  assert.match(r.headers.get('www-authenticate') ?? '', /^DPoP /, what);
}
describe('DPoP-bound application tokens through the gateway (:required), upstream mode', () => {
  let h: GatewayHarness;
  let up: Upstream;
  before(async () => {
    up = await startEchoUpstream('attach');
    const keys = firstAssertionKeySet(
      (() => {
        const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
        return { x: jwk.x as string, d: jwk.d as string };
      })(),
      Date.now() - 3_600_000,
    );
    const signer = createAssertionSigner({ keys: () => keys, issuer: 'NODE-A', audience: up.url.origin, clock: { now: Date.now } });
    h = await startGatewayHarness({
      // Per realm: the application realm binds every use; the harness's admin (management) pairs devices as a bearer.
      settings: { senderConstraint: { management: 'refresh', application: 'required' } },
      attach: upstreamAttach({ upstream: up.url, identityHeaders: svcIdentityHeaders(signer) }),
    });
  });
  after(async () => {
    await h.close();
    await up.close();
  });

  test('a stolen application token without the key never reaches the upstream', async () => {
    const { pair } = await applicationUser(h);
    assert.equal(pair.token_type, 'DPoP');
    const before = up.requests.length;
    const url = `${h.gatewayBase}/reports/7`;
    assertDpopTokenRefused(
      await gatewayApi(h, 'GET', '/reports/7', { headers: { authorization: `Bearer ${pair.access_token}` } }),
      'bearer',
    );
    assertDpopTokenRefused(
      await gatewayApi(h, 'GET', '/reports/7', { headers: { authorization: `DPoP ${pair.access_token}` } }),
      'no proof',
    );
    const thief = newDeviceKey();
    assertDpopTokenRefused(
      await gatewayApi(h, 'GET', '/reports/7', {
        headers: { authorization: `DPoP ${pair.access_token}`, dpop: proofFor(h, thief, url, { ath: accessTokenHash(pair.access_token) }) },
      }),
      "a proof by the thief's key",
    );
    assert.equal(up.requests.length, before, 'nothing reached the upstream');
  });

  test("the gateway's own /.svc/auth/v1/me takes the bound token with its proof, not as a bearer", async () => {
    const { key, pair } = await applicationUser(h);
    assertDpopTokenRefused(
      await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { headers: { authorization: `Bearer ${pair.access_token}` } }),
      'bearer',
    );
    const ok = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', {
      headers: {
        authorization: `DPoP ${pair.access_token}`,
        dpop: proofFor(h, key, `${h.gatewayBase}/.svc/auth/v1/me`, { ath: accessTokenHash(pair.access_token) }),
      },
    });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.session, pair.session_id);
  });

  test('with its proof the request goes on without Authorization and DPoP, and the assertion carries cnf.jkt', async () => {
    const { key, pair } = await applicationUser(h);
    const r = await gatewayApi(h, 'GET', '/reports/8?x=1', {
      headers: {
        authorization: `DPoP ${pair.access_token}`,
        dpop: proofFor(h, key, `${h.gatewayBase}/reports/8`, { ath: accessTokenHash(pair.access_token) }),
      },
    });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.headers.authorization, undefined, 'Authorization removed');
    assert.equal(r.body.headers.dpop, undefined, 'DPoP removed');
    const assertion = r.body.principal.assertion as string;
    const claims = JSON.parse(Buffer.from(assertion.split('.')[1] as string, 'base64url').toString('utf8'));
    assert.deepEqual(claims.cnf, { jkt: thumbprintOfPublicKeyHex(key.publicKeyHex) });
  });
});

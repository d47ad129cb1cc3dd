import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { accessTokenHash } from '@svc/core';
import { dpopProof, type ProofParts } from './support/dpop.js';
import { api, enroll, type Harness, type DeviceKey as HarnessKey, newDeviceKey, type Pair, type Reply, signIn } from './support/harness.js';
import { type NodeHarness, nodeApi, startNodeHarness } from './support/node-harness.js';

// `:auth/sender-constraint :required` (DPoP, RFC 9449): the access token is bound to the device
// key too. Each use carries `Authorization: DPoP <token>` and a proof with `ath`; a copied token
// without the key is `401 invalid_token` with `WWW-Authenticate: DPoP ...`, on the management
// API, the node surface and the application gateway (where it never reaches the upstream).

const REQUIRED = { senderConstraint: { management: 'required', application: 'required' } } as const;

function proofFor(h: { clock: { now(): number } }, key: HarnessKey, htu: string, over: Partial<ProofParts> = {}): string {
  return dpopProof(key, { htm: 'GET', htu, now: h.clock.now(), ...over });
}

function assertDpopTokenRefused(r: Reply, what: string): void {
  assert.equal(r.status, 401, `${what}: ${r.text}`);
  assert.equal(r.body?.code, 'invalid_token', what);
  assert.match(r.headers.get('www-authenticate') ?? '', /^DPoP /, what);
}

describe('DPoP-bound access tokens on the management API and the node surface (:required)', () => {
  let h: NodeHarness;
  let key: HarnessKey;
  let pair: Pair;
  const me = (headers: Record<string, string>) => api(h, 'GET', '/v1/auth/me', { headers });
  const meUrl = () => `${h.base}/v1/auth/me`;
  before(async () => {
    h = await startNodeHarness({ socket: false, store: 'memory', settings: REQUIRED });
    key = (await enroll(h)).key;
    pair = await signIn(h, key);
  });
  after(() => h.close());

  test('a session signed in by a device key gets token_type DPoP, and its token works with a proof by the key', async () => {
    assert.equal(pair.token_type, 'DPoP');
    const ok = await me({
      authorization: `DPoP ${pair.access_token}`,
      dpop: proofFor(h, key, meUrl(), { ath: accessTokenHash(pair.access_token) }),
    });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.session, pair.session_id);
  });

  test('copied access token used without the key: 401 invalid_token with WWW-Authenticate: DPoP', async () => {
    assertDpopTokenRefused(await me({ authorization: `Bearer ${pair.access_token}` }), 'presented as a bearer');
    assertDpopTokenRefused(await me({ authorization: `DPoP ${pair.access_token}` }), 'DPoP scheme without a proof');
    const thief = newDeviceKey();
    assertDpopTokenRefused(
      await me({
        authorization: `DPoP ${pair.access_token}`,
        dpop: proofFor(h, thief, meUrl(), { ath: accessTokenHash(pair.access_token) }),
      }),
      "a proof by the thief's own key",
    );
  });

  test('ath for another token: 401', async () => {
    const other = await signIn(h, key);
    assertDpopTokenRefused(
      await me({
        authorization: `DPoP ${pair.access_token}`,
        dpop: proofFor(h, key, meUrl(), { ath: accessTokenHash(other.access_token) }),
      }),
      'ath of another access token',
    );
    assertDpopTokenRefused(await me({ authorization: `DPoP ${pair.access_token}`, dpop: proofFor(h, key, meUrl()) }), 'no ath at all');
  });

  test('a proof of an access-token use is good once (jti), and only for its method and URL', async () => {
    const proof = proofFor(h, key, meUrl(), { ath: accessTokenHash(pair.access_token) });
    assert.equal((await me({ authorization: `DPoP ${pair.access_token}`, dpop: proof })).status, 200);
    assertDpopTokenRefused(await me({ authorization: `DPoP ${pair.access_token}`, dpop: proof }), 'the same proof again');
    const forSessions = proofFor(h, key, `${h.base}/v1/auth/sessions`, { ath: accessTokenHash(pair.access_token) });
    assertDpopTokenRefused(await me({ authorization: `DPoP ${pair.access_token}`, dpop: forSessions }), 'a proof for another URL');
  });

  test('the node surface takes the bound management token only with its proof', async () => {
    const url = `${h.nodeBase}/edge/0-alpha/status`;
    const bare = await nodeApi(h, 'GET', '/edge/0-alpha/status', { headers: { authorization: `Bearer ${pair.access_token}` } });
    assertDpopTokenRefused(bare, 'a bearer on the node surface');
    const ok = await nodeApi(h, 'GET', '/edge/0-alpha/status', {
      headers: { authorization: `DPoP ${pair.access_token}`, dpop: proofFor(h, key, url, { ath: accessTokenHash(pair.access_token) }) },
    });
    assert.equal(ok.status, 200, ok.text);
  });

  test('a refresh of a bound session answers token_type DPoP again', async () => {
    const fresh = await signIn(h, key);
    const r = await api(h, 'POST', '/v1/auth/refresh', {
      body: { refresh_token: fresh.refresh_token },
      headers: { dpop: proofFor(h, key, `${h.base}/v1/auth/refresh`, { htm: 'POST' }) },
    });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.token_type, 'DPoP');
  });
});

describe('the default :refresh leaves the access token a bearer token', () => {
  let h: Harness & { nodeBase?: string };
  before(async () => {
    h = await startNodeHarness({
      socket: false,
      store: 'memory',
      settings: { senderConstraint: { management: 'refresh', application: 'refresh' } },
    });
  });
  after(() => h.close());
  test('token_type Bearer; the bearer works; the DPoP scheme with a valid proof works too', async () => {
    const { key } = await enroll(h);
    const pair = await signIn(h, key);
    assert.equal(pair.token_type, 'Bearer');
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: pair.access_token })).status, 200);
    const proof = dpopProof(key, { htm: 'GET', htu: `${h.base}/v1/auth/me`, now: h.clock.now(), ath: accessTokenHash(pair.access_token) });
    const r = await api(h, 'GET', '/v1/auth/me', { headers: { authorization: `DPoP ${pair.access_token}`, dpop: proof } });
    assert.equal(r.status, 200, r.text);
  });
});

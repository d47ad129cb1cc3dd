import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DPOP_NONCE_TTL_SECONDS } from '@svc/core';
import { dpopProof } from './support/dpop.js';
import { applicationUser, type GatewayHarness, gatewayApi, startGatewayHarness } from './support/gateway-harness.js';
import { api, enroll, type DeviceKey as HarnessKey, type Reply, signIn } from './support/harness.js';

// Server nonces (RFC 9449 §8), for clients that want them: every answer to a request with a
// DPoP proof carries `DPoP-Nonce`; a proof that carries a nonce must carry one a node issued
// and that has not expired (`401 use_dpop_nonce` with a fresh one otherwise).

const REFRESH = { senderConstraint: { management: 'refresh', application: 'refresh' } } as const;

describe('DPoP server nonces', () => {
  let h: GatewayHarness;
  let key: HarnessKey;
  before(async () => {
    h = await startGatewayHarness({ socket: false, store: 'memory', settings: REFRESH });
    key = (await enroll(h)).key;
  });
  after(() => h.close());

  const refresh = (token: string, nonce?: string): Promise<Reply> =>
    api(h, 'POST', '/v1/auth/refresh', {
      body: { refresh_token: token },
      headers: {
        dpop: dpopProof(key, {
          htm: 'POST',
          htu: `${h.base}/v1/auth/refresh`,
          now: h.clock.now(),
          ...(nonce === undefined ? {} : { nonce }),
        }),
      },
    });

  test('an answer to a DPoP request carries a DPoP-Nonce, and a proof with it is accepted', async () => {
    const pair = await signIn(h, key);
    const first = await refresh(pair.refresh_token);
    assert.equal(first.status, 200, first.text);
    const nonce = first.headers.get('dpop-nonce');
    assert.match(nonce ?? '', /^[A-Za-z0-9_-]{32}$/);
    const second = await refresh(first.body.refresh_token, nonce as string);
    assert.equal(second.status, 200, second.text);
  });

  test('a proof with a nonce no node issued: 401 use_dpop_nonce with a fresh nonce, which then works', async () => {
    const pair = await signIn(h, key);
    const made = await refresh(pair.refresh_token, 'n'.repeat(32));
    assert.equal(made.status, 401, made.text);
    assert.equal(made.body.code, 'use_dpop_nonce');
    assert.match(made.headers.get('www-authenticate') ?? '', /^DPoP error="use_dpop_nonce"/);
    const fresh = made.headers.get('dpop-nonce');
    assert.ok(fresh !== null && fresh !== 'n'.repeat(32));
    assert.equal((await h.store.getSession(pair.session_id))?.generation, 0, 'nothing rotated');
    const ok = await refresh(pair.refresh_token, fresh);
    assert.equal(ok.status, 200, ok.text);
  });

  test(`a nonce older than ${DPOP_NONCE_TTL_SECONDS} s: 401 use_dpop_nonce`, async () => {
    const pair = await signIn(h, key);
    const first = await refresh(pair.refresh_token);
    const old = first.headers.get('dpop-nonce') as string;
    h.clock.advance((DPOP_NONCE_TTL_SECONDS + 1) * 1000);
    const stale = await refresh(first.body.refresh_token, old);
    assert.equal(stale.status, 401);
    assert.equal(stale.body.code, 'use_dpop_nonce');
  });

  test('a nonce issued by one surface is accepted by another sharing the store (the gateway)', async () => {
    const app = await applicationUser(h);
    const pair = await signIn(h, key);
    const nonce = (await refresh(pair.refresh_token)).headers.get('dpop-nonce') as string;
    const r = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', {
      body: { refresh_token: app.pair.refresh_token },
      headers: {
        dpop: dpopProof(app.key, { htm: 'POST', htu: `${h.gatewayBase}/.svc/auth/v1/refresh`, now: h.clock.now(), nonce }),
      },
    });
    assert.equal(r.status, 200, r.text);
  });

  test('requests without a DPoP proof get no nonce', async () => {
    const r = await api(h, 'GET', '/health');
    assert.equal(r.headers.get('dpop-nonce'), null);
  });
});

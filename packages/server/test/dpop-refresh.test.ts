import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { dpopProof, type ProofParts } from './support/dpop.js';
import { applicationUser, type GatewayHarness, gatewayApi, startGatewayHarness } from './support/gateway-harness.js';
import {
  api,
  enroll,
  type Harness,
  type DeviceKey as HarnessKey,
  newDeviceKey,
  type Pair,
  type Reply,
  signIn,
  startHarness,
} from './support/harness.js';

// Sender-constrained refresh tokens (DPoP, RFC 9449) under the default `:auth/sender-constraint
// :refresh`, over real HTTP: a session signed in by a device key is bound to that key, and each
// refresh must carry a fresh proof by it for exactly this request. Each test is an attack.

const REFRESH = { senderConstraint: { management: 'refresh', application: 'refresh' } } as const;

function refreshWith(h: Harness, refreshToken: string, proof?: string): Promise<Reply> {
  return api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: refreshToken }, headers: proof === undefined ? {} : { dpop: proof } });
}

function proof(h: Harness, key: HarnessKey, over: Partial<ProofParts> = {}): string {
  return dpopProof(key, { htm: 'POST', htu: `${h.base}/v1/auth/refresh`, now: h.clock.now(), ...over });
}

function assertDpopRefused(r: Reply, what: string): void {
  assert.equal(r.status, 401, `${what}: ${r.text}`);
  assert.equal(r.body?.code, 'invalid_dpop_proof', what);
  assert.match(r.headers.get('www-authenticate') ?? '', /^DPoP error="invalid_dpop_proof"/, what);
}

describe('DPoP-bound refresh tokens on the management API (:refresh, the default)', () => {
  let h: Harness;
  let key: HarnessKey;
  before(async () => {
    h = await startHarness({ socket: false, store: 'memory', settings: REFRESH });
    key = (await enroll(h)).key;
  });
  after(() => h.close());

  /** A fresh session and proof that its untouched refresh token still rotates with the key. */
  async function session(): Promise<Pair> {
    return signIn(h, key);
  }
  async function assertStillRefreshes(pair: Pair, what: string): Promise<void> {
    const ok = await refreshWith(h, pair.refresh_token, proof(h, key));
    assert.equal(ok.status, 200, `${what}: the holder of the key still refreshes: ${ok.text}`);
    assert.equal(ok.body.session_id, pair.session_id);
  }

  test('copied refresh token used without the key: 401, the session is not revoked, its access token still works as a bearer', async () => {
    const pair = await session();
    assert.equal(pair.token_type, 'Bearer');
    assertDpopRefused(await refreshWith(h, pair.refresh_token), 'no proof at all');
    const me = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
    assert.equal(me.status, 200, 'the access token stays a bearer token under :refresh');
    const stored = await h.store.getSession(pair.session_id);
    assert.equal(stored?.revokedAt, null, 'not revoked');
    assert.equal(stored?.generation, 0, 'not rotated: the token was not used up');
    await assertStillRefreshes(pair, 'after the copied token was refused');
  });

  test('copied retired refresh token without the key cannot trigger reuse detection (no revocation)', async () => {
    const pair = await session();
    const rotated = await refreshWith(h, pair.refresh_token, proof(h, key));
    assert.equal(rotated.status, 200);
    h.clock.advance((h.deps.settings.refreshReuseGraceSeconds + 1) * 1000);
    assertDpopRefused(await refreshWith(h, pair.refresh_token), 'a retired token without a proof');
    assert.equal((await h.store.getSession(pair.session_id))?.revokedAt, null, 'the session lives on');
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: rotated.body.access_token })).status, 200);
  });

  test('replayed proof (same jti): 401', async () => {
    const pair = await session();
    const once = proof(h, key);
    const first = await refreshWith(h, pair.refresh_token, once);
    assert.equal(first.status, 200, first.text);
    assertDpopRefused(await refreshWith(h, first.body.refresh_token, once), 'the same proof again');
    await assertStillRefreshes(first.body as Pair, 'after the replay');
  });

  test('proof for another htu or htm: 401', async () => {
    const pair = await session();
    assertDpopRefused(await refreshWith(h, pair.refresh_token, proof(h, key, { htm: 'GET' })), 'htm GET');
    assertDpopRefused(await refreshWith(h, pair.refresh_token, proof(h, key, { htu: `${h.base}/v1/auth/me` })), 'htu of another path');
    assertDpopRefused(
      await refreshWith(h, pair.refresh_token, proof(h, key, { htu: 'https://elsewhere.example/v1/auth/refresh' })),
      'htu of another origin',
    );
    await assertStillRefreshes(pair, 'after the mismatched proofs');
  });

  test("proof by another enrolled device's key: 401", async () => {
    const pair = await session();
    const other = (await enroll(h)).key;
    assertDpopRefused(await refreshWith(h, pair.refresh_token, proof(h, other)), 'a proof by another enrolled key');
    await assertStillRefreshes(pair, 'after the other key was refused');
  });

  test('proof with alg other than EdDSA, a jwk with its private part d, or typ missing: 401', async () => {
    const pair = await session();
    assertDpopRefused(await refreshWith(h, pair.refresh_token, proof(h, key, { header: { alg: 'ES256' } })), 'alg ES256');
    assertDpopRefused(await refreshWith(h, pair.refresh_token, proof(h, key, { header: { alg: 'none' } })), 'alg none');
    const jwk = { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(key.publicKeyHex, 'hex').toString('base64url') };
    const d = Buffer.from(key.privateKey.export({ format: 'jwk' }).d as string, 'base64url').toString('base64url');
    assertDpopRefused(await refreshWith(h, pair.refresh_token, proof(h, key, { header: { jwk: { ...jwk, d } } })), 'jwk with d');
    assertDpopRefused(await refreshWith(h, pair.refresh_token, proof(h, key, { header: { typ: undefined } })), 'typ missing');
    assertDpopRefused(await refreshWith(h, pair.refresh_token, proof(h, key, { header: { typ: 'JWT' } })), 'typ JWT');
    await assertStillRefreshes(pair, 'after the malformed proofs');
  });

  test('stale proof (iat older than 60 s) or one dated more than 5 s ahead: 401', async () => {
    const pair = await session();
    assertDpopRefused(await refreshWith(h, pair.refresh_token, proof(h, key, { now: h.clock.now() - 61_000 })), 'iat 61 s old');
    assertDpopRefused(await refreshWith(h, pair.refresh_token, proof(h, key, { now: h.clock.now() + 7_000 })), 'iat 7 s ahead');
    await assertStillRefreshes(pair, 'after the stale proofs');
  });

  test('a proof that is not a JWS is 401, never a 400 or a 500', async () => {
    const pair = await session();
    for (const bad of ['x', 'a.b.c', `${'A'.repeat(5000)}`, 'e30.e30.']) {
      assertDpopRefused(await refreshWith(h, pair.refresh_token, bad), `proof ${JSON.stringify(bad.slice(0, 12))}`);
    }
  });
});

describe('bearer sessions keep working', () => {
  test('a session made under :off (as every session made before the binding) refreshes without a proof', async () => {
    const h = await startHarness({
      socket: false,
      store: 'memory',
      settings: { senderConstraint: { management: 'off', application: 'off' } },
    });
    try {
      const { key } = await enroll(h);
      const pair = await signIn(h, key);
      assert.equal((await h.store.getSession(pair.session_id))?.jkt ?? null, null);
      const r = await refreshWith(h, pair.refresh_token);
      assert.equal(r.status, 200, r.text);
    } finally {
      await h.close();
    }
  });
});

describe('DPoP-bound refresh tokens on the application gateway', () => {
  let h: GatewayHarness;
  before(async () => {
    h = await startGatewayHarness({ socket: false, store: 'memory', settings: REFRESH });
  });
  after(() => h.close());

  test('copied application refresh token used without the key: 401 at the gateway; with the key it rotates', async () => {
    const { key, pair } = await applicationUser(h);
    const htu = `${h.gatewayBase}/.svc/auth/v1/refresh`;
    const stolen = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: pair.refresh_token } });
    assertDpopRefused(stolen, 'no proof at the gateway');
    const other = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', {
      body: { refresh_token: pair.refresh_token },
      headers: { dpop: dpopProof(newDeviceKey(), { htm: 'POST', htu, now: h.clock.now() }) },
    });
    assertDpopRefused(other, 'a proof by a key of its own');
    const mgmtHtu = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', {
      body: { refresh_token: pair.refresh_token },
      headers: { dpop: dpopProof(key, { htm: 'POST', htu: `${h.base}/v1/auth/refresh`, now: h.clock.now() }) },
    });
    assertDpopRefused(mgmtHtu, "a proof made for the management API's refresh");
    const ok = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', {
      body: { refresh_token: pair.refresh_token },
      headers: { dpop: dpopProof(key, { htm: 'POST', htu, now: h.clock.now() }) },
    });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.session_id, pair.session_id);
  });
});

describe('DPoP-bound refresh tokens and the failure budget', () => {
  // A harness of its own: the flood spends this address's failure budget, which every other
  // test of the file would then meet.
  let h: Harness;
  let key: HarnessKey;
  before(async () => {
    h = await startHarness({ socket: false, store: 'memory', settings: REFRESH });
    key = (await enroll(h)).key;
  });
  after(() => h.close());

  test('stolen refresh token flood without the key: once the failure budget is spent, the holder of the key still refreshes', async () => {
    const pair = await signIn(h, key);
    const codes = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      const r = await refreshWith(h, pair.refresh_token);
      const code = String(r.body?.code);
      codes.set(code, (codes.get(code) ?? 0) + 1);
    }
    assert.ok((codes.get('rate_limited') ?? 0) > 0, `the flood reached the failure budget: ${JSON.stringify([...codes])}`);
    assert.deepEqual([...codes.keys()].sort(), ['invalid_dpop_proof', 'rate_limited'], 'every attempt without the key was refused');
    const ok = await refreshWith(h, pair.refresh_token, proof(h, key));
    assert.equal(ok.status, 200, `the holder of the key still refreshes after the flood: ${ok.text}`);
    assert.equal(ok.body.session_id, pair.session_id);
  });
});

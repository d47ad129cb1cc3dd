import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { authenticate, createChallenge, createSession, revokeSession, rotateRefreshToken, type TokenPairJson } from '@svc/core';
import { api, newDeviceKey } from './support/harness.js';
import { adminToken, completion, type NodeHarness, nodeApi, prepare, startNodeHarness } from './support/node-harness.js';

/** Every management endpoint that takes a bearer token, with a body where it needs one. */
const MANAGEMENT_BEARER_ENDPOINTS: readonly (readonly [string, string, unknown])[] = [
  ['GET', '/v1/auth/me', undefined],
  ['POST', '/v1/auth/revoke', {}],
  ['GET', '/v1/auth/audit', undefined],
  ['GET', '/v1/auth/devices', undefined],
  ['DELETE', '/v1/auth/devices/dev_01M81B5H80VQ6PF8VXZGD22NT9', undefined],
  ['GET', '/v1/auth/sessions', undefined],
];

const NODE_BEARER_ENDPOINTS: readonly (readonly [string, string, unknown])[] = [
  ['GET', '/edge/0-alpha/status', undefined],
  ['POST', '/edge/0-alpha/diagnostics', { nonce: 'realm-check-1' }],
  ['POST', '/edge/0-alpha/pairing/prepare', { realm: 'application', public_key: 'ab'.repeat(32) }],
];

describe('realms end to end: a device paired into the application realm', () => {
  let h: NodeHarness;
  let device: { id: string; subject: string; public_key: string };
  const key = newDeviceKey();
  let appPair: TokenPairJson;
  before(async () => {
    h = await startNodeHarness({ socket: false, store: 'memory' });
    const intent = await prepare(h, await adminToken(h), { realm: 'application', name: 'app client', public_key: key.publicKeyHex });
    const r = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, key) });
    assert.equal(r.status, 201);
    device = r.body.device;
  });
  after(() => h.close());

  test('obtains application-realm sessions through the core use cases on the same store', async () => {
    assert.equal((device as { realm?: string }).realm, 'application');
    const chl = await createChallenge(h.deps, { publicKey: key.publicKeyHex, realm: 'application' });
    assert.match(chl.challenge, / application chl_/);
    appPair = await createSession(h.deps, { challengeId: chl.id, signature: key.signHex(chl.challenge), realm: 'application' });
    assert.equal(appPair.realm, 'application');
    const principal = await authenticate(h.deps, { token: appPair.access_token, realm: 'application' });
    assert.deepEqual([principal.realm, principal.subject, principal.device], ['application', device.subject, device.id]);
    const rotated = await rotateRefreshToken(h.deps, { refreshToken: appPair.refresh_token, realm: 'application' });
    assert.equal(rotated.session_id, appPair.session_id);
    appPair = rotated;
  });

  test('the management API refuses that application key at sign-in with invalid_signature', async () => {
    const c = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: key.publicKeyHex } });
    assert.equal(c.status, 201, 'a challenge never reveals whether a key is enrolled');
    const s = await api(h, 'POST', '/v1/auth/sessions', {
      body: { challenge_id: c.body.challenge_id, signature: key.signHex(c.body.challenge) },
    });
    assert.equal(s.status, 401);
    assert.equal(s.body.code, 'invalid_signature');
    // Nor does a management challenge signed elsewhere become an application one: the realm is in the string.
    const mgmt = await createChallenge(h.deps, { publicKey: key.publicKeyHex, realm: 'management' });
    await assert.rejects(createSession(h.deps, { challengeId: mgmt.id, signature: key.signHex(mgmt.challenge), realm: 'management' }), {
      code: 'invalid_signature',
    });
  });

  test('an application-realm token is refused on EVERY management endpoint with invalid_token and realm="management"', async () => {
    for (const [method, path, body] of [...MANAGEMENT_BEARER_ENDPOINTS]) {
      const r = await api(h, method, path, { token: appPair.access_token, ...(body === undefined ? {} : { body }) });
      assert.equal(r.status, 401, `${method} ${path}`);
      assert.equal(r.body.code, 'invalid_token', `${method} ${path}`);
      assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="management", error="invalid_token"', `${method} ${path}`);
    }
    for (const [method, path, body] of NODE_BEARER_ENDPOINTS) {
      const r = await nodeApi(h, method, path, { token: appPair.access_token, ...(body === undefined ? {} : { body }) });
      assert.equal(r.status, 401, `${method} ${path}`);
      assert.equal(r.body.code, 'invalid_token', `${method} ${path}`);
      assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="management", error="invalid_token"', `${method} ${path}`);
    }
    // The application session is untouched by all those refusals.
    assert.equal((await authenticate(h.deps, { token: appPair.access_token, realm: 'application' })).session, appPair.session_id);
  });

  test('an application refresh token is refused by the management refresh endpoint and stays usable', async () => {
    const r = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: appPair.refresh_token } });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_refresh_token');
    appPair = await rotateRefreshToken(h.deps, { refreshToken: appPair.refresh_token, realm: 'application' });
    assert.equal(appPair.realm, 'application');
  });

  test('a management token is refused in the application realm, and revoking the application session ends it at once', async () => {
    const mgmtToken = await adminToken(h);
    await assert.rejects(authenticate(h.deps, { token: mgmtToken, realm: 'application' }), { code: 'invalid_token' });
    const principal = await authenticate(h.deps, { token: appPair.access_token, realm: 'application' });
    await revokeSession(h.deps, { principal });
    await assert.rejects(authenticate(h.deps, { token: appPair.access_token, realm: 'application' }), { code: 'invalid_token' });
  });
});

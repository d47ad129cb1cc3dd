import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { canonicalJson, clusterIdOf, createChallenge, createSession, type JsonValue } from '@svc/core';
import canonicalize from 'canonicalize';
import { admin, api, type DeviceKey, newDeviceKey, signIn } from '../support/harness.js';
import {
  adminToken,
  completion,
  type NodeHarness,
  nodeApi,
  prepare,
  scratch,
  startNodeHarness,
  TEST_COMPONENTS,
} from '../support/node-harness.js';

const SPKI_ED25519_PREFIX = '302a300506032b6570032100';

/** The PEM an outside party builds from the advertised 64-hex public key. */
function publicKeyPem(hex: string): string {
  const b64 = Buffer.from(SPKI_ED25519_PREFIX + hex, 'hex').toString('base64');
  return `-----BEGIN PUBLIC KEY-----\n${b64}\n-----END PUBLIC KEY-----\n`;
}

/** `openssl pkeyutl -verify` on files, as a third party would run it; resolves with its exit code. */
function opensslVerify(payload: string, publicKeyHex: string, signatureHex: string): Promise<{ code: number; out: string }> {
  const files = scratch();
  const pub = files.write('pub.pem', publicKeyPem(publicKeyHex));
  const msg = files.write('payload.json', Buffer.from(payload, 'utf8'));
  const sig = files.write('sig.bin', Buffer.from(signatureHex, 'hex'));
  return new Promise((resolve, reject) => {
    execFile('openssl', ['pkeyutl', '-verify', '-pubin', '-inkey', pub, '-rawin', '-in', msg, '-sigfile', sig], (error, stdout, stderr) => {
      files.cleanup();
      if (error !== null && typeof error.code !== 'number') reject(error);
      else resolve({ code: error === null ? 0 : (error.code as number), out: `${stdout}${stderr}` });
    });
  });
}

describe('node surface: status', () => {
  let h: NodeHarness;
  before(async () => {
    h = await startNodeHarness();
  });
  after(() => h.close());

  test('status with a management token lists the service, the store addon with its verification, providers and modules', async () => {
    const r = await nodeApi(h, 'GET', '/edge/0-alpha/status', { token: await adminToken(h) });
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, {
      node_id: h.identity.nodeId,
      cluster_id: clusterIdOf(h.deps.projectId),
      api_version: '0-alpha',
      checked_at: '2026-11-22T10:00:00.000Z',
      service: TEST_COMPONENTS.service,
      store_addon: TEST_COMPONENTS.store_addon,
      providers: [{ name: 'ed25519', kind: 'device-key', builtin: true, version: null }],
      modules: TEST_COMPONENTS.modules,
    });
  });

  test('status without a bearer token is 401 invalid_token with a bare management challenge', async () => {
    const r = await nodeApi(h, 'GET', '/edge/0-alpha/status');
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_token');
    assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="management"');
  });

  test('status with an expired, revoked or malformed token is 401 invalid_token', async () => {
    const { pair } = await admin(h);
    h.clock.advance(h.deps.settings.accessTokenTtlSeconds * 1000);
    const expired = await nodeApi(h, 'GET', '/edge/0-alpha/status', { token: pair.access_token });
    assert.equal(expired.body.code, 'invalid_token');
    assert.equal(expired.headers.get('www-authenticate'), 'Bearer realm="management", error="invalid_token"');
    const fresh = await adminToken(h);
    await api(h, 'POST', '/v1/auth/revoke', { token: fresh, body: {} });
    assert.equal((await nodeApi(h, 'GET', '/edge/0-alpha/status', { token: fresh })).body.code, 'invalid_token');
    assert.equal((await nodeApi(h, 'GET', '/edge/0-alpha/status', { token: 'svca_nope' })).body.code, 'invalid_token');
  });

  test('a store addon without a recorded verification is reported as null, not as verified', async () => {
    const h2 = await startNodeHarness({ components: () => ({ ...TEST_COMPONENTS, store_addon: null }) });
    try {
      const r = await nodeApi(h2, 'GET', '/edge/0-alpha/status', { token: await adminToken(h2) });
      assert.equal(r.status, 200);
      assert.equal(r.body.store_addon, null);
    } finally {
      await h2.close();
    }
  });
});

describe('node surface: signed diagnostics', () => {
  let h: NodeHarness;
  let token: string;
  let key: DeviceKey;
  before(async () => {
    h = await startNodeHarness();
    const a = await admin(h);
    token = a.pair.access_token;
    key = a.key;
  });
  after(() => h.close());

  test('diagnostics are aggregate counters with the nonce, the time and the node id, verified by openssl over RFC 8785 JSON', async () => {
    // Some history: a rotation, a revocation, a failed sign-in, a pairing with one wrong code.
    const second = await signIn(h, key);
    await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: second.refresh_token } });
    await api(h, 'POST', '/v1/auth/revoke', { token: (await signIn(h, key)).access_token, body: {} });
    const c = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: key.publicKeyHex } });
    await api(h, 'POST', '/v1/auth/sessions', {
      body: { challenge_id: c.body.challenge_id, signature: newDeviceKey().signHex(c.body.challenge) },
    });
    const intent = await prepare(h, token, { realm: 'application' });
    const device = intent.key;
    await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, device, { code: 'AAAA-AAAA' }) });
    assert.equal((await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, device) })).status, 201);

    const nonce = 'a1b2c3d4-nonce 0042';
    const r = await nodeApi(h, 'POST', '/edge/0-alpha/diagnostics', { token, body: { nonce } });
    assert.equal(r.status, 200);
    assert.deepEqual(Object.keys(r.body).sort(), [
      'alg',
      'canonicalization',
      'node_id',
      'payload',
      'previous_keys',
      'public_key',
      'signature',
    ]);
    assert.deepEqual(r.body.previous_keys, []);
    assert.equal(r.body.alg, 'Ed25519');
    assert.equal(r.body.canonicalization, 'RFC8785');
    assert.equal(r.body.public_key, h.identity.publicKeyHex);
    assert.equal(r.body.node_id, h.identity.nodeId);
    assert.match(r.body.signature, /^[0-9a-f]{128}$/);

    const stats = await h.store.stats(h.clock.now());
    const p = r.body.payload;
    assert.equal(p.type, 'svc-edge-diagnostics');
    assert.equal(p.api_version, '0-alpha');
    assert.equal(p.nonce, nonce);
    assert.equal(p.node_id, h.identity.nodeId);
    assert.equal(p.project_id, h.deps.projectId);
    assert.equal(p.generated_at, '2026-11-22T10:00:00.000Z');
    assert.deepEqual(p.devices, { management: 1, application: 1 });
    assert.deepEqual(p.active_sessions, { management: 2, application: 0 });
    assert.deepEqual(p.counters, {
      enrollments: 1,
      device_removals: 0,
      sign_ins: 3,
      sign_in_failures: 1,
      rotations: 1,
      grace_rotations: 0,
      refresh_reuses: 0,
      revocations: 1,
      bootstrap_tokens_issued: 1,
    });
    assert.deepEqual(p.pairing, { prepared: 1, completed: 1, failed: 1, burned: 0 });
    assert.deepEqual(p.audit, { length: stats.auditLength, head: stats.auditHead });

    // An outside party: canonicalise what it received, check with openssl.
    const canonical = canonicalize(p) as string;
    assert.equal(canonical, canonicalJson(p as JsonValue), 'two JCS implementations agree');
    const verified = await opensslVerify(canonical, r.body.public_key, r.body.signature);
    assert.equal(verified.code, 0, verified.out);
    assert.match(verified.out, /Signature Verified Successfully/);
  });

  test('a tampered diagnostics payload fails openssl verification', async () => {
    const r = await nodeApi(h, 'POST', '/edge/0-alpha/diagnostics', { token, body: { nonce: 'tamper-check-1' } });
    assert.equal(r.status, 200);
    const tampered = { ...r.body.payload, devices: { ...r.body.payload.devices, management: r.body.payload.devices.management + 1 } };
    const bad = await opensslVerify(canonicalize(tampered) as string, r.body.public_key, r.body.signature);
    assert.notEqual(bad.code, 0, bad.out);
    const otherNonce = await opensslVerify(
      canonicalize({ ...r.body.payload, nonce: 'tamper-check-2' }) as string,
      r.body.public_key,
      r.body.signature,
    );
    assert.notEqual(otherNonce.code, 0);
    // And the untampered one still verifies: the failure is the tampering, not the set-up.
    assert.equal((await opensslVerify(canonicalize(r.body.payload) as string, r.body.public_key, r.body.signature)).code, 0);
  });

  test('diagnostics never carry per-user data: no subject, device, session, intent id or device key', async () => {
    const { deviceId, key: k, pair } = await admin(h);
    const r = await nodeApi(h, 'POST', '/edge/0-alpha/diagnostics', { token, body: { nonce: 'privacy-0001' } });
    const text = JSON.stringify(r.body.payload);
    assert.doesNotMatch(text, /(sub|dev|ses|int|chl|evt)_[0-9A-Z]{26}/);
    for (const secret of [deviceId, k.publicKeyHex, pair.session_id, pair.access_token]) assert.equal(text.includes(secret), false);
  });

  test('the nonce must be 8 to 128 printable ASCII characters; anything else is 400 invalid_request', async () => {
    const bad: unknown[] = [
      {},
      { nonce: 'short' },
      { nonce: 'x'.repeat(129) },
      { nonce: 'tab\there-12' },
      { nonce: 'newline\n1234' },
      { nonce: 'ünïcödé-nonce' },
      { nonce: 12345678 },
      { nonce: 'valid-nonce', extra: 1 },
    ];
    for (const body of bad) {
      const r = await nodeApi(h, 'POST', '/edge/0-alpha/diagnostics', { token, body });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.code, 'invalid_request');
    }
    assert.equal((await nodeApi(h, 'POST', '/edge/0-alpha/diagnostics', { token, body: { nonce: 'x'.repeat(128) } })).status, 200);
    assert.equal((await nodeApi(h, 'POST', '/edge/0-alpha/diagnostics', { token, body: { nonce: '12345678' } })).status, 200);
  });

  test('diagnostics without a management token are 401 invalid_token, checked before the body', async () => {
    const none = await nodeApi(h, 'POST', '/edge/0-alpha/diagnostics', { body: { nonce: 'short' } });
    assert.equal(none.status, 401);
    assert.equal(none.body.code, 'invalid_token');
    assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="management"');
  });

  test('an application-realm token is refused on status and diagnostics with realm="management"', async () => {
    const appKey = newDeviceKey();
    const intent = await prepare(h, token, { realm: 'application', public_key: appKey.publicKeyHex });
    assert.equal((await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, appKey) })).status, 201);
    const chl = await createChallenge(h.deps, { publicKey: appKey.publicKeyHex, realm: 'application' });
    const appPair = await createSession(h.deps, { challengeId: chl.id, signature: appKey.signHex(chl.challenge), realm: 'application' });
    for (const [method, path, body] of [
      ['GET', '/edge/0-alpha/status', undefined],
      ['POST', '/edge/0-alpha/diagnostics', { nonce: 'realm-check' }],
    ] as const) {
      const r = await nodeApi(h, method, path, { token: appPair.access_token, ...(body === undefined ? {} : { body }) });
      assert.equal(r.status, 401, path);
      assert.equal(r.body.code, 'invalid_token', path);
      assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="management", error="invalid_token"', path);
    }
  });
});

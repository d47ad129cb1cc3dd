import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { clusterIdOf, pairingProofString } from '@svc/core';
import { api, newDeviceKey, signIn } from './support/harness.js';
import { adminToken, completion, type NodeHarness, nodeApi, prepare, startNodeHarness } from './support/node-harness.js';

const PREPARE = '/edge/0-alpha/pairing/prepare';
const COMPLETE = '/edge/0-alpha/pairing/complete';

async function auditTypes(h: NodeHarness): Promise<string[]> {
  return (await h.store.listAuditEvents({ afterSeq: 0, limit: 10_000 })).map((e) => e.type);
}

describe('node surface: pairing', () => {
  let h: NodeHarness;
  let token: string;
  before(async () => {
    // A high limit here: the rate limit has its own test below.
    h = await startNodeHarness({ socket: false, store: 'memory', pairingFailureLimit: { maxFailures: 1000 } });
    token = await adminToken(h);
  });
  after(() => h.close());

  test('prepare with a management token is 201 with the intent, a one-time code, its expiry and the node id', async () => {
    const device = newDeviceKey().publicKeyHex;
    const r = await nodeApi(h, 'POST', PREPARE, {
      token,
      body: { realm: 'application', name: 'kiosk', ttl_seconds: 300, public_key: device.toUpperCase() },
    });
    assert.equal(r.status, 201);
    assert.deepEqual(Object.keys(r.body).sort(), [
      'cluster_id',
      'code',
      'expires_at',
      'expires_in',
      'intent_id',
      'name',
      'node_id',
      'provider',
      'public_key',
      'realm',
      'subject',
    ]);
    assert.equal(r.body.public_key, device, 'the pinned key, normalised to lowercase');
    assert.match(r.body.intent_id, /^int_[0-9A-Z]{26}$/);
    assert.match(r.body.code, /^[0-9A-Z]{4}-[0-9A-Z]{4}$/);
    assert.match(r.body.subject, /^sub_/);
    assert.equal(r.body.realm, 'application');
    assert.equal(r.body.name, 'kiosk');
    assert.equal(r.body.expires_in, 300);
    assert.equal(r.body.expires_at, '2026-11-22T10:05:00.000Z');
    assert.equal(r.body.node_id, h.identity.nodeId);
    const prepared = (await h.store.listAuditEvents({ afterSeq: 0, limit: 10_000 })).filter((e) => e.type === 'pairing.prepared');
    assert.equal(prepared.at(-1)?.data.intent_id, r.body.intent_id);
    assert.equal(prepared.at(-1)?.data.public_key, device, 'the audit says which key the admin pinned');
    assert.doesNotMatch(JSON.stringify(prepared), new RegExp(r.body.code.replace('-', '-?')), 'the code is never audited');
  });

  test('prepare keeps a given subject, so a person can pair a second device to the same subject', async () => {
    const first = await prepare(h, token, { realm: 'application' });
    const again = await prepare(h, token, { realm: 'application', subject: first.subject });
    assert.equal(again.subject, first.subject);
  });

  test('prepare refuses a bad realm, subject, ttl or extra field with 400 invalid_request', async () => {
    for (const body of [
      { realm: 'admin' },
      {},
      { realm: 'application', subject: 'user-1' },
      { realm: 'application', ttl_seconds: 5 },
      { realm: 'application', ttl_seconds: 100_000 },
      { realm: 'application', ttl_seconds: 60.5 },
      { realm: 'application', ttl_seconds: '300' },
      { realm: 'application', extra: true },
    ]) {
      // A valid key in every body, so each is refused for the field it names.
      const r = await nodeApi(h, 'POST', PREPARE, { token, body: { public_key: newDeviceKey().publicKeyHex, ...body } });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.code, 'invalid_request', JSON.stringify(body));
    }
  });

  test('prepare without a bearer token is 401 invalid_token, checked before the body', async () => {
    const r = await nodeApi(h, 'POST', PREPARE, { body: { realm: 'nonsense' } });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_token');
    assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="management"');
  });

  test('complete with the code and a proof by the new key is 201 with the device, in the intent realm and subject', async () => {
    const intent = await prepare(h, token, { realm: 'management', name: 'second laptop' });
    const key = intent.key;
    const r = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, key) });
    assert.equal(r.status, 201);
    assert.deepEqual(Object.keys(r.body), ['device', 'prepared_by_node', 'completed_by_node', 'cluster_id']);
    // Prepared and completed on this one node: both name it.
    assert.equal(r.body.prepared_by_node, h.identity.nodeId);
    assert.equal(r.body.completed_by_node, h.identity.nodeId);
    assert.equal(r.body.cluster_id, clusterIdOf(h.deps.projectId));
    assert.match(r.body.device.id, /^dev_/);
    assert.equal(r.body.device.public_key, key.publicKeyHex);
    assert.equal(r.body.device.realm, 'management');
    assert.equal(r.body.device.subject, intent.subject);
    assert.equal(r.body.device.name, 'second laptop');
    assert.equal((await auditTypes(h)).at(-1), 'pairing.completed');
    // The paired management device signs in to the management API.
    const pair = await signIn(h, key);
    const me = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
    assert.equal(me.body.device, r.body.device.id);
    assert.equal(me.body.realm, 'management');
  });

  test('the code is typed loosely: case, spaces and missing dash do not matter', async () => {
    const intent = await prepare(h, token, { realm: 'application' });
    const loose = ` ${intent.code.toLowerCase().replace('-', ' ')} `;
    const r = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key, { code: loose, name: 'phone' }) });
    assert.equal(r.status, 201);
    assert.equal(r.body.device.name, 'phone');
  });

  test('a wrong code is 401 invalid_pairing_code and audited as pairing.failed', async () => {
    const intent = await prepare(h, token, { realm: 'application' });
    const wrong = intent.code === 'AAAA-AAAA' ? 'BBBB-BBBB' : 'AAAA-AAAA';
    const r = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key, { code: wrong }) });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_pairing_code');
    assert.equal((await auditTypes(h)).at(-1), 'pairing.failed');
    // One wrong code does not spoil the intent.
    assert.equal((await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key) })).status, 201);
  });

  test('a leaked code with the attacker’s own key is 401 invalid_pairing_code, counted, and enrolls nothing', async () => {
    const intent = await prepare(h, token, { realm: 'management' });
    const attacker = newDeviceKey();
    const r = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, attacker) });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_pairing_code');
    assert.equal(await h.store.findDeviceByPublicKey(attacker.publicKeyHex), null);
    assert.equal((await h.store.getPairingIntent(intent.intent_id))?.failures, 1);
    assert.equal((await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key) })).status, 201);
  });

  test('prepare without the new device’s public_key, or with a malformed one, is 400 invalid_request', async () => {
    for (const body of [{ realm: 'application' }, { realm: 'application', public_key: 'xyz' }]) {
      const r = await nodeApi(h, 'POST', PREPARE, { token, body });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.code, 'invalid_request');
    }
  });

  test('5 wrong codes burn the intent: then even the right code is invalid_pairing_intent', async () => {
    const intent = await prepare(h, token, { realm: 'application' });
    const wrong = intent.code === 'AAAA-AAAA' ? 'BBBB-BBBB' : 'AAAA-AAAA';
    for (let i = 1; i <= 5; i++) {
      const r = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key, { code: wrong }) });
      assert.equal(r.body.code, 'invalid_pairing_code', `attempt ${i}`);
    }
    assert.equal((await auditTypes(h)).at(-1), 'pairing.burned');
    const right = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key) });
    assert.equal(right.status, 401);
    assert.equal(right.body.code, 'invalid_pairing_intent');
  });

  test('an expired intent is invalid_pairing_intent', async () => {
    const intent = await prepare(h, token, { realm: 'application', ttl_seconds: 60 });
    h.clock.advance(60_000);
    const r = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key) });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_pairing_intent');
    token = await adminToken(h);
  });

  test('a replayed completion is invalid_pairing_intent: an intent enrolls one device, once', async () => {
    const intent = await prepare(h, token, { realm: 'application' });
    const body = completion(h, intent, intent.key);
    assert.equal((await nodeApi(h, 'POST', COMPLETE, { body })).status, 201);
    const replay = await nodeApi(h, 'POST', COMPLETE, { body });
    assert.equal(replay.status, 401);
    assert.equal(replay.body.code, 'invalid_pairing_intent');
    const other = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key) });
    assert.equal(other.body.code, 'invalid_pairing_intent');
  });

  test('an unknown or malformed intent id is invalid_pairing_intent', async () => {
    const key = newDeviceKey();
    for (const id of ['int_01M81B5H80VQ6PF8VXZGD22NT1', 'nonsense']) {
      const r = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, { intent_id: id, code: 'AAAA-AAAA' }, key) });
      assert.equal(r.status, 401, id);
      assert.equal(r.body.code, 'invalid_pairing_intent', id);
    }
  });

  test('a signature by another key is answered as a wrong code, counted, and enrolls nothing', async () => {
    const intent = await prepare(h, token, { realm: 'application' });
    const key = intent.key;
    const r = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, key, { signer: newDeviceKey() }) });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_pairing_code');
    assert.equal(await h.store.findDeviceByPublicKey(key.publicKeyHex), null);
    assert.equal((await h.store.getPairingIntent(intent.intent_id))?.failures, 1);
  });

  test('pairing-code oracle: the right code with a bad signature x5 burns the intent, each answer byte-identical to a wrong code', async () => {
    const probed = await prepare(h, token, { realm: 'application' });
    const control = await prepare(h, token, { realm: 'application' });
    const wrong = (code: string) => (code === 'AAAA-AAAA' ? 'BBBB-BBBB' : 'AAAA-AAAA');
    for (let i = 1; i <= 5; i++) {
      const rightCodeBadSig = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, probed, probed.key, { signer: newDeviceKey() }) });
      const wrongCode = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, control, control.key, { code: wrong(control.code) }) });
      assert.equal(rightCodeBadSig.status, wrongCode.status, `attempt ${i}: status`);
      assert.equal(rightCodeBadSig.headers.get('content-type'), wrongCode.headers.get('content-type'), `attempt ${i}: type`);
      assert.equal(JSON.stringify(rightCodeBadSig.body), JSON.stringify(wrongCode.body), `attempt ${i}: body`);
      assert.equal(rightCodeBadSig.body.code, 'invalid_pairing_code', `attempt ${i}`);
    }
    assert.equal((await h.store.getPairingIntent(probed.intent_id))?.burnedAt !== null, true, 'five bad proofs burned the intent');
    const right = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, probed, probed.key) });
    assert.equal(right.body.code, 'invalid_pairing_intent', 'even the right code and proof are refused once burned');
    assert.equal(await h.store.findDeviceByPublicKey(probed.key.publicKeyHex), null);
  });

  test('a proof made for another node id is answered as a wrong code: a relayed proof is useless elsewhere', async () => {
    const intent = await prepare(h, token, { realm: 'application' });
    const key = intent.key;
    const elsewhere = '0000-0000-0000-0000-0000-0000-0000-0000-0';
    const r = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, key, { nodeId: elsewhere }) });
    assert.equal(r.body.code, 'invalid_pairing_code');
    assert.equal(
      pairingProofString({ nodeId: h.identity.nodeId, intentId: intent.intent_id, publicKey: key.publicKeyHex }),
      `svc-auth-v1 pairing ${h.identity.nodeId} ${intent.intent_id} ${key.publicKeyHex}`,
    );
  });

  test('pairing a key that is already enrolled is 409 already_enrolled and leaves the intent usable', async () => {
    const first = await prepare(h, token, { realm: 'application' });
    const key = first.key;
    assert.equal((await nodeApi(h, 'POST', COMPLETE, { body: completion(h, first, key) })).status, 201);
    const second = await prepare(h, token, { realm: 'application', public_key: key.publicKeyHex });
    const dup = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, second, key) });
    assert.equal(dup.status, 409);
    assert.equal(dup.body.code, 'already_enrolled');
    const live = await h.store.getPairingIntent(second.intent_id);
    assert.equal(live?.completedAt, null);
    assert.equal(live?.failures, 0);
  });

  test('malformed completion bodies are 400 invalid_request', async () => {
    const intent = await prepare(h, token, { realm: 'application' });
    const good = completion(h, intent, intent.key);
    for (const body of [
      { ...good, public_key: 'zz' },
      { ...good, signature: 'ab'.repeat(63) },
      { ...good, extra: 1 },
      { intent_id: good.intent_id, code: good.code, public_key: good.public_key },
      { ...good, code: '' },
    ]) {
      const r = await nodeApi(h, 'POST', COMPLETE, { body });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.code, 'invalid_request');
    }
  });

  test('of 20 simultaneous completions of one intent, exactly one is 201', async () => {
    const intent = await prepare(h, token, { realm: 'application' });
    const replies = await Promise.all(
      Array.from({ length: 20 }, () => nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key) })),
    );
    const statuses = replies.map((r) => r.status);
    assert.equal(statuses.filter((s) => s === 201).length, 1, statuses.join(','));
    for (const r of replies.filter((x) => x.status !== 201)) {
      assert.equal(r.status, 401);
      assert.equal(r.body.code, 'invalid_pairing_intent');
    }
    const completed = (await h.store.listAuditEvents({ afterSeq: 0, limit: 10_000 })).filter(
      (e) => e.type === 'pairing.completed' && e.data.intent_id === intent.intent_id,
    );
    assert.equal(completed.length, 1);
  });
});

describe('node surface: pairing rate limit', () => {
  let h: NodeHarness;
  before(async () => {
    h = await startNodeHarness({ socket: false, store: 'memory', pairingFailureLimit: { maxFailures: 3, windowSeconds: 60 } });
  });
  after(() => h.close());

  test('failed completions are counted per client: over the limit a failure is 429 rate_limited with Retry-After, until the window ends; the right code still completes', async () => {
    const token = await adminToken(h);
    const intent = await prepare(h, token, { realm: 'application' });
    const wrong = intent.code === 'AAAA-AAAA' ? 'BBBB-BBBB' : 'AAAA-AAAA';
    for (let i = 0; i < 3; i++) {
      const r = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key, { code: wrong }) });
      assert.equal(r.body.code, 'invalid_pairing_code');
    }
    h.clock.advance(10_000);
    const other = await prepare(h, token, { realm: 'application' });
    const limited = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, other, other.key, { code: wrong }) });
    assert.equal(limited.status, 429);
    assert.equal(limited.body.code, 'rate_limited');
    assert.equal(limited.headers.get('retry-after'), '50');
    // The budget bounds failures, not proofs: the right code and proof still complete.
    assert.equal((await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key) })).status, 201);
    h.clock.advance(50_000);
    assert.equal(
      (await nodeApi(h, 'POST', COMPLETE, { body: completion(h, other, other.key, { code: wrong }) })).body.code,
      'invalid_pairing_code',
      'a new window',
    );
    const fresh = await prepare(h, await adminToken(h), { realm: 'application' });
    assert.equal((await nodeApi(h, 'POST', COMPLETE, { body: completion(h, fresh, fresh.key) })).status, 201);
  });

  test('pairing-audit-flood-beyond-budget: failed completions past the budget are 429, write no audit event and are not counted', async () => {
    h.clock.advance(120_000);
    const token = await adminToken(h);
    const intent = await prepare(h, token, { realm: 'application' });
    const wrong = intent.code === 'AAAA-AAAA' ? 'BBBB-BBBB' : 'AAAA-AAAA';
    const failedEvents = async () => (await auditTypes(h)).filter((t) => t === 'pairing.failed' || t === 'pairing.burned').length;
    const before = await failedEvents();
    for (let i = 0; i < 3; i++) {
      const r = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key, { code: wrong }) });
      assert.equal(r.body.code, 'invalid_pairing_code', `attempt ${i + 1} is within the budget`);
    }
    assert.equal(await failedEvents(), before + 3, 'the failures within the budget are audited');
    const other = await prepare(h, token, { realm: 'application' });
    for (let i = 0; i < 8; i++) {
      const r = await nodeApi(h, 'POST', COMPLETE, { body: completion(h, other, other.key, { code: wrong }) });
      assert.equal(r.status, 429, `attempt ${i + 1} past the budget`);
      assert.equal(r.body.code, 'rate_limited');
    }
    assert.equal(await failedEvents(), before + 3, 'no pairing.failed (or pairing.burned) event past the budget');
    // Uncounted: 8 wrong codes past the budget did not burn the other intent (5 would).
    assert.equal((await nodeApi(h, 'POST', COMPLETE, { body: completion(h, other, other.key) })).status, 201);
  });

  test('invalid input (400) is not counted as a failed completion', async () => {
    h.clock.advance(120_000);
    for (let i = 0; i < 10; i++) {
      const r = await nodeApi(h, 'POST', COMPLETE, { body: { intent_id: 'x' } });
      assert.equal(r.body.code, 'invalid_request');
    }
    const token = await adminToken(h);
    const intent = await prepare(h, token, { realm: 'application' });
    assert.equal((await nodeApi(h, 'POST', COMPLETE, { body: completion(h, intent, intent.key) })).status, 201);
  });
});

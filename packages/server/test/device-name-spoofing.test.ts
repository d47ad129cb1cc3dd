import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { api, bootstrapToken, newDeviceKey } from './support/harness.js';
import { adminToken, completion, type NodeHarness, nodeApi, prepare, startNodeHarness } from './support/node-harness.js';

/**
 * Names an attacker would give a device to spoof another in an operator's listing or to write
 * into the operator's terminal: a right-to-left override, a bidi isolate, a left-to-right
 * mark, an Arabic letter mark, a C1 CSI, DEL and a line separator.
 */
const SPOOFING_NAMES = [
  'invoice\u202egpj.exe',
  'lap\u2066top\u2069',
  'admin\u200e',
  'admin\u061c',
  'lap\u009b2Jtop',
  'lap\u007ftop',
  'admin\u2028fake',
];

describe('device names with bidi overrides or control characters are refused at every door', () => {
  let h: NodeHarness;
  let token: string;
  before(async () => {
    h = await startNodeHarness({ socket: false, store: 'memory', pairingFailureLimit: { maxFailures: 1000 } });
    token = await adminToken(h);
  });
  after(() => h.close());

  test('a device name with a bidi override is refused at enrollment with 400 invalid_request, and the token stays usable', async () => {
    const bootstrap = await bootstrapToken(h);
    const key = newDeviceKey();
    for (const name of SPOOFING_NAMES) {
      const r = await api(h, 'POST', '/v1/auth/enroll', { body: { bootstrap_token: bootstrap, public_key: key.publicKeyHex, name } });
      assert.equal(r.status, 400, JSON.stringify(name));
      assert.equal(r.body.code, 'invalid_request');
    }
    const ok = await api(h, 'POST', '/v1/auth/enroll', {
      body: { bootstrap_token: bootstrap, public_key: key.publicKeyHex, name: 'laptop ünïcode 日本' },
    });
    assert.equal(ok.status, 201);
  });

  test('a device name with a bidi override is refused when a pairing is prepared', async () => {
    for (const name of SPOOFING_NAMES) {
      const r = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/prepare', { token, body: { realm: 'application', name } });
      assert.equal(r.status, 400, JSON.stringify(name));
      assert.equal(r.body.code, 'invalid_request');
    }
  });

  test('a device name with a bidi override is refused when a pairing is completed, and the intent stays usable', async () => {
    const intent = await prepare(h, token, { realm: 'application' });
    const key = intent.key;
    for (const name of SPOOFING_NAMES) {
      const r = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, key, { name }) });
      assert.equal(r.status, 400, JSON.stringify(name));
      assert.equal(r.body.code, 'invalid_request');
    }
    const ok = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, key, { name: 'kiosk' }) });
    assert.equal(ok.status, 201);
  });
});

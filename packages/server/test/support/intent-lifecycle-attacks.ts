// Attacks on users' lifecycle through pairing intents, over HTTP, for a store kind: a disabled
// admin's own intent, and a removed user's intent, must enroll nothing. Run on the memory store
// (fast tier: intent-lifecycle-attacks.test.ts) and on SQLite (real tier).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { applicationSignIn, applicationUser, echoAttach, type GatewayHarness, gatewayApi, startGatewayHarness } from './gateway-harness.js';
import { admin, api, enroll, signIn } from './harness.js';
import { adminToken, completion, nodeApi, prepare } from './node-harness.js';

export function intentLifecycleAttacks(store: 'memory' | 'sqlite'): void {
  describe(`attacks through pairing intents on disabled and removed users (${store} store)`, () => {
    let h: GatewayHarness;
    let mgmtToken: string;
    before(async () => {
      h = await startGatewayHarness({ socket: false, store, attach: echoAttach });
      mgmtToken = (await admin(h)).pair.access_token;
    });
    after(async () => {
      await h?.close();
    });

    test('a removed user does not come back through a pairing intent an admin prepared for them before the removal', async () => {
      const u = await applicationUser(h);
      const subject = (await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: u.pair.access_token })).body.subject;
      // The admin prepares a second device for that user (a new laptop) ...
      const intent = await prepare(h, await adminToken(h), { realm: 'application', subject });
      // ... then the person leaves: the user is removed.
      const removed = await api(h, 'DELETE', `/v1/auth/users/${subject}`, { token: mgmtToken });
      assert.equal(removed.status, 200, removed.text);
      assert.equal(removed.body.removed, true);
      // The departed person still holds the code and the key.
      const paired = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, intent.key) });
      assert.equal(paired.status, 401, paired.text);
      assert.equal(paired.body.code, 'invalid_pairing_intent');
      assert.equal((await api(h, 'GET', `/v1/auth/users/${subject}`, { token: mgmtToken })).status, 404, 'the user is not recreated');
      await assert.rejects(applicationSignIn(h, intent.key), /sign-in failed|challenge failed/, 'the key signs nothing in');
      // Nor can an admin prepare a new intent naming the removed subject.
      const named = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/prepare', {
        token: mgmtToken,
        body: { realm: 'application', subject, public_key: intent.key.publicKeyHex },
      });
      assert.equal(named.status, 404, named.text);
    });

    test("a disabled admin's own pairing intent, prepared before the disable, enrolls no management device", async () => {
      const a = await admin(h);
      const b = await enroll(h);
      const bPair = await signIn(h, b.key);
      const aSubject = (await api(h, 'GET', '/v1/auth/me', { token: a.pair.access_token })).body.subject;
      // A, about to be fired (or an attacker holding A's session), prepares an intent for a new
      // management subject with a key A holds.
      const intent = await prepare(h, a.pair.access_token, { realm: 'management' });
      const disabled = await api(h, 'POST', `/v1/auth/users/${aSubject}/disable`, { token: bPair.access_token });
      assert.equal(disabled.status, 200, disabled.text);
      assert.equal((await api(h, 'GET', '/v1/auth/me', { token: a.pair.access_token })).status, 401);
      const paired = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, intent.key) });
      assert.equal(paired.status, 401, paired.text);
      assert.equal(paired.body.code, 'invalid_pairing_intent');
      // Enabled again, A's old intent stays burned.
      const enabled = await api(h, 'POST', `/v1/auth/users/${aSubject}/enable`, { token: bPair.access_token });
      assert.equal(enabled.status, 200, enabled.text);
      const again = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, intent.key) });
      assert.equal(again.status, 401, again.text);
    });
  });
}

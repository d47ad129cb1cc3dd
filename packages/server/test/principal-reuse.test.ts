import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { authenticate, createChallenge, createSession, rotateRefreshToken, type TokenPairJson, updateUser } from '@svc/core';
import { newDeviceKey } from './support/harness.js';
import { adminToken, completion, type NodeHarness, nodeApi, prepare, startNodeHarness } from './support/node-harness.js';

// The memory store, like PostgreSQL, reads every bearer check's session as a new record: these
// tests hold `authenticate` to its rule that an unchanged session gives back the same principal
// and that any change the principal shows gives a new one, at once.
describe('the principal of an unchanged session is reused; any change it shows makes a new one', () => {
  let h: NodeHarness;
  let subject: string;
  let pair: TokenPairJson;
  const key = newDeviceKey();
  const check = (token: string) => authenticate(h.deps, { token, realm: 'application' });

  before(async () => {
    h = await startNodeHarness({ socket: false, store: 'memory' });
    const intent = await prepare(h, await adminToken(h), { realm: 'application', name: 'app client', public_key: key.publicKeyHex });
    const r = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, key) });
    assert.equal(r.status, 201);
    subject = r.body.device.subject;
    const chl = await createChallenge(h.deps, { publicKey: key.publicKeyHex, realm: 'application' });
    pair = await createSession(h.deps, { challengeId: chl.id, signature: key.signHex(chl.challenge), realm: 'application' });
  });
  after(() => h.close());

  test('two checks of one unchanged session give the same frozen principal', async () => {
    const first = await check(pair.access_token);
    const second = await check(pair.access_token);
    assert.equal(second, first);
    assert.ok(Object.isFrozen(first) && Object.isFrozen(first.claims));
    assert.equal(first.session, pair.session_id);
  });

  test("a change of the user's attributes shows on the next check", async () => {
    const before = await check(pair.access_token);
    assert.equal(before.claims.name, undefined);
    await updateUser(h.deps, {
      subject,
      attributes: { name: 'Ada Lovelace', email: 'ada@example.com', email_verified: true, groups: ['ops'] },
      actor: { via: 'cli', subject: null, session: null },
      source: 'operator',
    });
    const after = await check(pair.access_token);
    assert.notEqual(after, before);
    assert.deepEqual(
      [after.claims.name, after.claims.email, after.claims.email_verified, after.claims.groups],
      ['Ada Lovelace', 'ada@example.com', true, ['ops']],
    );
    await updateUser(h.deps, {
      subject,
      attributes: { groups: ['ops', 'admins'] },
      actor: { via: 'cli', subject: null, session: null },
      source: 'operator',
    });
    const regrouped = await check(pair.access_token);
    assert.notEqual(regrouped, after);
    assert.deepEqual(regrouped.claims.groups, ['admins', 'ops']);
    assert.equal(await check(pair.access_token), regrouped, 'and is reused again while nothing changes');
  });

  test("a rotation's new access token gets a principal with its own expiry; the old one is refused", async () => {
    const before = await check(pair.access_token);
    h.clock.advance(5_000);
    const rotated = await rotateRefreshToken(h.deps, { refreshToken: pair.refresh_token, realm: 'application' });
    await assert.rejects(check(pair.access_token), { code: 'invalid_token' });
    const after = await check(rotated.access_token);
    assert.notEqual(after, before);
    assert.equal(after.session, before.session);
    assert.ok(Date.parse(after.claims.exp) > Date.parse(before.claims.exp), `${after.claims.exp} is later than ${before.claims.exp}`);
    pair = rotated;
  });
});

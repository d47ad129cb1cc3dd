import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  applicationSignIn,
  applicationUser,
  echoAttach,
  type GatewayHarness,
  gatewayApi,
  startGatewayHarness,
} from './support/gateway-harness.js';
import { admin, api, type Pair } from './support/harness.js';
import { completion, nodeApi, prepare } from './support/node-harness.js';

describe('application users: self-service at the gateway and disabled users', () => {
  let h: GatewayHarness;
  let mgmt: Pair;
  before(async () => {
    h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach });
    mgmt = (await admin(h)).pair;
  });
  after(() => h.close());

  const subjectOf = async (pair: Pair): Promise<string> =>
    (await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: pair.access_token })).body.subject;

  test("an application principal lists its own sessions and devices, and signs out everywhere else; never another user's", async () => {
    const ada = await applicationUser(h);
    h.clock.advance(1000);
    const laptop = await applicationSignIn(h, ada.key);
    const bob = await applicationUser(h);

    for (const path of ['/.svc/auth/v1/sessions', '/.svc/auth/v1/sessions?mine']) {
      const r = await gatewayApi(h, 'GET', path, { token: laptop.access_token });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(
        r.body.sessions.map((s: { id: string }) => s.id),
        [laptop.session_id, ada.pair.session_id],
      );
    }
    const devices = await gatewayApi(h, 'GET', '/.svc/auth/v1/devices', { token: laptop.access_token });
    assert.equal(devices.status, 200);
    assert.deepEqual(
      devices.body.devices.map((d: { id: string }) => d.id),
      [ada.deviceId],
    );
    assert.equal((await gatewayApi(h, 'GET', '/.svc/auth/v1/sessions?realm=management', { token: laptop.access_token })).status, 400);

    const revoked = await gatewayApi(h, 'POST', '/.svc/auth/v1/sessions/revoke-others', { token: laptop.access_token, body: {} });
    assert.equal(revoked.status, 200, revoked.text);
    assert.deepEqual(revoked.body, { revoked: [ada.pair.session_id] });
    assert.equal((await gatewayApi(h, 'GET', '/app/x', { token: laptop.access_token })).status, 200, 'the caller stays signed in');
    assert.equal((await gatewayApi(h, 'GET', '/app/x', { token: ada.pair.access_token })).status, 401, 'the other session is gone');
    assert.equal(
      (await gatewayApi(h, 'GET', '/app/x', { token: bob.pair.access_token })).status,
      200,
      "another user's session is untouched",
    );
  });

  test('a management token, or none, opens no application self-service route (401 invalid_token)', async () => {
    for (const [method, path] of [
      ['GET', '/.svc/auth/v1/sessions'],
      ['GET', '/.svc/auth/v1/devices'],
      ['POST', '/.svc/auth/v1/sessions/revoke-others'],
    ] as const) {
      for (const token of [undefined, mgmt.access_token]) {
        const r = await gatewayApi(h, method, path, {
          ...(token === undefined ? {} : { token }),
          ...(method === 'POST' ? { body: {} } : {}),
        });
        assert.equal(r.status, 401, `${method} ${path}`);
        assert.equal(r.body.code, 'invalid_token');
      }
    }
  });

  test("a disabled user's stolen application token is refused at once at the gateway; its device, and a pairing for it, are refused 403 user_disabled", async () => {
    const eve = await applicationUser(h);
    const subject = await subjectOf(eve.pair);
    // An intent to pair one more device for the same user, prepared before the disable.
    const intent = await prepare(h, mgmt.access_token, { realm: 'application', subject });

    const disabled = await api(h, 'POST', `/v1/auth/users/${subject}/disable`, { token: mgmt.access_token });
    assert.equal(disabled.status, 200, disabled.text);
    assert.equal(disabled.body.revoked_sessions, 1);

    const stolen = await gatewayApi(h, 'GET', '/app/x', { token: eve.pair.access_token });
    assert.equal(stolen.status, 401);
    assert.equal(stolen.body.code, 'invalid_token');
    assert.equal((await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: eve.pair.access_token })).status, 401);

    const c = await gatewayApi(h, 'POST', '/.svc/auth/v1/challenges', { body: { public_key: eve.key.publicKeyHex } });
    const signIn = await gatewayApi(h, 'POST', '/.svc/auth/v1/sessions', {
      body: { challenge_id: c.body.challenge_id, signature: eve.key.signHex(c.body.challenge) },
    });
    assert.equal(signIn.status, 403);
    assert.equal(signIn.body.code, 'user_disabled');

    const paired = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, intent.key) });
    assert.equal(paired.status, 403, paired.text);
    assert.equal(paired.body.code, 'user_disabled');

    const enabled = await api(h, 'POST', `/v1/auth/users/${subject}/enable`, { token: mgmt.access_token });
    assert.equal(enabled.status, 200);
    assert.equal((await gatewayApi(h, 'GET', '/app/x', { token: eve.pair.access_token })).status, 401, 'enabling restores no session');
    const back = await applicationSignIn(h, eve.key);
    assert.equal((await gatewayApi(h, 'GET', '/app/x', { token: back.access_token })).status, 200, 'sign-in works again');
    const later = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, intent.key) });
    assert.equal(later.status, 201, `the intent stayed live: ${later.text}`);
  });

  test('an operator adds an application user first and pairs a device to it: the device signs in as that subject', async () => {
    const added = await api(h, 'POST', '/v1/auth/users', { token: mgmt.access_token, body: { realm: 'application', name: 'Grace' } });
    assert.equal(added.status, 201);
    const subject = added.body.user.subject;
    const intent = await prepare(h, mgmt.access_token, { realm: 'application', subject });
    const paired = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, intent.key) });
    assert.equal(paired.status, 201, paired.text);
    const pair = await applicationSignIn(h, intent.key);
    assert.equal(await subjectOf(pair), subject);
  });
});

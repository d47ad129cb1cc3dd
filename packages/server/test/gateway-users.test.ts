import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { openSqliteStore } from 'svc-store-sqlite';
import {
  applicationSignIn,
  applicationUser,
  echoAttach,
  type GatewayHarness,
  type GatewayTarget,
  gatewayApi,
  startGateway,
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
    for (const [method, path, body] of [
      ['GET', '/.svc/auth/v1/sessions?realm=management'],
      ['GET', '/.svc/auth/v1/devices?subject=sub_x'],
      ['POST', '/.svc/auth/v1/sessions/revoke-others', { all: true }],
    ] as [string, string, unknown?][]) {
      const r = await gatewayApi(h, method, path, { token: laptop.access_token, ...(body === undefined ? {} : { body }) });
      assert.equal(r.status, 400, `${method} ${path}`);
      assert.equal(r.body.code, 'invalid_request');
    }

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

  test("a disabled user's stolen application token is refused at once at the gateway; its device, and a pairing for it, are refused 403 user_disabled; an intent prepared before the disable is burned by it", async () => {
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

    // The disable burned the intent prepared before it: it never completes, enabled or not.
    const burned = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, intent.key) });
    assert.equal(burned.status, 401, burned.text);
    assert.equal(burned.body.code, 'invalid_pairing_intent');
    // One prepared while the user is disabled is refused as long as it is.
    const whileDisabled = await prepare(h, mgmt.access_token, { realm: 'application', subject });
    const paired = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', {
      body: completion(h, whileDisabled, whileDisabled.key),
    });
    assert.equal(paired.status, 403, paired.text);
    assert.equal(paired.body.code, 'user_disabled');

    const enabled = await api(h, 'POST', `/v1/auth/users/${subject}/enable`, { token: mgmt.access_token });
    assert.equal(enabled.status, 200);
    assert.equal((await gatewayApi(h, 'GET', '/app/x', { token: eve.pair.access_token })).status, 401, 'enabling restores no session');
    const back = await applicationSignIn(h, eve.key);
    assert.equal((await gatewayApi(h, 'GET', '/app/x', { token: back.access_token })).status, 200, 'sign-in works again');
    const stale = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, intent.key) });
    assert.equal(stale.status, 401, `the intent burned by the disable stays burned: ${stale.text}`);
    const later = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', {
      body: completion(h, whileDisabled, whileDisabled.key),
    });
    assert.equal(later.status, 201, `the intent refused while disabled stayed live: ${later.text}`);
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

describe('a disable reaches another process sharing the SQLite store at once', () => {
  let h: GatewayHarness;
  let mgmt: Pair;
  /** A second gateway over its own connection to the same SQLite file (as another process would have). */
  let other: GatewayTarget & { close(): Promise<void> };
  before(async () => {
    h = await startGatewayHarness({ socket: false, attach: echoAttach });
    mgmt = (await admin(h)).pair;
    const store = await openSqliteStore({ file: join(h.dir, 'control.db') });
    const g = await startGateway({ deps: { ...h.deps, store, random: (n) => randomBytes(n) } }, { socket: false, attach: echoAttach });
    other = {
      gatewayBase: g.base,
      gateway: g.app,
      injected: g.injected,
      async close() {
        await g.app.close();
        await store.close();
      },
    };
  });
  after(async () => {
    await other?.close();
    await h?.close();
  });

  test("a disabled user's stolen token, just used on the other gateway (cached there), is refused by it on the very next request", async () => {
    const victim = await applicationUser(h);
    assert.equal((await gatewayApi(other, 'GET', '/app/x', { token: victim.pair.access_token })).status, 200, 'warm: accepted before');
    const subject = (await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: victim.pair.access_token })).body.subject;
    const disabled = await api(h, 'POST', `/v1/auth/users/${subject}/disable`, { token: mgmt.access_token });
    assert.equal(disabled.status, 200, disabled.text);
    for (const target of [h, other]) {
      const r = await gatewayApi(target, 'GET', '/app/x', { token: victim.pair.access_token });
      assert.equal(r.status, 401);
      assert.equal(r.body.code, 'invalid_token');
    }
    const c = await gatewayApi(other, 'POST', '/.svc/auth/v1/challenges', { body: { public_key: victim.key.publicKeyHex } });
    const s = await gatewayApi(other, 'POST', '/.svc/auth/v1/sessions', {
      body: { challenge_id: c.body.challenge_id, signature: victim.key.signHex(c.body.challenge) },
    });
    assert.equal(s.status, 403);
    assert.equal(s.body.code, 'user_disabled');
  });
});

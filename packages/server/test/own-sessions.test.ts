import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { admin, api, type Harness, signIn, startHarness } from './support/harness.js';

describe('management API: a principal sees and ends its own sessions', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness({ socket: false, store: 'memory' });
  });
  after(() => h.close());

  test('sessions record the address and User-Agent they were created from; ?mine lists only the caller’s; revoke-others keeps the caller signed in', async () => {
    const me = await admin(h);
    h.clock.advance(1000);
    const terminal = await signIn(h, me.key, { 'user-agent': 'svc/0.1.0 (terminal 2)' });
    h.clock.advance(1000);
    const browser = await signIn(h, me.key, { 'user-agent': 'Mozilla/5.0\u0085\u009b31m red' });
    const colleague = await admin(h);

    const mine = await api(h, 'GET', '/v1/auth/sessions?mine', { token: terminal.access_token });
    assert.equal(mine.status, 200);
    const listed = mine.body.sessions as { id: string; client_address: string | null; user_agent: string | null; subject: string }[];
    assert.deepEqual(
      listed.map((s) => s.id),
      [browser.session_id, terminal.session_id, me.pair.session_id],
    );
    const byId = new Map(listed.map((s) => [s.id, s]));
    assert.equal(byId.get(terminal.session_id)?.client_address, '127.0.0.1');
    assert.equal(byId.get(terminal.session_id)?.user_agent, 'svc/0.1.0 (terminal 2)');
    assert.equal(byId.get(browser.session_id)?.user_agent, 'Mozilla/5.0  31m red', 'no control character (here C1: NEL, CSI) is kept');
    // Without ?mine an operator still sees every session.
    const all = await api(h, 'GET', '/v1/auth/sessions', { token: terminal.access_token });
    assert.ok((all.body.sessions as { id: string }[]).some((s) => s.id === colleague.pair.session_id));

    const devices = await api(h, 'GET', '/v1/auth/devices?mine=true', { token: terminal.access_token });
    assert.deepEqual(
      (devices.body.devices as { id: string }[]).map((d) => d.id),
      [me.deviceId],
    );
    const otherRealm = await api(h, 'GET', '/v1/auth/sessions?mine&realm=application', { token: terminal.access_token });
    assert.equal(otherRealm.status, 400);
    assert.equal(otherRealm.body.code, 'invalid_request');

    const revoked = await api(h, 'POST', '/v1/auth/sessions/revoke-others', { token: terminal.access_token, body: {} });
    assert.equal(revoked.status, 200);
    assert.deepEqual(revoked.body, { revoked: [browser.session_id, me.pair.session_id] });
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: terminal.access_token })).status, 200, 'the caller stays signed in');
    for (const gone of [browser, me.pair]) {
      const refused = await api(h, 'GET', '/v1/auth/me', { token: gone.access_token });
      assert.equal(refused.status, 401);
      assert.equal(refused.body.code, 'invalid_token');
    }
    assert.equal(
      (await api(h, 'GET', '/v1/auth/me', { token: colleague.pair.access_token })).status,
      200,
      "a colleague's session is untouched",
    );
    const audit = await api(h, 'GET', '/v1/auth/audit?limit=1000', { token: terminal.access_token });
    const reasons = (audit.body.events as { type: string; data: { reason?: string } }[])
      .filter((e) => e.type === 'session.revoked')
      .map((e) => e.data.reason);
    assert.deepEqual(reasons, ['revoked_by_owner', 'revoked_by_owner']);
  });

  test('without a bearer token neither listing nor revoke-others answers', async () => {
    assert.equal((await api(h, 'GET', '/v1/auth/sessions?mine')).status, 401);
    assert.equal((await api(h, 'POST', '/v1/auth/sessions/revoke-others', { body: {} })).status, 401);
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { issueBootstrapToken } from '@svc/core';
import { admin, api, enroll, type Harness, newDeviceKey, signIn, startHarness } from './support/harness.js';

describe('management API: the whole flow', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness({ socket: false, store: 'memory' });
  });
  after(() => h.close());

  test('enroll → challenge → signed session → me → refresh → old access token refused → revoke → refused', async () => {
    const key = newDeviceKey();
    const { token } = await issueBootstrapToken(h.deps, { recovery: true });

    const enrolled = await api(h, 'POST', '/v1/auth/enroll', {
      body: { bootstrap_token: token, public_key: key.publicKeyHex, name: 'laptop' },
    });
    assert.equal(enrolled.status, 201);
    assert.equal(enrolled.body.device.public_key, key.publicKeyHex);
    assert.equal(enrolled.body.device.realm, 'management');
    assert.equal(enrolled.body.device.name, 'laptop');
    assert.match(enrolled.body.device.id, /^dev_/);
    assert.match(enrolled.body.device.subject, /^sub_/);
    assert.equal(enrolled.body.device.created_at, '2026-11-22T10:00:00.000Z');

    const chl = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: key.publicKeyHex } });
    assert.equal(chl.status, 201);
    assert.match(chl.body.challenge_id, /^chl_/);
    assert.match(chl.body.challenge, /^svc-auth-v1 challenge \S+ management chl_\S+ [0-9a-f]{32} \d+$/);
    assert.equal(chl.body.expires_in, 60);
    assert.equal(chl.body.expires_at, '2026-11-22T10:01:00.000Z');

    const session = await api(h, 'POST', '/v1/auth/sessions', {
      body: { challenge_id: chl.body.challenge_id, signature: key.signHex(chl.body.challenge) },
    });
    assert.equal(session.status, 201);
    const pair = session.body;
    assert.deepEqual(Object.keys(pair).sort(), [
      'access_token',
      'expires_in',
      'realm',
      'refresh_expires_in',
      'refresh_token',
      'session_id',
      'token_type',
    ]);
    assert.equal(pair.token_type, 'Bearer');
    assert.equal(pair.realm, 'management');
    assert.match(pair.access_token, /^svca_/);
    assert.match(pair.refresh_token, /^svcr_/);

    const me = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
    assert.equal(me.status, 200);
    assert.deepEqual(me.body, {
      subject: enrolled.body.device.subject,
      realm: 'management',
      session: pair.session_id,
      device: enrolled.body.device.id,
      claims: { amr: ['ed25519'], auth_time: '2026-11-22T10:00:00.000Z', exp: '2026-11-22T10:15:00.000Z' },
    });

    const refreshed = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } });
    assert.equal(refreshed.status, 200);
    assert.equal(refreshed.body.session_id, pair.session_id);
    assert.notEqual(refreshed.body.access_token, pair.access_token);

    const old = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
    assert.equal(old.status, 401);
    assert.equal(old.body.code, 'invalid_token');
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: refreshed.body.access_token })).status, 200);

    const revoked = await api(h, 'POST', '/v1/auth/revoke', { token: refreshed.body.access_token, body: {} });
    assert.equal(revoked.status, 200);
    assert.deepEqual(revoked.body, { session_id: pair.session_id, revoked: true });

    const after = await api(h, 'GET', '/v1/auth/me', { token: refreshed.body.access_token });
    assert.equal(after.status, 401);
    assert.equal(after.body.code, 'invalid_token');
    const refreshAfter = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: refreshed.body.refresh_token } });
    assert.equal(refreshAfter.body.code, 'invalid_refresh_token');
  });

  test('a logout POST without any body revokes the own session', async () => {
    const { pair } = await admin(h);
    const r = await api(h, 'POST', '/v1/auth/revoke', { token: pair.access_token });
    assert.equal(r.status, 200);
    assert.equal(r.body.session_id, pair.session_id);
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: pair.access_token })).body.code, 'invalid_token');
  });

  test('an admin revokes another session by id and it is refused from the next request on', async () => {
    const a = await admin(h);
    const b = await admin(h);
    const r = await api(h, 'POST', '/v1/auth/revoke', { token: a.pair.access_token, body: { session_id: b.pair.session_id } });
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { session_id: b.pair.session_id, revoked: true });
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: b.pair.access_token })).body.code, 'invalid_token');
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: a.pair.access_token })).status, 200);
  });

  test('revoking an unknown session is 404 not_found', async () => {
    const { pair } = await admin(h);
    const r = await api(h, 'POST', '/v1/auth/revoke', { token: pair.access_token, body: { session_id: 'ses_01M81B5H80VQ6PF8VXZGD22NT9' } });
    assert.equal(r.status, 404);
    assert.equal(r.body.code, 'not_found');
  });
});

describe('management API: each contract error from its endpoint', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness({ socket: false, store: 'memory' });
  });
  after(() => h.close());

  test('enroll with an unknown bootstrap token is invalid_bootstrap_token', async () => {
    const r = await api(h, 'POST', '/v1/auth/enroll', {
      body: { bootstrap_token: `svcb_${'A'.repeat(43)}`, public_key: newDeviceKey().publicKeyHex },
    });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_bootstrap_token');
  });

  test('enroll with a used bootstrap token is bootstrap_token_used', async () => {
    const { token } = await issueBootstrapToken(h.deps, { recovery: true });
    const first = await api(h, 'POST', '/v1/auth/enroll', { body: { bootstrap_token: token, public_key: newDeviceKey().publicKeyHex } });
    assert.equal(first.status, 201);
    const again = await api(h, 'POST', '/v1/auth/enroll', { body: { bootstrap_token: token, public_key: newDeviceKey().publicKeyHex } });
    assert.equal(again.status, 401);
    assert.equal(again.body.code, 'bootstrap_token_used');
  });

  test('enroll with a bootstrap token older than 15 minutes is bootstrap_token_expired', async () => {
    const { token } = await issueBootstrapToken(h.deps, { recovery: true });
    h.clock.advance(15 * 60_000);
    const r = await api(h, 'POST', '/v1/auth/enroll', { body: { bootstrap_token: token, public_key: newDeviceKey().publicKeyHex } });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'bootstrap_token_expired');
  });

  test('enrolling a key twice is 409 already_enrolled', async () => {
    const { key } = await enroll(h);
    const { token } = await issueBootstrapToken(h.deps, { recovery: true });
    const r = await api(h, 'POST', '/v1/auth/enroll', { body: { bootstrap_token: token, public_key: key.publicKeyHex } });
    assert.equal(r.status, 409);
    assert.equal(r.body.code, 'already_enrolled');
  });

  test('a bad public key is invalid_request on enroll and on challenges', async () => {
    const { token } = await issueBootstrapToken(h.deps, { recovery: true });
    for (const bad of ['zz'.repeat(32), 'ab'.repeat(31), 'ab'.repeat(33), '00'.repeat(32)]) {
      const e = await api(h, 'POST', '/v1/auth/enroll', { body: { bootstrap_token: token, public_key: bad } });
      assert.equal(e.status, 400, bad);
      assert.equal(e.body.code, 'invalid_request');
      const c = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: bad } });
      assert.equal(c.status, 400, bad);
      assert.equal(c.body.code, 'invalid_request');
    }
  });

  test('an unknown key still gets a challenge and then fails with invalid_signature', async () => {
    const stranger = newDeviceKey();
    const c = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: stranger.publicKeyHex } });
    assert.equal(c.status, 201);
    const s = await api(h, 'POST', '/v1/auth/sessions', {
      body: { challenge_id: c.body.challenge_id, signature: stranger.signHex(c.body.challenge) },
    });
    assert.equal(s.status, 401);
    assert.equal(s.body.code, 'invalid_signature');
  });

  test('a signature by another key is invalid_signature', async () => {
    const { key } = await enroll(h);
    const c = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: key.publicKeyHex } });
    const s = await api(h, 'POST', '/v1/auth/sessions', {
      body: { challenge_id: c.body.challenge_id, signature: newDeviceKey().signHex(c.body.challenge) },
    });
    assert.equal(s.status, 401);
    assert.equal(s.body.code, 'invalid_signature');
  });

  test('a challenge is single-use: the second answer is invalid_challenge', async () => {
    const { key } = await enroll(h);
    const c = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: key.publicKeyHex } });
    const body = { challenge_id: c.body.challenge_id, signature: key.signHex(c.body.challenge) };
    assert.equal((await api(h, 'POST', '/v1/auth/sessions', { body })).status, 201);
    const again = await api(h, 'POST', '/v1/auth/sessions', { body });
    assert.equal(again.status, 401);
    assert.equal(again.body.code, 'invalid_challenge');
  });

  test('an expired challenge is invalid_challenge', async () => {
    const { key } = await enroll(h);
    const c = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: key.publicKeyHex } });
    h.clock.advance(60_000);
    const s = await api(h, 'POST', '/v1/auth/sessions', {
      body: { challenge_id: c.body.challenge_id, signature: key.signHex(c.body.challenge) },
    });
    assert.equal(s.status, 401);
    assert.equal(s.body.code, 'invalid_challenge');
  });

  test('an unknown challenge id is invalid_challenge', async () => {
    const s = await api(h, 'POST', '/v1/auth/sessions', {
      body: { challenge_id: 'chl_01M81B5H80VQ6PF8VXZGD22NT1', signature: 'ab'.repeat(64) },
    });
    assert.equal(s.status, 401);
    assert.equal(s.body.code, 'invalid_challenge');
  });

  test('a signature that is not 128 hex digits is invalid_request', async () => {
    const s = await api(h, 'POST', '/v1/auth/sessions', {
      body: { challenge_id: 'chl_01M81B5H80VQ6PF8VXZGD22NT1', signature: 'ab'.repeat(63) },
    });
    assert.equal(s.status, 400);
    assert.equal(s.body.code, 'invalid_request');
  });

  test('an unknown refresh token is invalid_refresh_token', async () => {
    const r = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: `svcr_${'0'.repeat(26)}${'B'.repeat(43)}` } });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_refresh_token');
    const garbage = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: 'not-a-token' } });
    assert.equal(garbage.status, 401);
    assert.equal(garbage.body.code, 'invalid_refresh_token');
  });

  test('a refresh token reused after the grace interval is refresh_token_reused and revokes the session', async () => {
    const { pair } = await admin(h);
    const next = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } });
    assert.equal(next.status, 200);
    h.clock.advance(h.deps.settings.refreshReuseGraceSeconds * 1000 + 1);
    const reused = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } });
    assert.equal(reused.status, 401);
    assert.equal(reused.body.code, 'refresh_token_reused');
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: next.body.access_token })).body.code, 'invalid_token');
  });

  test('the previous refresh token within the grace interval is answered with the same live pair', async () => {
    const { pair } = await admin(h);
    const first = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } });
    const retry = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } });
    assert.equal(retry.status, 200);
    assert.equal(retry.body.session_id, pair.session_id);
    assert.equal(retry.body.access_token, first.body.access_token);
    assert.equal(retry.body.refresh_token, first.body.refresh_token);
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: retry.body.access_token })).status, 200);
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: pair.access_token })).status, 401);
  });

  test('two tabs refreshing one token at once over HTTP both stay signed in: the one live pair, and each next refresh answered', async () => {
    const { pair } = await admin(h);
    const [tabA, tabB] = await Promise.all([
      api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } }),
      api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } }),
    ]);
    assert.deepEqual([tabA.status, tabB.status], [200, 200]);
    assert.equal(tabA.body.refresh_token, tabB.body.refresh_token, 'never two live pairs');
    h.clock.advance(1000);
    const nextA = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: tabA.body.refresh_token } });
    const nextB = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: tabB.body.refresh_token } });
    assert.deepEqual([nextA.status, nextB.status], [200, 200], "neither tab's next refresh is judged a reuse");
    assert.equal(nextB.body.access_token, nextA.body.access_token);
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: nextB.body.access_token })).status, 200);
  });

  test('an access token past its lifetime is invalid_token', async () => {
    const { pair } = await admin(h);
    h.clock.advance(h.deps.settings.accessTokenTtlSeconds * 1000);
    const r = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_token');
  });

  test('a bearer token refused with 401 carries WWW-Authenticate with error="invalid_token"', async () => {
    const r = await api(h, 'GET', '/v1/auth/me', { token: `svca_${'0'.repeat(26)}${'C'.repeat(43)}` });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_token');
    assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="management", error="invalid_token"');
    const refresh = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: `svcr_${'0'.repeat(26)}${'B'.repeat(43)}` } });
    assert.equal(refresh.headers.get('www-authenticate'), null);
  });

  test('a request without a bearer token is invalid_token with a bare WWW-Authenticate challenge', async () => {
    for (const path of ['/v1/auth/me', '/v1/auth/audit', '/v1/auth/devices', '/v1/auth/sessions']) {
      const r = await api(h, 'GET', path);
      assert.equal(r.status, 401, path);
      assert.equal(r.body.code, 'invalid_token');
      assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="management"');
    }
    const revoke = await api(h, 'POST', '/v1/auth/revoke', { body: {} });
    assert.equal(revoke.body.code, 'invalid_token');
  });

  test('the bearer scheme is case-insensitive and other schemes are invalid_token', async () => {
    const { pair } = await admin(h);
    const lower = await api(h, 'GET', '/v1/auth/me', { headers: { authorization: `bearer ${pair.access_token}` } });
    assert.equal(lower.status, 200);
    const basic = await api(h, 'GET', '/v1/auth/me', { headers: { authorization: 'Basic dXNlcjpwYXNz' } });
    assert.equal(basic.status, 401);
    assert.equal(basic.body.code, 'invalid_token');
    assert.equal(basic.headers.get('www-authenticate'), 'Bearer realm="management", error="invalid_token"');
  });
});

describe('management API: operator routes', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness({ socket: false, store: 'memory' });
  });
  after(() => h.close());

  test('the audit chain is read page by page with next_after', async () => {
    const { pair } = await admin(h);
    const all = await api(h, 'GET', '/v1/auth/audit?limit=1000', { token: pair.access_token });
    assert.equal(all.status, 200);
    const types = all.body.events.map((e: { type: string }) => e.type);
    assert.ok(types.includes('device.enrolled'));
    assert.ok(types.includes('session.created'));
    assert.equal(all.body.next_after, null);
    const total = all.body.events.length;
    assert.ok(total >= 3);

    const page1 = await api(h, 'GET', '/v1/auth/audit?limit=2', { token: pair.access_token });
    assert.equal(page1.body.events.length, 2);
    assert.equal(page1.body.next_after, page1.body.events[1].seq);
    const rest = await api(h, 'GET', `/v1/auth/audit?after=${page1.body.next_after}&limit=1000`, { token: pair.access_token });
    assert.equal(rest.body.events.length, total - 2);
    assert.equal(rest.body.events[0].seq, page1.body.next_after + 1);
    assert.equal(rest.body.next_after, null);
  });

  test('audit events never contain a token', async () => {
    const { pair } = await admin(h);
    const next = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } });
    const r = await api(h, 'GET', '/v1/auth/audit?limit=1000', { token: next.body.access_token });
    assert.equal(r.status, 200);
    assert.doesNotMatch(r.text, /svc[abr]_/);
  });

  test('an audit limit outside 1..1000 or a malformed cursor is invalid_request', async () => {
    const { pair } = await admin(h);
    for (const q of ['limit=0', 'limit=1001', 'limit=abc', 'after=-1', 'after=1.5', 'after=1&after=2', 'other=1']) {
      const r = await api(h, 'GET', `/v1/auth/audit?${q}`, { token: pair.access_token });
      assert.equal(r.status, 400, q);
      assert.equal(r.body.code, 'invalid_request', q);
    }
  });

  test('devices are listed, filtered by realm, and removed with their sessions revoked', async () => {
    const a = await admin(h);
    const b = await admin(h);
    const list = await api(h, 'GET', '/v1/auth/devices?realm=management', { token: a.pair.access_token });
    assert.equal(list.status, 200);
    const ids = list.body.devices.map((d: { id: string }) => d.id);
    assert.ok(ids.includes(a.deviceId) && ids.includes(b.deviceId));
    const app = await api(h, 'GET', '/v1/auth/devices?realm=application', { token: a.pair.access_token });
    assert.deepEqual(app.body.devices, []);
    const bad = await api(h, 'GET', '/v1/auth/devices?realm=other', { token: a.pair.access_token });
    assert.equal(bad.body.code, 'invalid_request');

    const removed = await api(h, 'DELETE', `/v1/auth/devices/${b.deviceId}`, { token: a.pair.access_token });
    assert.equal(removed.status, 200);
    assert.deepEqual(removed.body, { device_id: b.deviceId, removed: true, revoked_sessions: 1 });
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: b.pair.access_token })).body.code, 'invalid_token');
    const again = await api(h, 'DELETE', `/v1/auth/devices/${b.deviceId}`, { token: a.pair.access_token });
    assert.equal(again.status, 404);
    assert.equal(again.body.code, 'not_found');
    const malformed = await api(h, 'DELETE', '/v1/auth/devices/nope', { token: a.pair.access_token });
    assert.equal(malformed.body.code, 'invalid_request');
  });

  test('active sessions are listed without token material', async () => {
    const a = await admin(h);
    const r = await api(h, 'GET', '/v1/auth/sessions', { token: a.pair.access_token });
    assert.equal(r.status, 200);
    const mine = r.body.sessions.find((s: { id: string }) => s.id === a.pair.session_id);
    assert.equal(mine.device_id, a.deviceId);
    assert.equal(mine.revoked_at, null);
    assert.doesNotMatch(r.text, /svc[abr]_/);
    await api(h, 'POST', '/v1/auth/revoke', { token: (await signIn(h, a.key)).access_token, body: { session_id: a.pair.session_id } });
    const b = await signIn(h, a.key);
    const after = await api(h, 'GET', '/v1/auth/sessions?realm=management', { token: b.access_token });
    assert.equal(
      after.body.sessions.some((s: { id: string }) => s.id === a.pair.session_id),
      false,
    );
  });

  test('health answers ok when the store answers', async () => {
    const r = await api(h, 'GET', '/health');
    assert.equal(r.status, 200);
    assert.equal(r.body.status, 'ok');
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Store } from '@svc/core/store';
import { admin, api, type Harness, newDeviceKey, raw, startHarness } from '../support/harness.js';

function assertNoStore(headers: Headers | Record<string, unknown>, label: string) {
  const get = (name: string) => (headers instanceof Headers ? headers.get(name) : headers[name]);
  assert.equal(get('cache-control'), 'no-store', label);
  assert.equal(get('x-content-type-options'), 'nosniff', label);
}

describe('management API hardening', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(() => h.close());

  test('no-store: every response, successes, errors and 404s, carries Cache-Control: no-store', async () => {
    const { pair } = await admin(h);
    const replies = [
      await api(h, 'GET', '/health'),
      await api(h, 'GET', '/v1/auth/me', { token: pair.access_token }),
      await api(h, 'GET', '/v1/auth/me'),
      await api(h, 'GET', '/no/such/route'),
      await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: 'x' } }),
      await api(h, 'POST', '/v1/auth/challenges', { rawBody: '{', headers: { 'content-type': 'application/json' } }),
      await api(h, 'PUT', '/v1/auth/me'),
    ];
    for (const r of replies) assertNoStore(r.headers, `${r.status} ${r.text}`);
    const forged = await raw(h, { path: '/health', headers: { host: 'evil.example' } });
    assertNoStore(forged.headers, 'forbidden_host');
    const badUrl = await raw(h, { path: '/v1/auth/%zz' });
    assert.equal(badUrl.status, 400);
    assert.equal(badUrl.body.code, 'invalid_request');
    assertNoStore(badUrl.headers, 'bad url');
  });

  test('errors are application/problem+json with type, title, status, code and detail', async () => {
    const r = await api(h, 'GET', '/v1/auth/me');
    assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
    assert.deepEqual(Object.keys(r.body).sort(), ['code', 'detail', 'status', 'title', 'type']);
    assert.equal(r.body.type, 'about:blank');
    assert.equal(r.body.status, 401);
    assert.equal(r.body.title, 'Unauthorized');
  });

  test('unknown route is 404 not_found', async () => {
    const r = await api(h, 'GET', '/v1/auth/nope');
    assert.equal(r.status, 404);
    assert.equal(r.body.code, 'not_found');
    const trailing = await api(h, 'GET', '/health/');
    assert.equal(trailing.body.code, 'not_found');
  });

  test('wrong method on a known path is 405 method_not_allowed with Allow', async () => {
    const r = await api(h, 'DELETE', '/v1/auth/me');
    assert.equal(r.status, 405);
    assert.equal(r.body.code, 'method_not_allowed');
    assert.match(r.headers.get('allow') ?? '', /GET/);
    const put = await api(h, 'PUT', '/v1/auth/sessions', { body: {} });
    assert.equal(put.status, 405);
    assert.deepEqual((put.headers.get('allow') ?? '').split(', ').sort(), ['GET', 'HEAD', 'POST']);
    const param = await api(h, 'GET', '/v1/auth/devices/dev_x');
    assert.equal(param.status, 405);
    assert.equal(param.headers.get('allow'), 'DELETE');
  });

  test('a POST without a body where one is required is 400 invalid_request, never 500', async () => {
    for (const path of ['/v1/auth/enroll', '/v1/auth/challenges', '/v1/auth/sessions', '/v1/auth/refresh']) {
      const r = await raw(h, { method: 'POST', path });
      assert.equal(r.status, 400, path);
      assert.equal(r.body.code, 'invalid_request', path);
      const empty = await raw(h, { method: 'POST', path, headers: { 'content-type': 'application/json' }, body: '' });
      assert.equal(empty.status, 400, path);
      assert.equal(empty.body.code, 'invalid_request', path);
    }
  });

  test('malformed JSON is 400 invalid_request', async () => {
    for (const bad of ['{', '{"public_key":}', 'nul', '{"a":1}x', '\u00ff']) {
      const r = await api(h, 'POST', '/v1/auth/challenges', { rawBody: bad, headers: { 'content-type': 'application/json' } });
      assert.equal(r.status, 400, bad);
      assert.equal(r.body.code, 'invalid_request', bad);
    }
  });

  test('validation: extra, missing and ill-typed fields are 400 invalid_request (never stripped or coerced)', async () => {
    const key = newDeviceKey().publicKeyHex;
    const cases: [string, unknown][] = [
      ['/v1/auth/challenges', { public_key: key, extra: 1 }],
      ['/v1/auth/challenges', {}],
      ['/v1/auth/challenges', { public_key: 123 }],
      ['/v1/auth/challenges', { public_key: [key] }],
      ['/v1/auth/challenges', [key]],
      ['/v1/auth/challenges', null],
      ['/v1/auth/challenges', 'string'],
      ['/v1/auth/enroll', { bootstrap_token: 'svcb_x', public_key: key, admin: true }],
      ['/v1/auth/enroll', { bootstrap_token: 42, public_key: key }],
      ['/v1/auth/enroll', { bootstrap_token: 'svcb_x', public_key: key, name: null }],
      ['/v1/auth/sessions', { challenge_id: 'chl_x' }],
      ['/v1/auth/sessions', { challenge_id: 1, signature: 'ab' }],
      ['/v1/auth/refresh', { refresh_token: true }],
      ['/v1/auth/refresh', { refresh_token: 'svcr_x', access_token: 'svca_y' }],
    ];
    for (const [path, body] of cases) {
      const r = await api(h, 'POST', path, { body });
      assert.equal(r.status, 400, `${path} ${JSON.stringify(body)}`);
      assert.equal(r.body.code, 'invalid_request', `${path} ${JSON.stringify(body)}`);
    }
    const { pair } = await admin(h);
    const revoke = await api(h, 'POST', '/v1/auth/revoke', { token: pair.access_token, body: { session_id: pair.session_id, all: true } });
    assert.equal(revoke.status, 400);
    assert.equal(revoke.body.code, 'invalid_request');
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: pair.access_token })).status, 200);
  });

  test('a device name with control characters is 400 invalid_request', async () => {
    const r = await api(h, 'POST', '/v1/auth/enroll', {
      body: { bootstrap_token: `svcb_${'A'.repeat(43)}`, public_key: newDeviceKey().publicKeyHex, name: 'a\u0000b' },
    });
    assert.equal(r.status, 400);
    assert.equal(r.body.code, 'invalid_request');
  });

  test('audit injection: a challenge_id carrying a fake event line and ANSI escapes is 400 invalid_request and never reaches the audit trail', async () => {
    const before = (await h.store.auditHead())?.seq ?? 0;
    for (const forged of [
      'chl_\u001b[2J\u001b[32m2026-11-22 device.enrolled ok',
      'chl_01M81B5H80VQ6PF8VXZGD22NT1\nevt_x signin.ok admin',
      'chl_01M81B5H80VQ6PF8VXZGD22NT1 ',
      'chl_01m81b5h80vq6pf8vxzgd22nt1',
      'dev_01M81B5H80VQ6PF8VXZGD22NT1',
    ]) {
      const r = await api(h, 'POST', '/v1/auth/sessions', { body: { challenge_id: forged, signature: 'ab'.repeat(64) } });
      assert.equal(r.status, 400, JSON.stringify(forged));
      assert.equal(r.body.code, 'invalid_request');
    }
    assert.equal((await h.store.auditHead())?.seq ?? 0, before, 'nothing was appended to the audit trail');
    // A well-formed id is still audited when refused, with nothing but its fixed-shape id.
    const known = 'chl_01M81B5H80VQ6PF8VXZGD22NT1';
    assert.equal(
      (await api(h, 'POST', '/v1/auth/sessions', { body: { challenge_id: known, signature: 'ab'.repeat(64) } })).body.code,
      'invalid_challenge',
    );
    const events = await h.store.listAuditEvents({ afterSeq: before, limit: 10 });
    assert.deepEqual(
      events.map((e) => [e.type, e.data]),
      [['signin.failed', { reason: 'challenge_unknown_expired_or_used', challenge_id: known }]],
    );
  });

  test('challenge-replayed-at-once: one signed challenge sent 20 times at once over HTTP signs in once; every other answer is 401 invalid_challenge', async () => {
    const { key } = await admin(h);
    const c = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: key.publicKeyHex } });
    assert.equal(c.status, 201);
    const body = { challenge_id: c.body.challenge_id, signature: key.signHex(c.body.challenge) };
    // Every copy reads the challenge and checks the signature before any uses it up: only the
    // session's own transaction decides which one signs in.
    const answers = await Promise.all(Array.from({ length: 20 }, () => api(h, 'POST', '/v1/auth/sessions', { body })));
    const signedIn = answers.filter((a) => a.status === 201);
    assert.equal(signedIn.length, 1, answers.map((a) => a.status).join(' '));
    assert.deepEqual(
      [...new Set(answers.filter((a) => a.status !== 201).map((a) => `${a.status} ${a.body.code}`))],
      ['401 invalid_challenge'],
    );
    const created = (await h.store.listAuditEvents({ afterSeq: 0, limit: 1e6 })).filter(
      (e) => e.type === 'session.created' && e.data.challenge_id === body.challenge_id,
    );
    assert.deepEqual(
      created.map((e) => e.sessionId),
      [signedIn[0]?.body.session_id],
    );
  });
});

describe('management API: failures of the store are 5xx with nothing leaked', () => {
  let h: Harness;
  let broken = false;
  before(async () => {
    h = await startHarness({
      wrapStore: (store) =>
        new Proxy(store, {
          get(target, prop, receiver) {
            const value = Reflect.get(target, prop, receiver);
            if (typeof value !== 'function') return value;
            return (...args: unknown[]) => {
              if (broken && (prop === 'ping' || prop === 'findSessionByAccessDigest' || prop === 'createChallenge')) {
                return Promise.reject(new Error('SQLITE_IOERR: disk I/O error at /secret/path/control.db'));
              }
              return (value as (...a: unknown[]) => unknown).apply(target, args);
            };
          },
        }) as Store,
    });
  });
  after(() => h.close());

  test('an unexpected error is 500 internal_error with a generic detail', async () => {
    const { pair } = await admin(h);
    broken = true;
    try {
      const me = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
      assert.equal(me.status, 500);
      assert.equal(me.body.code, 'internal_error');
      assert.doesNotMatch(me.text, /SQLITE|secret|path/);
      assertNoStore(me.headers, '500');
      const chl = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: newDeviceKey().publicKeyHex } });
      assert.equal(chl.status, 500);
      assert.equal(chl.body.code, 'internal_error');
    } finally {
      broken = false;
    }
  });

  test('health is 503 store_unavailable when the store does not answer', async () => {
    broken = true;
    try {
      const r = await api(h, 'GET', '/health');
      assert.equal(r.status, 503);
      assert.equal(r.body.code, 'store_unavailable');
      assert.doesNotMatch(r.text, /SQLITE/);
    } finally {
      broken = false;
    }
    assert.equal((await api(h, 'GET', '/health')).status, 200);
  });
});

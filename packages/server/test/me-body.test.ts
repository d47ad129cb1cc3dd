import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { authenticate, updateUser } from '@svc/core';
import Fastify from 'fastify';
import { hardenSurface } from '../src/http/harden.js';
import { decoratePrincipal } from '../src/http/principal.js';
import { serverOptions } from '../src/http/server-options.js';
import { sessionRoutes } from '../src/http/session-routes.js';
import { admin, api, type Harness, type Pair, startHarness } from './support/harness.js';

// `GET /v1/auth/me` serializes each principal once and answers the same text while core hands out
// the same principal: these hold the text to the principal of the moment, field for field, and to
// every header the route answered with before.
describe('GET /v1/auth/me answers the principal of the moment, serialized once per principal', () => {
  let h: Harness;
  let pair: Pair;
  let subject: string;

  before(async () => {
    h = await startHarness({ socket: false, store: 'memory' });
    ({ pair } = await admin(h));
    subject = (await authenticate(h.deps, { token: pair.access_token, realm: 'management' })).subject;
  });
  after(() => h.close());

  test('two answers of an unchanged session: the same text, JSON with charset, and the security headers', async () => {
    const first = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
    const second = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
    assert.equal(first.status, 200);
    assert.equal(second.text, first.text);
    for (const r of [first, second]) {
      assert.equal(r.headers.get('content-type'), 'application/json; charset=utf-8');
      assert.equal(r.headers.get('cache-control'), 'no-store');
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(r.headers.get('content-length'), String(Buffer.byteLength(first.text)));
    }
    const principal = await authenticate(h.deps, { token: pair.access_token, realm: 'management' });
    assert.deepEqual(first.body, JSON.parse(JSON.stringify(principal)));
  });

  test("a change of the user's attributes shows in the very next answer", async () => {
    const before = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
    assert.equal(before.body.claims.name, undefined);
    await updateUser(h.deps, {
      subject,
      attributes: { name: 'Grace Hopper', email: 'grace@example.com', email_verified: true, groups: ['ops'] },
      actor: { via: 'cli', subject: null, session: null },
      source: 'operator',
    });
    const after = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
    assert.equal(after.status, 200);
    assert.deepEqual(
      [after.body.claims.name, after.body.claims.email, after.body.claims.email_verified, after.body.claims.groups],
      ['Grace Hopper', 'grace@example.com', true, ['ops']],
    );
    assert.equal(after.body.session, before.body.session);
  });

  test('a revoked session gets 401 invalid_token as problem+json, not a remembered answer', async () => {
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: pair.access_token })).status, 200);
    const revoked = await api(h, 'POST', '/v1/auth/revoke', { token: pair.access_token });
    assert.equal(revoked.status, 200);
    const refused = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
    assert.equal(refused.status, 401);
    assert.equal(refused.body.code, 'invalid_token');
    assert.match(refused.headers.get('content-type') ?? '', /^application\/problem\+json/);
  });

  // The route's handler settles nothing with the answer (its promise is its own): an async onSend
  // hook on the surface must still see one answer, not a second `send` of an empty one.
  test('behind an async onSend hook: one answer for a principal, one for a refusal', async () => {
    const app = Fastify(serverOptions(false));
    hardenSurface(app, { loopbackOnly: true });
    decoratePrincipal(app);
    let sends = 0;
    app.addHook('onSend', async (_req, _reply, payload) => {
      sends++;
      await new Promise((resolve) => setImmediate(resolve));
      return payload;
    });
    await app.register(sessionRoutes, { prefix: '/v1/auth', deps: h.deps, realm: 'management', guardProblems: [403], security: [] });
    try {
      const fresh = await admin(h);
      const ok = await app.inject({ method: 'GET', url: '/v1/auth/me', headers: { authorization: `Bearer ${fresh.pair.access_token}` } });
      assert.equal(ok.statusCode, 200);
      assert.equal(ok.json().session, (await authenticate(h.deps, { token: fresh.pair.access_token, realm: 'management' })).session);
      assert.equal(sends, 1);
      const refused = await app.inject({ method: 'GET', url: '/v1/auth/me', headers: { authorization: 'Bearer svca_unknown' } });
      assert.equal(refused.statusCode, 401);
      assert.equal(refused.json().code, 'invalid_token');
      assert.equal(sends, 2);
    } finally {
      await app.close();
    }
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createFailureLimiter } from '../src/index.js';
import { admin, api, createFakeClock, type Harness, newDeviceKey, signIn, startHarness } from './support/harness.js';

const BAD_REFRESH = { refresh_token: `svcr_${'0'.repeat(26)}${'B'.repeat(43)}` };

describe('rate limit of failed attempts', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(() => h.close());

  test('30 failed attempts in a window are answered; the next is 429 rate_limited with Retry-After, until the window ends', async () => {
    const { key } = await admin(h);
    for (let i = 0; i < 30; i++) {
      const r = await api(h, 'POST', '/v1/auth/refresh', { body: BAD_REFRESH });
      assert.equal(r.body.code, 'invalid_refresh_token', `attempt ${i + 1}`);
    }
    h.clock.advance(20_000);
    for (const [path, body] of [
      ['/v1/auth/refresh', BAD_REFRESH],
      ['/v1/auth/sessions', { challenge_id: 'chl_01M81B5H80VQ6PF8VXZGD22NT1', signature: 'ab'.repeat(64) }],
      ['/v1/auth/enroll', { bootstrap_token: `svcb_${'A'.repeat(43)}`, public_key: newDeviceKey().publicKeyHex }],
    ] as const) {
      const r = await api(h, 'POST', path, { body });
      assert.equal(r.status, 429, path);
      assert.equal(r.body.code, 'rate_limited', path);
      assert.equal(r.headers.get('retry-after'), '40', path);
      assert.equal(r.headers.get('cache-control'), 'no-store');
    }
    // Limited means limited: even a correct sign-in waits, but routes that prove nothing do not.
    const chl = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: key.publicKeyHex } });
    assert.equal(chl.status, 201);
    const limited = await api(h, 'POST', '/v1/auth/sessions', {
      body: { challenge_id: chl.body.challenge_id, signature: key.signHex(chl.body.challenge) },
    });
    assert.equal(limited.body.code, 'rate_limited');

    h.clock.advance(40_000);
    const r = await api(h, 'POST', '/v1/auth/refresh', { body: BAD_REFRESH });
    assert.equal(r.body.code, 'invalid_refresh_token');
    assert.ok(await signIn(h, key));
  });

  test('successes are never counted: many sign-ins and refreshes in one window are all answered', async () => {
    h.clock.advance(120_000);
    const { key } = await admin(h);
    for (let i = 0; i < 40; i++) {
      const pair = await signIn(h, key);
      const r = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } });
      assert.equal(r.status, 200, `round ${i + 1}`);
    }
  });

  test('invalid input (400) is not counted as a failed proof', async () => {
    h.clock.advance(120_000);
    for (let i = 0; i < 40; i++) {
      const r = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: 7 } });
      assert.equal(r.body.code, 'invalid_request');
    }
    assert.equal((await api(h, 'POST', '/v1/auth/refresh', { body: BAD_REFRESH })).body.code, 'invalid_refresh_token');
  });
});

describe('failure limiter', () => {
  test('counts per key, in fixed windows of the injected clock', () => {
    const clock = createFakeClock();
    const limiter = createFailureLimiter({ clock, maxFailures: 2, windowSeconds: 10 });
    limiter.recordFailure('a');
    limiter.recordFailure('a');
    assert.equal(limiter.check('a')?.code, 'rate_limited');
    assert.equal(limiter.check('b'), null);
    clock.advance(9_500);
    assert.equal(limiter.check('a')?.headers['retry-after'], '1');
    clock.advance(500);
    assert.equal(limiter.check('a'), null);
  });

  test('tracks a bounded number of clients', () => {
    const clock = createFakeClock();
    const limiter = createFailureLimiter({ clock, maxFailures: 1, maxKeys: 3 });
    for (const k of ['a', 'b', 'c', 'd']) limiter.recordFailure(k);
    assert.equal(limiter.check('a'), null);
    assert.equal(limiter.check('d')?.code, 'rate_limited');
  });
});

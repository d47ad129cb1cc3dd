import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { clientAddressKey, createFailureLimiter } from '../../src/http/failure-limiter.js';
import { within } from '../support/bounded.js';
import { admin, api, createFakeClock, type Harness, newDeviceKey, signIn, startHarness } from '../support/harness.js';

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
    // The budget bounds failures, not proofs: a correct sign-in goes through the spent budget.
    assert.ok(await signIn(h, key));

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
  test('counts failed attempts per key, in fixed windows of the injected monotonic clock; released ones do not count', async () => {
    const clock = createFakeClock();
    const limiter = createFailureLimiter({ clock, maxFailures: 2, windowSeconds: 10 });
    (await limiter.reserve(['a'])).fail();
    (await limiter.reserve(['a'])).release();
    (await limiter.reserve(['a'])).fail();
    assert.equal(limiter.check(['a'])?.code, 'rate_limited');
    const beyond = await limiter.reserve(['b', 'a']);
    assert.equal(beyond.counted, false, 'beyond the budget an attempt runs uncounted');
    assert.equal(beyond.refusal().code, 'rate_limited');
    beyond.fail();
    assert.equal(limiter.check(['b']), null, 'an uncounted attempt reserves and counts nothing');
    clock.advance(9_500);
    assert.equal(limiter.check(['a'])?.headers['retry-after'], '1');
    clock.advance(500);
    assert.equal(limiter.check(['a']), null);
  });

  test('a burst of 50 concurrent attempts against a budget of 30: all run at once, 30 counted, 20 uncounted', async () => {
    const limiter = createFailureLimiter({ clock: createFakeClock(), maxFailures: 30 });
    const attempts = await Promise.all(Array.from({ length: 50 }, () => limiter.reserve(['addr:loopback'])));
    assert.equal(attempts.filter((a) => a.counted).length, 30, 'never more counted than the budget');
    for (const a of attempts) a.release();
    assert.equal((await limiter.reserve(['addr:loopback'])).counted, true, 'released slots come back');
  });

  test('a refusal does not wait: with 30 attempts running, the 31st is answered before any of them settles', async () => {
    const limiter = createFailureLimiter({ clock: createFakeClock(), maxFailures: 30 });
    const running = await Promise.all(Array.from({ length: 30 }, () => limiter.reserve(['addr:loopback'])));
    const events: string[] = [];
    const extra = limiter.reserve(['addr:loopback']).then((a) => {
      events.push('31st answered');
      return a;
    });
    await within(extra, 10_000, 'the 31st reservation to be answered while 30 run');
    events.push('running ones settle');
    for (const a of running) a.fail();
    assert.deepEqual(events, ['31st answered', 'running ones settle']);
    assert.equal((await extra).counted, false);
  });

  test('a refusal does not wait on the shared budget either: one store decision, no polling', async () => {
    const calls: string[] = [];
    const busyStore = {
      async reserveAttempts() {
        calls.push('reserveAttempts');
        return { reserved: false as const, busy: true, retryAfterMs: 1000 };
      },
      async settleAttempts() {
        calls.push('settleAttempts');
      },
    };
    const limiter = createFailureLimiter({ clock: createFakeClock(), maxFailures: 30, store: busyStore });
    const attempt = await limiter.reserve(['addr:loopback']);
    assert.equal(attempt.counted, false);
    assert.deepEqual(calls, ['reserveAttempts'], 'asked once, never again');
    assert.equal(attempt.refusal().headers['retry-after'], '1');
  });

  test('tracks a bounded number of keys', async () => {
    const clock = createFakeClock();
    const limiter = createFailureLimiter({ clock, maxFailures: 1, maxKeys: 3 });
    for (const k of ['a', 'b', 'c', 'd']) (await limiter.reserve([k])).fail();
    assert.equal(limiter.check(['a']), null);
    assert.equal(limiter.check(['d'])?.code, 'rate_limited');
  });

  test('rotating the source address within one IPv6 /64, or within 127.0.0.0/8, does not make a new client', () => {
    assert.equal(clientAddressKey('2001:db8:1:2::1'), clientAddressKey('2001:db8:1:2:ffff:ffff:ffff:fffe'));
    assert.equal(clientAddressKey('2001:0db8:0001:0002:0:0:0:9'), clientAddressKey('2001:db8:1:2::9'));
    assert.notEqual(clientAddressKey('2001:db8:1:2::1'), clientAddressKey('2001:db8:1:3::1'));
    assert.equal(clientAddressKey('127.0.0.1'), clientAddressKey('127.45.3.200'));
    assert.equal(clientAddressKey('::1'), clientAddressKey('127.0.0.1'));
    assert.equal(clientAddressKey('::ffff:127.0.0.7'), clientAddressKey('127.0.0.1'));
    assert.equal(clientAddressKey('::ffff:203.0.113.9'), clientAddressKey('203.0.113.9'));
    assert.notEqual(clientAddressKey('203.0.113.9'), clientAddressKey('203.0.113.10'));
    assert.equal(clientAddressKey('fe80::1%eth0'), clientAddressKey('fe80::2'));
  });

  test("guesses at one credential from many addresses share the credential's budget", async () => {
    const clock = createFakeClock();
    const limiter = createFailureLimiter({ clock, maxFailures: 3 });
    for (let i = 0; i < 3; i++) (await limiter.reserve([clientAddressKey(`2001:db8:${i}::1`), 'refresh:ses_X'])).fail();
    assert.equal((await limiter.reserve([clientAddressKey('2001:db8:99::1'), 'refresh:ses_X'])).counted, false);
    assert.equal((await limiter.reserve([clientAddressKey('2001:db8:99::1'), 'refresh:ses_Y'])).counted, true);
  });
});

/** A bad sign-in (a well-formed but unknown challenge id) sent from `localAddress`, with node:http. */
function badSignInFrom(h: Harness, localAddress: string): Promise<{ status: number; code: string; retryAfter: string | undefined }> {
  const body = JSON.stringify({ challenge_id: `chl_${'0'.repeat(10)}${randomUlidBody()}`, signature: 'ab'.repeat(64) });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: h.port,
        localAddress,
        method: 'POST',
        path: '/v1/auth/sessions',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        agent: false,
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => {
          const parsed = JSON.parse(Buffer.concat(parts).toString('utf8')) as { code: string };
          const retryAfter = res.headers['retry-after'];
          resolve({ status: res.statusCode ?? 0, code: parsed.code, retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function randomUlidBody(): string {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  return Array.from(randomBytes(16), (b) => alphabet[b % 32]).join('');
}

async function signInFailures(h: Harness): Promise<number> {
  return (await h.store.listAuditEvents({ afterSeq: 0, limit: 10_000 })).filter((e) => e.type === 'signin.failed').length;
}

describe('failure limiter under attack', () => {
  test('300 concurrent bad sign-ins from one address: only the 30 of the budget are answered 401 and audited, 270 are 429', async () => {
    const h = await startHarness();
    try {
      const replies = await Promise.all(Array.from({ length: 300 }, () => badSignInFrom(h, '127.0.0.1')));
      const codes: Record<string, number> = {};
      for (const r of replies) codes[r.code] = (codes[r.code] ?? 0) + 1;
      assert.deepEqual(codes, { invalid_challenge: 30, rate_limited: 270 });
      assert.equal(await signInFailures(h), 30, 'exactly 30 attempts reached the store and the audit trail');
    } finally {
      await h.close();
    }
  });

  test('rotating the source address within 127.0.0.0/8 does not escape the limit', async () => {
    const h = await startHarness();
    try {
      for (let i = 0; i < 30; i++)
        assert.equal((await badSignInFrom(h, `127.0.${i}.${i + 2}`)).code, 'invalid_challenge', `attempt ${i + 1}`);
      const refused = await badSignInFrom(h, '127.200.100.50');
      assert.equal(refused.status, 429);
      assert.equal(refused.code, 'rate_limited');
    } finally {
      await h.close();
    }
  });

  test('stepping the wall clock back 1 h does not stretch a lockout', async () => {
    const h = await startHarness();
    try {
      for (let i = 0; i < 30; i++) await badSignInFrom(h, '127.0.0.1');
      h.clock.step(-3_600_000);
      const locked = await badSignInFrom(h, '127.0.0.1');
      assert.equal(locked.code, 'rate_limited');
      assert.equal(locked.retryAfter, '60');
      h.clock.advance(60_000);
      assert.equal((await badSignInFrom(h, '127.0.0.1')).code, 'invalid_challenge', 'the lockout ended after 60 s of elapsed time');
    } finally {
      await h.close();
    }
  });

  test('stepping the wall clock forward 1 h does not end a lockout early', async () => {
    const h = await startHarness();
    try {
      for (let i = 0; i < 30; i++) await badSignInFrom(h, '127.0.0.1');
      h.clock.step(3_600_000);
      const locked = await badSignInFrom(h, '127.0.0.1');
      assert.equal(locked.code, 'rate_limited');
      assert.equal(locked.retryAfter, '60');
    } finally {
      await h.close();
    }
  });
});

describe('challenge flood', () => {
  test('a client that only asks for challenges, with ever new keys, is refused 429 after 100 unanswered ones', async () => {
    const h = await startHarness();
    try {
      const statuses: number[] = [];
      let last: Awaited<ReturnType<typeof api>> | undefined;
      for (let i = 0; i < 110; i++) {
        last = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: newDeviceKey().publicKeyHex } });
        statuses.push(last.status);
      }
      assert.equal(statuses.filter((s) => s === 201).length, 100);
      assert.equal(statuses.filter((s) => s === 429).length, 10);
      assert.equal(last?.body.code, 'rate_limited');
      assert.equal(last?.headers.get('retry-after'), '60');
      h.clock.advance(60_000);
      assert.equal((await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: newDeviceKey().publicKeyHex } })).status, 201);
    } finally {
      await h.close();
    }
  });

  test('a client that answers its challenges is never refused: 150 sign-ins in one window', async () => {
    const h = await startHarness();
    try {
      const { key } = await admin(h);
      for (let i = 0; i < 150; i++) assert.ok(await signIn(h, key), `sign-in ${i + 1}`);
    } finally {
      await h.close();
    }
  });
});

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { describe, test } from 'node:test';
import { admin, api, type Harness, newDeviceKey, signIn, startHarness } from '../support/harness.js';

/** A request from `localAddress` (any of 127.0.0.0/8: another local account's curl), with node:http. */
function postFrom(
  h: Harness,
  localAddress: string,
  path: string,
  payload: unknown,
): Promise<{ status: number; code: string; retryAfter: string | undefined }> {
  const body = JSON.stringify(payload);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: h.port,
        localAddress,
        method: 'POST',
        path,
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

function unknownChallengeId(): string {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  return `chl_${'0'.repeat(10)}${Array.from(randomBytes(16), (b) => alphabet[b % 32]).join('')}`;
}

const badSignIn = () => ({ challenge_id: unknownChallengeId(), signature: 'ab'.repeat(64) });
const BAD_REFRESH = { refresh_token: `svcr_${'0'.repeat(26)}${'B'.repeat(43)}` };

async function auditCount(h: Harness, type: string): Promise<number> {
  return (await h.store.listAuditEvents({ afterSeq: 0, limit: 10_000 })).filter((e) => e.type === type).length;
}

describe('lockout attacks on the sign-in budgets', () => {
  test("victim-key challenge flood: 25 unanswered challenges naming the administrator's key, from another address, do not keep it from signing in", async () => {
    const h = await startHarness();
    try {
      const { key } = await admin(h);
      for (let i = 0; i < 25; i++) {
        const r = await postFrom(h, '127.0.0.77', '/v1/auth/challenges', { public_key: key.publicKeyHex });
        assert.equal(r.status, 201, `attacker challenge ${i + 1}`);
      }
      const pair = await signIn(h, key);
      assert.equal(pair.realm, 'management');
    } finally {
      await h.close();
    }
  });

  test('loopback bad sign-in flood: after 35 bad sign-ins from another local account, the administrator still signs in and refreshes', async () => {
    const h = await startHarness();
    try {
      const { key, pair } = await admin(h);
      for (let i = 0; i < 35; i++) await postFrom(h, '127.0.0.66', '/v1/auth/sessions', badSignIn());
      assert.equal((await postFrom(h, '127.0.0.66', '/v1/auth/sessions', badSignIn())).code, 'rate_limited', 'the flood is bounded');
      const again = await signIn(h, key);
      assert.equal(again.realm, 'management', 'a valid signature signs in whoever spent the budget');
      const rotated = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } });
      assert.equal(rotated.status, 200, 'a valid current refresh token rotates whoever spent the budget');
    } finally {
      await h.close();
    }
  });

  test('loopback bad refresh flood: after 35 bad refreshes and bad enrollments, a valid refresh token still rotates', async () => {
    const h = await startHarness();
    try {
      const { pair } = await admin(h);
      for (let i = 0; i < 35; i++) await postFrom(h, '127.0.0.66', '/v1/auth/refresh', BAD_REFRESH);
      for (let i = 0; i < 5; i++) {
        await postFrom(h, '127.0.0.66', '/v1/auth/enroll', {
          bootstrap_token: `svcb_${'A'.repeat(43)}`,
          public_key: newDeviceKey().publicKeyHex,
        });
      }
      assert.equal((await postFrom(h, '127.0.0.66', '/v1/auth/refresh', BAD_REFRESH)).code, 'rate_limited');
      const rotated = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } });
      assert.equal(rotated.status, 200);
    } finally {
      await h.close();
    }
  });

  test('a bad sign-in flood stays bounded per source: beyond 30 failures every bad attempt is 429 with Retry-After, and none is audited', async () => {
    const h = await startHarness();
    try {
      const codes: Record<string, number> = {};
      let last: Awaited<ReturnType<typeof postFrom>> | undefined;
      for (let i = 0; i < 60; i++) {
        last = await postFrom(h, '127.0.0.66', '/v1/auth/sessions', badSignIn());
        codes[last.code] = (codes[last.code] ?? 0) + 1;
      }
      assert.deepEqual(codes, { invalid_challenge: 30, rate_limited: 30 });
      assert.equal(last?.status, 429);
      assert.equal(last?.retryAfter, '60');
      assert.equal(await auditCount(h, 'signin.failed'), 30, 'the audit trail holds the budget, not the flood');
      h.clock.advance(60_000);
      assert.equal((await postFrom(h, '127.0.0.66', '/v1/auth/sessions', badSignIn())).code, 'invalid_challenge', 'a new window');
    } finally {
      await h.close();
    }
  });

  const asRoot = process.getuid?.() === 0 && process.platform === 'linux';
  test("local-account challenge flood: another local account's 101 unanswered challenges do not keep the administrator from signing in", {
    skip: asRoot || process.env.CI ? false : 'acting as another local account needs root on Linux (under CI it fails instead of skipping)',
  }, async () => {
    assert.ok(asRoot, 'acting as another local account needs root on Linux; CI must run this test as root');
    const h = await startHarness();
    try {
      const { key } = await admin(h);
      // Another local account (uid 65534, nobody) floods challenges with curl-like requests.
      const script = `
        import { generateKeyPairSync } from 'node:crypto';
        const statuses = [];
        for (let i = 0; i < 101; i++) {
          const spki = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' });
          const key = spki.subarray(-32).toString('hex');
          const r = await fetch('${h.base}/v1/auth/challenges', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ public_key: key }) });
          statuses.push(r.status);
        }
        process.stdout.write(JSON.stringify(statuses));`;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        uid: 65534,
        gid: 65534,
        cwd: '/',
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString('utf8');
      });
      const code = await new Promise<number | null>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('waited 30 s for the other local account to finish its flood')), 30_000);
        child.once('exit', (c) => {
          clearTimeout(timer);
          resolve(c);
        });
      });
      assert.equal(code, 0, 'the flooding child ran');
      const statuses = JSON.parse(out) as number[];
      assert.equal(statuses.filter((s) => s === 201).length, 100, "the other account's flood is bounded at 100");
      assert.equal(statuses.at(-1), 429);
      const pair = await signIn(h, key);
      assert.equal(pair.realm, 'management', "the administrator's account is its own source");
    } finally {
      await h.close();
    }
  });

  test('a challenge flood stays bounded per source: 100 unanswered challenges, then 429 with Retry-After', async () => {
    const h = await startHarness();
    try {
      const victim = newDeviceKey().publicKeyHex;
      for (let i = 0; i < 100; i++)
        assert.equal((await postFrom(h, '127.0.0.55', '/v1/auth/challenges', { public_key: victim })).status, 201);
      const refused = await postFrom(h, '127.0.0.55', '/v1/auth/challenges', { public_key: newDeviceKey().publicKeyHex });
      assert.equal(refused.status, 429);
      assert.equal(refused.code, 'rate_limited');
      assert.equal(refused.retryAfter, '60');
    } finally {
      await h.close();
    }
  });
});

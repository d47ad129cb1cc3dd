import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { newId } from '@svc/core';
import { type ChallengeRecord, latestTrustedTime } from '@svc/core/store';
import type pg from 'pg';
import type { PostgresStore } from '../../src/index.js';
import { createTestEnv, oneConnectionStore } from '../pg-test-env.js';

// The sign-in challenges of one event-loop turn are stored by one statement and used up by one
// (src/challenges.ts), and its attempt settlements are made by one (src/attempt-budget.ts): each
// round trip costs the node a socket write that wakes a backend. These tests hold the batches to
// what one call at a time did: each call its own answer, one row one sign-in, a refused row
// failing only its own call, and plans made once per connection.

const T0 = Date.UTC(2026, 10, 28, 22, 0, 0, 0);
const clock = { now: () => T0 };
const random = (n: number) => randomBytes(n);
/** Open challenges already in the table, as a busy store holds them. */
const LIVE = 20_000;

const env = createTestEnv();
after(() => env.dispose());
const serverVersion = Number(
  (await env.admin.query<{ server_version_num: string }>('SHOW server_version_num')).rows[0]?.server_version_num,
);
const plansCounted = serverVersion >= 140_000 ? false : 'pg_prepared_statements counts generic and custom plans from PostgreSQL 14 on';

describe("one turn's sign-in challenges and attempt settlements share a statement", () => {
  const schema = env.schema();
  let migrated: PostgresStore;
  let pool: pg.Pool;
  let budgetPool: pg.Pool;
  let store: PostgresStore;
  const publicKey = randomBytes(32).toString('hex');
  let deviceId: string;

  before(async () => {
    migrated = await env.open(schema);
    ({ store, pool, budgetPool } = oneConnectionStore(schema, serverVersion));
    const subject = newId('subject', clock, random);
    deviceId = newId('device', clock, random);
    const enrolled = await store.enrollDevice(
      { id: deviceId, publicKey, realm: 'management', subject, name: 'laptop', createdAt: T0, removedAt: null },
      {
        id: newId('event', clock, random),
        at: T0,
        type: 'device.enrolled',
        realm: 'management',
        subject,
        deviceId,
        sessionId: null,
        data: {},
      },
    );
    assert.equal(enrolled, 'enrolled');
    await env.admin.query(
      `INSERT INTO ${schema}.challenges (id, public_key, realm, challenge, created_at, expires_at)
       SELECT 'chl_LIVE' || i, $1, 'management', md5('x' || i), $2, $3 FROM generate_series(1, ${LIVE}) AS i`,
      ['ab'.repeat(32), T0, T0 + 3_600_000],
    );
    await env.admin.query(`ANALYZE ${schema}.challenges`);
  });
  after(async () => {
    await pool.end();
    await budgetPool.end();
    await migrated.close();
  });

  const challenge = (over: Partial<ChallengeRecord> = {}): ChallengeRecord => ({
    id: newId('challenge', clock, random),
    publicKey,
    realm: 'management',
    challenge: randomBytes(32).toString('base64url'),
    createdAt: T0,
    expiresAt: T0 + 60_000,
    ...over,
  });

  /** How often each named statement starting with `prefix` ran on the store's one connection of `on`. */
  async function executions(prefix: string, on: pg.Pool = pool): Promise<Map<string, number>> {
    const { rows } = await on.query<{ name: string; generic_plans: string; custom_plans: string }>(
      'SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE starts_with(name, $1)',
      [prefix],
    );
    return new Map(rows.map((r) => [r.name, Number(r.generic_plans) + Number(r.custom_plans)]));
  }
  const delta = (before: Map<string, number>, now: Map<string, number>) =>
    Object.fromEntries(
      [...now].filter(([name, n]) => n !== (before.get(name) ?? 0)).map(([name, n]) => [name, n - (before.get(name) ?? 0)]),
    );

  test('five challenges of one turn are stored by one INSERT and used up by one DELETE, each sign-in with its own row', {
    skip: plansCounted,
  }, async () => {
    const five = Array.from({ length: 5 }, () => challenge());
    const start = await executions('svc_');
    await Promise.all(five.map((c) => store.createChallenge(c)));
    const used = await Promise.all(five.map((c) => store.consumeChallenge({ id: c.id, now: T0 + 1 })));
    assert.deepEqual(delta(start, await executions('svc_')), { svc_create_challenges: 1, svc_consume_challenges_8: 1 });
    assert.deepEqual(
      used.map((u) => [u?.id, u?.challenge, u?.device?.id]),
      five.map((c) => [c.id, c.challenge, deviceId]),
    );
  });

  test('challenge-replayed-in-the-same-batch: two uses of one challenge in one turn sign in once', async () => {
    const target = challenge();
    const other = challenge();
    await Promise.all([store.createChallenge(target), store.createChallenge(other)]);
    // The replay, the sign-in, and another sign-in's use, in one turn: one statement.
    const [replay, signIn, third] = await Promise.all([
      store.consumeChallenge({ id: target.id, now: T0 + 1 }),
      store.consumeChallenge({ id: target.id, now: T0 + 1 }),
      store.consumeChallenge({ id: other.id, now: T0 + 1 }),
    ]);
    assert.equal([replay, signIn].filter((u) => u !== null).length, 1, 'the challenge was used twice in one batch');
    assert.equal(third?.id, other.id);
    // And once used, never again, alone or in a batch.
    assert.deepEqual(
      await Promise.all([store.consumeChallenge({ id: target.id, now: T0 + 2 }), store.consumeChallenge({ id: target.id, now: T0 + 2 })]),
      [null, null],
    );
  });

  test('a challenge the table refuses fails alone: the others of its batch are stored', async () => {
    const stored = challenge();
    await store.createChallenge(stored);
    const first = challenge();
    const last = challenge();
    // The same id again, between two new ones, in one turn: the batch's INSERT fails whole.
    const outcomes = await Promise.allSettled([
      store.createChallenge(first),
      store.createChallenge({ ...challenge(), id: stored.id }),
      store.createChallenge(last),
    ]);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    const used = await Promise.all([first, stored, last].map((c) => store.consumeChallenge({ id: c.id, now: T0 + 1 })));
    assert.deepEqual(
      used.map((u) => [u?.id, u?.challenge]),
      [first, stored, last].map((c) => [c.id, c.challenge]),
      'the refused row must not replace the stored one, nor take its batch with it',
    );
  });

  test('a batch decides each call at its own time, as one call at a time did, expired and future-dated challenges included', async () => {
    // Dated 5 ms beyond what a call at T0 trusts, and within what one at T0 + 10 does.
    const future = challenge({ createdAt: latestTrustedTime(T0) + 5, expiresAt: latestTrustedTime(T0) + 60_000 });
    await store.createChallenge(future);
    const live = challenge();
    const expired = challenge({ createdAt: T0 - 120_000, expiresAt: T0 - 60_000 });
    // Expires between the batch's two times: still open at T0.
    const ending = challenge({ expiresAt: T0 + 5 });
    // A turn of its own, after the future-dated one's: a sweep of expired rows at that one's time would take it away.
    await Promise.all([live, expired, ending].map((c) => store.createChallenge(c)));
    // One batch, calls at T0 and at T0 + 10: the future-dated one is trusted at T0 + 10 and the
    // ending one is open at T0, though the batch's statement, at its strictest, refuses both.
    const used = await Promise.all([
      store.consumeChallenge({ id: live.id, now: T0 }),
      store.consumeChallenge({ id: expired.id, now: T0 }),
      store.consumeChallenge({ id: future.id, now: T0 + 10 }),
      store.consumeChallenge({ id: ending.id, now: T0 }),
      store.consumeChallenge({ id: newId('challenge', clock, random), now: T0 + 10 }),
    ]);
    assert.deepEqual(
      used.map((u) => u?.id ?? null),
      [live.id, null, future.id, ending.id, null],
    );
    // Each used once: never again.
    assert.deepEqual(await Promise.all([future, ending].map((c) => store.consumeChallenge({ id: c.id, now: T0 + 10 }))), [null, null]);
  });

  test('batches of every size run generic plans after five custom ones, on a table of many open challenges', {
    skip: plansCounted,
  }, async () => {
    for (let round = 0; round < 12; round++) {
      for (const size of [1, 2, 3, 5, 8, 13]) {
        const batch = Array.from({ length: size }, () => challenge());
        await Promise.all(batch.map((c) => store.createChallenge(c)));
        const used = await Promise.all(batch.map((c) => store.consumeChallenge({ id: c.id, now: T0 + 1 })));
        assert.deepEqual(
          used.map((u) => u?.id),
          batch.map((c) => c.id),
        );
      }
    }
    const { rows } = await pool.query<{ name: string; generic_plans: string; custom_plans: string }>(
      "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE name LIKE 'svc_%challenge%' ORDER BY name",
    );
    assert.deepEqual(rows.map((r) => r.name).sort(), [
      'svc_consume_challenge',
      'svc_consume_challenges_16',
      'svc_consume_challenges_2',
      'svc_consume_challenges_4',
      'svc_consume_challenges_8',
      'svc_create_challenge',
      'svc_create_challenges',
    ]);
    for (const r of rows) {
      assert.ok(Number(r.custom_plans) <= 5, `${r.name} was planned anew ${r.custom_plans} times (generic ${r.generic_plans})`);
    }
  });

  test("one turn's settlements are one statement, counted per window as one by one", { skip: plansCounted }, async () => {
    const key = 'addr:192.0.2.80';
    const window = { now: T0, windowMs: 60_000, max: 30, leaseMs: 30_000 };
    const held = [];
    for (let i = 0; i < 6; i++) held.push(await store.reserveAttempts({ keys: [key], ...window }));
    const start = await executions('svc_settle', budgetPool);
    await Promise.all(
      held.map((r, i) =>
        r.reserved ? store.settleAttempts({ windows: r.windows, failed: i < 2 }) : Promise.reject(new Error('not reserved')),
      ),
    );
    assert.deepEqual(delta(start, await executions('svc_settle', budgetPool)), { svc_settle_attempts: 1 });
    const { rows } = await env.admin.query(`SELECT failures, pending FROM ${schema}.attempt_budget WHERE key = $1`, [key]);
    assert.deepEqual(rows, [{ failures: 2, pending: 0 }]);
  });
});

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type AuditEventDraft, digestToken, mintSessionToken, newId } from '@svc/core';
import { type ChallengeRecord, type DeviceRecord, latestTrustedTime, newSessionRecord, type TokenPairDigests } from '@svc/core/store';
import type pg from 'pg';
import type { PostgresStore } from '../../src/index.js';
import { createTestEnv, oneConnectionStore } from '../pg-test-env.js';

// The sign-in challenges of one event-loop turn are stored by one statement and used up by one
// (src/challenges.ts), its sessions are created by one (src/new-sessions.ts), its DPoP proofs
// recorded by one (src/dpop-proofs.ts), its sessions read by one (src/session-reads.ts), and its
// attempt reservations and settlements are made by one each (src/attempt-budget.ts): each round
// trip costs the node a socket write that wakes a backend. These tests hold the batches to what
// one call at a time did: each call its own answer, one row one sign-in, a refused row failing
// only its own call, and plans made once per connection.

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

describe("one turn's sign-in challenges, sessions and attempt settlements share a statement", () => {
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

  test("five sign-ins' challenges of one turn are read by one SELECT, each with its row, and used up by none", {
    skip: plansCounted,
  }, async () => {
    const five = Array.from({ length: 5 }, () => challenge());
    await Promise.all(five.map((c) => store.createChallenge(c)));
    const start = await executions('svc_');
    // The first id twice: a read takes nothing, so both get the row.
    const read = await Promise.all([five[0], ...five].map((c) => store.readChallenge({ id: (c as ChallengeRecord).id, now: T0 + 1 })));
    assert.deepEqual(delta(start, await executions('svc_')), { svc_read_challenges_8: 1 });
    assert.deepEqual(
      read.map((u) => [u?.id, u?.challenge, u?.device?.id]),
      [five[0], ...five].map((c) => [c?.id, c?.challenge, deviceId]),
    );
    const used = await Promise.all(five.map((c) => store.consumeChallenge({ id: c.id, now: T0 + 1 })));
    assert.deepEqual(
      used.map((u) => u?.id),
      five.map((c) => c.id),
      'reading used a challenge up',
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
        // As sign-ins use them: read (before the signature is checked), then used up.
        const read = await Promise.all(batch.map((c) => store.readChallenge({ id: c.id, now: T0 + 1 })));
        const used = await Promise.all(batch.map((c) => store.consumeChallenge({ id: c.id, now: T0 + 1 })));
        assert.deepEqual([read.map((u) => u?.id), used.map((u) => u?.id)], [batch.map((c) => c.id), batch.map((c) => c.id)]);
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
      'svc_read_challenge',
      'svc_read_challenges_16',
      'svc_read_challenges_2',
      'svc_read_challenges_4',
      'svc_read_challenges_8',
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

  /** A device enrolled for a subject of its own, with a user row in `user`'s status (none when undefined). */
  async function device(user?: 'active' | 'disabled'): Promise<DeviceRecord> {
    const d: DeviceRecord = {
      id: newId('device', clock, random),
      publicKey: randomBytes(32).toString('hex'),
      realm: 'management',
      subject: newId('subject', clock, random),
      name: 'laptop',
      createdAt: T0,
      removedAt: null,
    };
    assert.equal(await store.enrollDevice(d, draft('device.enrolled', d)), 'enrolled');
    // Enrolling makes the subject's user, active: disabled here, or taken away (a subject
    // enrolled before there were users signs in without one).
    if (user === undefined) await env.admin.query(`DELETE FROM ${schema}.users WHERE subject = $1`, [d.subject]);
    else await env.admin.query(`UPDATE ${schema}.users SET status = $2 WHERE subject = $1`, [d.subject, user]);
    return d;
  }
  function draft(type: AuditEventDraft['type'], d: DeviceRecord, sessionId: string | null = null): AuditEventDraft {
    return {
      id: newId('event', clock, random),
      at: T0,
      type,
      realm: 'management',
      subject: d.subject,
      deviceId: d.id,
      sessionId,
      data: {},
    };
  }
  /** A sign-in's session of `d` at `at`: the record, its pair's digests and its event. */
  function signIn(d: DeviceRecord, at = T0 + 1) {
    const id = newId('session', clock, random);
    const pair: TokenPairDigests = {
      accessDigest: digestToken(mintSessionToken('access', id, random)),
      refreshDigest: digestToken(mintSessionToken('refresh', id, random)),
      accessExpiresAt: at + 900_000,
      refreshExpiresAt: at + 86_400_000,
    };
    const session = newSessionRecord({ id, device: d, now: at, expiresAt: at + 86_400_000, pair });
    return { session, pair, event: draft('session.created', d, id) };
  }
  const create = (s: ReturnType<typeof signIn>) => store.createSession(s.session, s.pair, s.event);
  /** The same, using a sign-in's challenge up with it. */
  const createWith = (s: ReturnType<typeof signIn>, use: { id: string; now: number }) =>
    store.createSession(s.session, s.pair, s.event, use);

  test("challenge-replayed-in-one-turn's-sessions: two sign-ins with one challenge in one statement create one session", {
    skip: plansCounted,
  }, async () => {
    const [target, other, short] = [challenge(), challenge(), challenge({ expiresAt: T0 + 5 })];
    await Promise.all([target, other, short].map((c) => store.createChallenge(c)));
    const d = await device('active');
    const six = [signIn(d), signIn(d), signIn(d), signIn(d), signIn(d), signIn(d)] as const;
    const start = await executions('svc_create_session');
    // The sign-in and its replay, another sign-in, no challenge, and one challenge named first at
    // a time it has expired and then at one it has not, in one turn: each is decided at its own
    // time, the last one again alone, since the statement decided it at the first one's.
    const answers = await Promise.all([
      createWith(six[0], { id: target.id, now: T0 + 1 }),
      createWith(six[1], { id: target.id, now: T0 + 1 }),
      createWith(six[2], { id: other.id, now: T0 + 1 }),
      create(six[3]),
      createWith(six[4], { id: short.id, now: T0 + 5 }),
      createWith(six[5], { id: short.id, now: T0 + 4 }),
    ]);
    assert.deepEqual(delta(start, await executions('svc_create_session')), { svc_create_sessions: 1, svc_create_session: 1 });
    assert.deepEqual(answers, ['created', 'challenge_used', 'created', 'created', 'challenge_used', 'created']);
    const stored = await Promise.all(six.map((s) => store.getSession(s.session.id)));
    assert.deepEqual(
      stored.map((x) => x !== null),
      [true, false, true, true, false, true],
    );
    const left = await env.admin.query<{ id: string }>(`SELECT id FROM ${schema}.challenges WHERE id = ANY($1)`, [
      [target.id, other.id, short.id],
    ]);
    assert.deepEqual(left.rows, [], 'a used challenge was left');
  });

  test('five sign-ins of one turn create their sessions and events by one statement, each answered for its own', {
    skip: plansCounted,
  }, async () => {
    const devices = await Promise.all([device('active'), device(), device('active'), device(), device('active')]);
    const five = devices.map((d) => signIn(d));
    const start = await executions('svc_create_session');
    assert.deepEqual(await Promise.all(five.map(create)), Array(5).fill('created'));
    assert.deepEqual(delta(start, await executions('svc_create_session')), { svc_create_sessions: 1 });
    for (const s of five) {
      const stored = await store.getSession(s.session.id);
      assert.deepEqual(
        [stored?.deviceId, stored?.subject, stored?.createdAt, stored?.revokedAt],
        [s.session.deviceId, s.session.subject, T0 + 1, null],
      );
    }
    // The users who have a row record the sign-in; the events are chained in the turn's order.
    const { rows: users } = await env.admin.query(
      `SELECT subject, last_sign_in_at FROM ${schema}.users WHERE subject = ANY($1) ORDER BY subject`,
      [devices.map((d) => d.subject)],
    );
    assert.deepEqual(
      users.map((u) => [u.subject, Number(u.last_sign_in_at)]),
      [devices[0], devices[2], devices[4]].map((d) => [d?.subject, T0 + 1]).sort(),
    );
    const events = await store.listAuditEvents({ afterSeq: 0, limit: 1e9 });
    assert.deepEqual(
      events.filter((e) => e.type === 'session.created' && five.some((s) => s.session.id === e.sessionId)).map((e) => e.id),
      five.map((s) => s.event.id),
    );
  });

  test('sign-in-of-a-removed-device-or-disabled-user-in-a-batch: refused for its own, the others of the turn signed in', async () => {
    const [active, removed, disabled, alsoActive] = await Promise.all([device('active'), device(), device('disabled'), device()]);
    await env.admin.query(`UPDATE ${schema}.devices SET removed_at = $2 WHERE id = $1`, [removed?.id, T0]);
    const batch = [active, removed, disabled, alsoActive].map((d) => signIn(d as DeviceRecord));
    // Each with its challenge: a refused sign-in uses its challenge up too.
    const challenges = batch.map(() => challenge());
    await Promise.all(challenges.map((c) => store.createChallenge(c)));
    assert.deepEqual(await Promise.all(batch.map((s, i) => createWith(s, { id: (challenges[i] as ChallengeRecord).id, now: T0 + 1 }))), [
      'created',
      'device_inactive',
      'user_disabled',
      'created',
    ]);
    assert.deepEqual(
      await Promise.all(challenges.map((c) => store.readChallenge({ id: c.id, now: T0 + 1 }))),
      [null, null, null, null],
      'a challenge of the batch was left usable',
    );
    const stored = await Promise.all(batch.map((s) => store.getSession(s.session.id)));
    assert.deepEqual(
      stored.map((s) => s !== null),
      [true, false, false, true],
      'a refused sign-in left a session',
    );
    const { rows } = await env.admin.query(`SELECT last_sign_in_at FROM ${schema}.users WHERE subject = $1`, [disabled?.subject]);
    assert.deepEqual(rows, [{ last_sign_in_at: null }], "a disabled user's refused sign-in was recorded");
    const events = await store.listAuditEvents({ afterSeq: 0, limit: 1e9 });
    assert.deepEqual(
      batch.map((s) => events.some((e) => e.id === s.event.id)),
      [true, false, false, true],
      'a refused sign-in was audited as a session',
    );
  });

  test('one user signing in twice in a turn gets two sessions, and the later time', async () => {
    const d = await device('active');
    const [early, late] = [signIn(d, T0 + 5), signIn(d, T0 + 9)];
    assert.deepEqual(await Promise.all([create(late), create(early)]), ['created', 'created']);
    const { rows } = await env.admin.query(`SELECT last_sign_in_at FROM ${schema}.users WHERE subject = $1`, [d.subject]);
    assert.deepEqual(
      rows.map((r) => Number(r.last_sign_in_at)),
      [T0 + 9],
    );
  });

  test('a session the table refuses fails alone: the others of its batch are created', async () => {
    const [a, b, c] = await Promise.all([device(), device(), device()]);
    const taken = signIn(a as DeviceRecord);
    assert.equal(await create(taken), 'created');
    const first = signIn(b as DeviceRecord);
    const last = signIn(c as DeviceRecord);
    // A session id stored twice, between two new ones, in one turn: the batch's statement fails whole.
    const twice = signIn(b as DeviceRecord);
    // Each with its sign-in's challenge.
    const [c1, c2, c3] = [challenge(), challenge(), challenge()];
    await Promise.all([c1, c2, c3].map((x) => store.createChallenge(x)));
    const outcomes = await Promise.allSettled([
      createWith(first, { id: c1.id, now: T0 + 1 }),
      createWith({ ...twice, session: { ...twice.session, id: taken.session.id } }, { id: c2.id, now: T0 + 1 }),
      createWith(last, { id: c3.id, now: T0 + 1 }),
    ]);
    assert.deepEqual(
      outcomes.map((o) => (o.status === 'fulfilled' ? o.value : 'rejected')),
      ['created', 'rejected', 'created'],
    );
    assert.equal((await store.getSession(taken.session.id))?.deviceId, a?.id, 'the refused row replaced the stored one');
    // The refused row's statement rolled back with its challenge's use (core then uses it up on its own).
    assert.deepEqual(
      (await Promise.all([c1, c2, c3].map((x) => store.readChallenge({ id: x.id, now: T0 + 1 })))).map((x) => x?.id ?? null),
      [null, c2.id, null],
      'the sessions created alone used their challenges up',
    );
  });

  /** Reservation calls: each one key of `keys`, at its time, with its limits. */
  type Call = {
    readonly key: string;
    /** A second key the call reserves with `key`, all or none (a refresh's address and session). */
    readonly also?: string;
    readonly now: number;
    readonly max: number;
    readonly windowMs?: number;
    readonly leaseMs?: number;
  };
  const reserve = (prefix: string, c: Call) =>
    store.reserveAttempts({
      keys: [c.key, ...(c.also === undefined ? [] : [c.also])].map((k) => `${prefix}${k}`),
      now: c.now,
      windowMs: c.windowMs ?? 60_000,
      max: c.max,
      leaseMs: c.leaseMs ?? 30_000,
    });
  /** The outcome of a reservation without its keys' prefix, to compare two runs on twin keys. */
  const outcome = (prefix: string, r: Awaited<ReturnType<typeof store.reserveAttempts>>) =>
    r.reserved ? { reserved: true, windows: r.windows.map((w) => ({ ...w, key: w.key.slice(prefix.length) })) } : r;
  async function windows(prefix: string) {
    const { rows } = await env.admin.query(
      `SELECT substr(key, $2) AS key, window_start::text, failures, pending, pending_since::text FROM ${schema}.attempt_budget
        WHERE starts_with(key, $1) ORDER BY key`,
      [prefix, prefix.length + 1],
    );
    return rows;
  }

  test('budget-overrun-by-a-burst-in-one-turn: 40 attempts of one address in one turn reserve 30, in one statement', {
    skip: plansCounted,
  }, async () => {
    const key = 'burst|addr:192.0.2.40';
    await env.admin.query(
      `INSERT INTO ${schema}.attempt_budget (key, window_start, failures, pending, pending_since) VALUES ($1, $2, 0, 0, $2)`,
      [key, T0],
    );
    const start = await executions('svc_reserve', budgetPool);
    const burst = await Promise.all(Array.from({ length: 40 }, () => reserve('', { key, now: T0 + 1, max: 30 })));
    assert.deepEqual(delta(start, await executions('svc_reserve', budgetPool)), { svc_reserve_attempt_batch: 1 });
    assert.deepEqual(
      burst.map((r) => (r.reserved ? 'reserved' : r.busy ? 'busy' : 'refused')),
      [...Array(30).fill('reserved'), ...Array(10).fill('busy')],
    );
    assert.deepEqual(
      burst.flatMap((r) => (r.reserved ? r.windows.map((w) => w.pending) : [])),
      Array.from({ length: 30 }, (_, i) => i + 1),
    );
    assert.deepEqual(await windows(key), [
      { key: '', window_start: String(T0 + 1), failures: 30 - 30, pending: 30, pending_since: String(T0 + 1) },
    ]);
  });

  test('a turn of reservations decides what they one at a time did: each at its own time and limits, on the windows the ones before left', async () => {
    // Twin keys, `a:` reserved in one turn and `b:` one call at a time, from the same windows.
    for (const prefix of ['a:', 'b:']) {
      await env.admin.query(
        `INSERT INTO ${schema}.attempt_budget (key, window_start, failures, pending, pending_since) VALUES
           ($1 || 'full', $2, 30, 0, $2), ($1 || 'busy', $3, 2, 1, $3), ($1 || 'leased', $3, 0, 3, $4), ($1 || 'future', $5, 1, 1, $5)`,
        [prefix, T0 - 59_990, T0 - 1000, T0 - 29_995, T0 + 5000],
      );
    }
    const calls: Call[] = [
      // Failures fill it until T0 + 10; the window that starts again then reserves.
      { key: 'full', now: T0, max: 30 },
      { key: 'full', now: T0 + 10, max: 30 },
      { key: 'full', now: T0 + 5, max: 30 },
      // Two failures and one running: a limit of 4 takes one more, a limit of 5 two.
      { key: 'busy', now: T0, max: 4 },
      { key: 'busy', now: T0, max: 4 },
      { key: 'busy', now: T0, max: 5 },
      // The running three's lease ends at T0 + 5: before it they count, after it they are dropped.
      { key: 'leased', now: T0, max: 4 },
      { key: 'leased', now: T0 + 1, max: 4 },
      { key: 'leased', now: T0 + 6, max: 4 },
      { key: 'leased', now: T0 + 6, max: 4 },
      // A window dated in the future restarts now, its counts kept.
      { key: 'future', now: T0, max: 3 },
      { key: 'future', now: T0, max: 3 },
      // A key never seen: its row is made, then it reserves.
      { key: 'new', now: T0, max: 2 },
      { key: 'new', now: T0 + 1, max: 2 },
      { key: 'new', now: T0 + 2, max: 2 },
      // Two keys, all or none: `new` is full, so `pair` reserves nothing with it; alone it does,
      // and then with a fresh `other`, which a key refused with it never moves.
      { key: 'new', also: 'pair', now: T0 + 3, max: 2 },
      { key: 'pair', now: T0 + 3, max: 2 },
      { key: 'other', also: 'pair', now: T0 + 4, max: 2 },
      { key: 'other', also: 'pair', now: T0 + 4, max: 2 },
      { key: 'other', now: T0 + 5, max: 2 },
    ];
    const together = await Promise.all(calls.map((c) => reserve('a:', c)));
    const alone = [];
    for (const c of calls) alone.push(await reserve('b:', c));
    assert.deepEqual(
      together.map((r) => outcome('a:', r)),
      alone.map((r) => outcome('b:', r)),
    );
    assert.deepEqual(await windows('a:'), await windows('b:'));
    // Not a vacuous agreement: the runs reserved some and refused some, for both reasons.
    assert.deepEqual(alone.map((r) => (r.reserved ? 'r' : r.busy ? 'b' : 'x')).join(''), 'xrrrbrrbrrrbrrbbrrbr');
  });

  test("the writes' own sealing passes chain every event shortly after its commit, with no read of the trail", async () => {
    const d = await device('active');
    const batch = Array.from({ length: 6 }, () => signIn(d));
    assert.deepEqual(await Promise.all(batch.map(create)), Array(6).fill('created'));
    // A write in a transaction of its own (its event appended there), just after.
    assert.equal(
      await store.revokeSession({ sessionId: batch[0]?.session.id as string, now: T0 + 2, reason: 'test' }, draft('session.revoked', d)),
      true,
    );
    const deadline = Date.now() + 5_000;
    for (;;) {
      const { rows } = await env.admin.query(`SELECT count(*)::int AS n FROM ${schema}.audit_pending`);
      if (rows[0]?.n === 0) break;
      if (Date.now() > deadline) assert.fail(`${rows[0]?.n} audit events still pending 5 s after their writes committed`);
      await new Promise((r) => setTimeout(r, 10));
    }
    const { rows } = await env.admin.query(`SELECT count(*)::int AS n FROM ${schema}.audit_events WHERE id = ANY($1)`, [
      batch.map((s) => s.event.id),
    ]);
    assert.deepEqual(rows, [{ n: 6 }]);
  });

  test('dpop-proof-replayed-in-the-same-batch: four requests of one turn record their proofs in one statement, a replay among them refused', {
    skip: plansCounted,
  }, async () => {
    const proofs = ['jti-a', 'jti-b', 'jti-c'].map((k) => `${schema}|${k}`);
    const start = await executions('svc_use_dpop');
    const used = await Promise.all([
      store.useDpopProof({ key: proofs[0] as string, expiresAt: T0 + 60_000, now: T0 }),
      store.useDpopProof({ key: proofs[1] as string, expiresAt: T0 + 60_000, now: T0 }),
      // The first proof again, in the same turn: a replay.
      store.useDpopProof({ key: proofs[0] as string, expiresAt: T0 + 60_000, now: T0 }),
      store.useDpopProof({ key: proofs[2] as string, expiresAt: T0 + 60_000, now: T0 }),
    ]);
    assert.deepEqual(delta(start, await executions('svc_use_dpop')), { svc_use_dpop_proofs: 1 });
    assert.deepEqual(used, [true, true, false, true]);
    // And once recorded, refused until it expires, alone or in a batch.
    assert.deepEqual(await Promise.all(proofs.map((key) => store.useDpopProof({ key, expiresAt: T0 + 60_000, now: T0 + 1 }))), [
      false,
      false,
      false,
    ]);
  });

  test('a batch of proofs decides each at its own time: a record that expired by a later call of the turn is taken over', async () => {
    const ending = `${schema}|jti-ending`;
    const live = `${schema}|jti-live`;
    assert.equal(await store.useDpopProof({ key: ending, expiresAt: T0 + 5, now: T0 }), true);
    assert.equal(await store.useDpopProof({ key: live, expiresAt: T0 + 60_000, now: T0 }), true);
    // One turn, calls at T0 + 1 and T0 + 10: `ending` is live at T0 + 1, expired at T0 + 10.
    const used = await Promise.all([
      store.useDpopProof({ key: `${schema}|jti-new`, expiresAt: T0 + 60_000, now: T0 + 1 }),
      store.useDpopProof({ key: ending, expiresAt: T0 + 60_000, now: T0 + 10 }),
      store.useDpopProof({ key: live, expiresAt: T0 + 60_000, now: T0 + 10 }),
    ]);
    assert.deepEqual(used, [true, true, false]);
    // One proof twice in a turn, at T0 + 4 (its record live) and T0 + 10 (expired): refused, then
    // recorded, as one call at a time.
    const again = `${schema}|jti-again`;
    assert.equal(await store.useDpopProof({ key: again, expiresAt: T0 + 5, now: T0 }), true);
    assert.deepEqual(
      await Promise.all([
        store.useDpopProof({ key: again, expiresAt: T0 + 60_000, now: T0 + 4 }),
        store.useDpopProof({ key: again, expiresAt: T0 + 60_000, now: T0 + 10 }),
        store.useDpopProof({ key: again, expiresAt: T0 + 60_000, now: T0 + 10 }),
      ]),
      [false, true, false],
    );
  });

  test("one turn's session reads are one named statement, each answered with its own session or none", { skip: plansCounted }, async () => {
    const d = await device();
    const three = Array.from({ length: 3 }, () => signIn(d));
    assert.deepEqual(await Promise.all(three.map(create)), Array(3).fill('created'));
    const unknown = newId('session', clock, random);
    const start = await executions('svc_read_session');
    const read = await Promise.all(
      [...three.map((s) => s.session.id), unknown, three[0]?.session.id as string].map((id) => store.getSession(id)),
    );
    assert.deepEqual(delta(start, await executions('svc_read_session')), { svc_read_sessions_4: 1 });
    assert.deepEqual(
      read.map((s) => s?.id ?? null),
      [...three.map((s) => s.session.id), null, three[0]?.session.id],
    );
  });

  test('refresh-with-sql-in-its-session-id: refused as unknown, and nothing of it runs', async () => {
    const d = await device();
    const live = signIn(d);
    assert.equal(await create(live), 'created');
    for (const sessionId of [`${live.session.id}' OR 'x' = 'x`, `ses_'; DELETE FROM sessions; --`, live.session.id.toLowerCase()]) {
      const outcome = await store.rotateRefreshToken(
        {
          sessionId,
          presentedDigest: live.pair.refreshDigest,
          realm: 'management',
          now: T0 + 2,
          graceMs: 0,
          next: { ...live.pair, accessDigest: digestToken('a'), refreshDigest: digestToken('r') },
          sealedSuccessor: 'sealed',
        },
        () => draft('session.rotated', d, live.session.id),
      );
      assert.deepEqual(outcome, { kind: 'invalid' });
    }
    const { rows } = await env.admin.query(`SELECT generation, refresh_digest FROM ${schema}.sessions WHERE id = $1`, [live.session.id]);
    assert.deepEqual(rows, [{ generation: 0, refresh_digest: live.pair.refreshDigest }], 'the session was rotated or changed');
  });

  test("a-user-row-held-past-lock_timeout-fails-only-its-own-sign-in: the others of the turn's batch are created", async () => {
    const [held, a, b] = await Promise.all([device('active'), device('active'), device()]);
    // A store that waits 300 ms for a lock (a statement that fails takes its connection with it:
    // the setting must come with every connection).
    const timed = oneConnectionStore(schema, serverVersion, '-c lock_timeout=300');
    // Another writer (an operator's change of the user, say) holds the user's row.
    const holder = await env.admin.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${schema}.users WHERE subject = $1 FOR UPDATE`, [held?.subject]);
      const batch = [a, held, b].map((d) => signIn(d as DeviceRecord));
      const outcomes = await Promise.allSettled(batch.map((s) => timed.store.createSession(s.session, s.pair, s.event)));
      assert.deepEqual(
        outcomes.map((o) => (o.status === 'fulfilled' ? o.value : (o.reason as { code?: string }).code)),
        ['created', 'store_unavailable', 'created'],
      );
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
      // Chains what it wrote, then ends its pools.
      await timed.store.close();
    }
  });
});

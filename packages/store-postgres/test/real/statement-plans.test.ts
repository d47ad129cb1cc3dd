import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';
import {
  type AuthDeps,
  authenticate,
  createChallenge,
  createSession,
  enrollWithBootstrapToken,
  issueBootstrapToken,
  newId,
  revokeSession,
  rotateRefreshToken,
  silentLogger,
} from '@svc/core';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import type { SessionRecord } from '@svc/core/store';
import { dpopProof, newDeviceKey } from '@svc/store-testkit';
import pg from 'pg';
import { AttemptBudget } from '../../src/attempt-budget.js';
import { BearerBatch } from '../../src/bearer-batch.js';
import type { PostgresStore } from '../../src/index.js';
import { budgetPoolConfig } from '../../src/open-postgres-store.js';
import { createTestEnv, oneConnectionStore, PG_URL } from '../pg-test-env.js';

const T0 = Date.UTC(2026, 10, 28, 12, 0, 0, 0);
const clock = { now: () => T0 };
const random = (n: number) => randomBytes(n);
/** Sessions in the table: enough that PostgreSQL's generic plan of a lookup by a ten-element guess costs more than a custom one. */
const SESSIONS = 20_000;
/** How often each batch size is looked up: PostgreSQL makes five custom plans of a statement before it may keep a generic one. */
const ROUNDS = 12;
/** Keys in the attempt budget: the windows of many clients. */
const BUDGET_KEYS = 20_000;

const env = createTestEnv();
after(() => env.dispose());
/** The server's `server_version_num`: pg_prepared_statements counts plans from PostgreSQL 14 on. */
const serverVersion = Number(
  (await env.admin.query<{ server_version_num: string }>('SHOW server_version_num')).rows[0]?.server_version_num,
);
const skip = serverVersion >= 140_000 ? false : 'pg_prepared_statements counts generic and custom plans from PostgreSQL 14 on';

const md5 = (text: string) => createHash('md5').update(text).digest('hex');
const seededId = (i: number) => `ses_PLAN${i}`;
/** The access digest the seed gives session `i` (as bench/harness.ts insertPostgresSessions does). */
const seededDigest = (i: number) => md5(`a${i}`) + md5(`b${i}`);

// The bearer check's statements are named so that each pool connection plans them once. PostgreSQL
// keeps a named statement's generic plan only when it costs no more than its custom plans; the
// batch's `id = ANY($1::text[])` never did on a table of some thousands of sessions (its generic
// plan assumes ten elements), so every batch was planned anew.
describe('the bearer check on a store of many sessions is planned once per connection', { skip }, () => {
  const schema = env.schema();
  let store: PostgresStore;
  let pool: pg.Pool;
  let batch: BearerBatch;

  before(async () => {
    store = await env.open(schema);
    const subject = newId('subject', clock, random);
    const device = {
      id: newId('device', clock, random),
      publicKey: randomBytes(32).toString('hex'),
      realm: 'management' as const,
      subject,
      name: 'laptop',
      createdAt: T0,
      removedAt: null,
    };
    const event = {
      id: newId('event', clock, random),
      at: T0,
      type: 'device.enrolled' as const,
      realm: 'management' as const,
      subject,
      deviceId: device.id,
      sessionId: null,
      data: {},
    };
    assert.equal(await store.enrollDevice(device, event), 'enrolled');
    await env.admin.query(
      `INSERT INTO ${schema}.sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at, refresh_digest, refresh_expires_at)
       SELECT 'ses_PLAN' || i, 'management', $1, $2, $3, $4, md5('a' || i) || md5('b' || i), $4, md5('c' || i) || md5('d' || i), $4
       FROM generate_series(1, ${SESSIONS}) AS i`,
      [subject, device.id, T0, T0 + 3_600_000],
    );
    await env.admin.query(`ANALYZE ${schema}.sessions`);
    await env.admin.query(`ANALYZE ${schema}.users`);
    // One connection, so that pg_prepared_statements (per connection) shows every execution.
    pool = new pg.Pool({ connectionString: PG_URL, max: 1, options: `-c search_path=${schema}` });
    batch = new BearerBatch(pool);
  });
  after(async () => {
    await pool.end();
    await store.close();
  });

  /** The checks of `indexes` in one event-loop turn (one batch), each with its own digest or a wrong one. */
  const checks = (indexes: readonly number[], digest: (i: number) => string = seededDigest): Promise<(SessionRecord | null)[]> =>
    Promise.all(indexes.map((i) => batch.find(seededId(i), digest(i))));

  test('a batch answers each check by its own session and digest, duplicates and wrong digests included', async () => {
    const found = await checks([1, 2, 2, 3, 19_999]);
    assert.deepEqual(
      found.map((s) => s?.id),
      [seededId(1), seededId(2), seededId(2), seededId(3), seededId(19_999)],
    );
    const wrong = await checks([4, 5, 6], (i) => (i === 5 ? seededDigest(6) : seededDigest(i)));
    assert.deepEqual(
      wrong.map((s) => s?.id ?? null),
      [seededId(4), null, seededId(6)],
    );
    assert.deepEqual(await checks([SESSIONS + 1, 7]).then((r) => r.map((s) => s?.id ?? null)), [null, seededId(7)]);
  });

  test('after five custom plans, every statement of the bearer check runs its generic plan', async () => {
    const sizes = [1, 2, 3, 5, 8, 13];
    let next = 100;
    for (let round = 0; round < ROUNDS; round++) {
      for (const size of sizes) {
        const indexes = Array.from({ length: size }, () => next++);
        const found = await checks(indexes);
        assert.deepEqual(
          found.map((s) => s?.id),
          indexes.map(seededId),
        );
      }
    }
    const plans = await plansOf(pool, 'svc_session');
    for (const p of plans) {
      assert.ok(p.custom <= 5, `${p.name} was planned anew ${p.custom} times (generic plan used ${p.generic} times)`);
      assert.ok(p.generic >= 1, `${p.name} never used its generic plan (${p.custom} custom plans)`);
    }
    // One statement per arity: 1, 2, 4, 8 and 16 for these sizes (sorted here, whatever the server's collation).
    assert.deepEqual(plans.map((p) => p.name).sort(), [
      'svc_session_for_access',
      'svc_sessions_for_access_16',
      'svc_sessions_for_access_2',
      'svc_sessions_for_access_4',
      'svc_sessions_for_access_8',
    ]);
  });
});

/** Every prepared statement of the connection `pool` holds whose name starts with `prefix`, with its plan counts. */
async function plansOf(pool: pg.Pool, prefix: string): Promise<{ name: string; generic: number; custom: number }[]> {
  const { rows } = await pool.query<{ name: string; generic_plans: string; custom_plans: string }>(
    'SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE starts_with(name, $1) ORDER BY name',
    [prefix],
  );
  return rows.map((r) => ({ name: r.name, generic: Number(r.generic_plans), custom: Number(r.custom_plans) }));
}

// The attempt budget's statements take their keys as an array too (`key = ANY($1::text[])`), and
// its table holds a window per client address (and per session being refreshed): thousands on a
// busy service or under an attack from many addresses. Its pool runs them on generic plans.
describe("the attempt budget's statements are planned once per connection of its pool, with many clients' windows", { skip }, () => {
  const schema = env.schema();
  let store: PostgresStore;
  let pool: pg.Pool;

  before(async () => {
    store = await env.open(schema);
    await env.admin.query(
      `INSERT INTO ${schema}.attempt_budget (key, window_start, failures, pending, pending_since)
       SELECT 'ip:198.51.100.' || i, $1, 0, 0, $1 FROM generate_series(1, ${BUDGET_KEYS}) AS i`,
      [T0],
    );
    await env.admin.query(`ANALYZE ${schema}.attempt_budget`);
    // The store's budget pool on one connection; BIGINT as numbers, as the store's pools read it.
    const types = new pg.TypeOverrides();
    types.setTypeParser(20, 'text', Number);
    pool = new pg.Pool({
      ...budgetPoolConfig({ connectionString: PG_URL, options: `-c search_path=${schema}`, types }, serverVersion),
      max: 1,
    });
  });
  after(async () => {
    await pool.end();
    await store.close();
  });

  test('reservations and settlements of new and known keys run generic plans', async () => {
    const budget = new AttemptBudget(pool);
    for (let i = 0; i < ROUNDS; i++) {
      // A new client's address and session (their windows are opened), then a known address.
      for (const keys of [[`ip:203.0.113.${i}`, `session:${i}`], [`ip:198.51.100.${i + 1}`]]) {
        const reservation = await budget.reserve({ keys, now: T0 + 1_000, windowMs: 60_000, max: 30, leaseMs: 30_000 });
        assert.ok(reservation.reserved, `the reservation of ${keys.join(', ')} was refused`);
        await budget.settle({ windows: reservation.windows, failed: i % 2 === 0 });
      }
    }
    const plans = await plansOf(pool, 'svc_');
    assert.deepEqual(plans.map((p) => p.name).sort(), ['svc_open_attempt_windows', 'svc_reserve_attempt_windows', 'svc_settle_attempts']);
    // The pool forces generic plans: not one custom plan.
    for (const p of plans) {
      assert.ok(p.custom === 0 && p.generic > 0, `${p.name} ran ${p.custom} custom plans and ${p.generic} generic ones`);
    }
    // The windows counted what was settled: the known addresses' failures, one each in every other round.
    const { rows } = await env.admin.query<{ failures: number }>(
      `SELECT failures FROM ${schema}.attempt_budget WHERE key = 'ip:198.51.100.1'`,
    );
    assert.equal(rows[0]?.failures, 1);
  });
});

// The writes of short-lived records (challenges, DPoP records, handoff codes) pruned expired rows
// inside their own named statement; a plan for `expires_at <= $n` depends on the value, so with
// some thousands of live rows PostgreSQL planned those statements anew on every sign-in and
// every DPoP-checked request. The whole of a sign-in, a DPoP-checked request, a rotation and a
// sign-out, through core's use cases on a store whose tables hold many rows.
describe("every named statement of a session's life is planned once per connection, on tables of many rows", { skip }, () => {
  const schema = env.schema();
  let migrated: PostgresStore;
  let pool: pg.Pool;
  let budgetPool: pg.Pool;
  let deps: AuthDeps;
  const admin = newDeviceKey();
  const publicKey = admin.publicKey;

  before(async () => {
    migrated = await env.open(schema);
    const one = oneConnectionStore(schema, serverVersion);
    ({ pool, budgetPool } = one);
    const store = one.store;
    deps = {
      store,
      clock: { now: () => Date.now(), monotonic: () => performance.now() },
      random,
      log: silentLogger,
      projectId: 'plans',
      settings: Object.freeze({ ...DEFAULT_AUTH_SETTINGS }),
    };
    await store.initProject({ projectId: 'plans', createdAt: Date.now() });
    const bootstrap = await issueBootstrapToken(deps, { recovery: false });
    const device = await enrollWithBootstrapToken(deps, { bootstrapToken: bootstrap.token, publicKey });
    // Live rows of every table a session's life writes or reads, as a busy store holds them.
    const live = Date.now() + 3_600_000;
    await env.admin.query(
      `INSERT INTO ${schema}.sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at, refresh_digest, refresh_expires_at)
       SELECT 'ses_LIFE' || i, 'management', $1, $2, 1, $3, md5('a' || i) || md5('b' || i), $3, md5('c' || i) || md5('d' || i), $3
       FROM generate_series(1, ${SESSIONS}) AS i`,
      [device.subject, device.id, live],
    );
    await env.admin.query(
      `INSERT INTO ${schema}.challenges (id, public_key, realm, challenge, created_at, expires_at)
       SELECT 'chl_LIFE' || i, $1, 'management', md5('x' || i), 1, $2 FROM generate_series(1, ${SESSIONS}) AS i`,
      ['ab'.repeat(32), live],
    );
    await env.admin.query(
      `INSERT INTO ${schema}.dpop_proofs (proof_key, expires_at) SELECT 'jti' || i, $1 FROM generate_series(1, ${SESSIONS}) AS i`,
      [live],
    );
    await env.admin.query(
      `INSERT INTO ${schema}.handoff_codes (digest, session_id, origin, binding_digest, created_at, expires_at)
       SELECT md5('h' || i), 'ses_LIFE' || i, 'https://app.example.com', md5('b' || i), 1, $1 FROM generate_series(1, ${SESSIONS}) AS i`,
      [live],
    );
    for (const table of ['sessions', 'challenges', 'dpop_proofs', 'handoff_codes', 'devices', 'users']) {
      await env.admin.query(`ANALYZE ${schema}.${table}`);
    }
  });
  after(async () => {
    await pool.end();
    await budgetPool.end();
    await migrated.close();
  });

  test("a bound session's rotation reads its session once and records its proof in the rotation's own statement", async () => {
    const refresh = 'http://127.0.0.1/v1/auth/refresh';
    const challenge = await createChallenge(deps, { publicKey, realm: 'management' });
    let pair = await createSession(deps, { challengeId: challenge.id, signature: admin.sign(challenge.challenge), realm: 'management' });
    const runs = async () => {
      const counts = new Map<string, number>();
      for (const p of await plansOf(pool, 'svc_')) counts.set(p.name, p.generic + p.custom);
      return (name: string) => counts.get(name) ?? 0;
    };
    const before = await runs();
    const ROTATIONS = 8;
    for (let i = 0; i < ROTATIONS; i++) {
      pair = await rotateRefreshToken(deps, {
        refreshToken: pair.refresh_token,
        realm: 'management',
        dpop: { proof: dpopProof(admin, { htm: 'POST', htu: refresh, now: Date.now() }), htm: 'POST', htu: refresh },
      });
    }
    const after = await runs();
    const ran = (name: string) => after(name) - before(name);
    assert.equal(ran('svc_rotate_with_proof_if_unchanged'), ROTATIONS, 'one statement writes each rotation and its proof');
    assert.equal(ran('svc_read_session'), ROTATIONS, 'one read of the session per rotation');
    assert.equal(ran('svc_use_dpop_proof') + ran('svc_use_dpop_proofs'), 0, 'no write of the proof of its own');
  });

  test('sign-ins, DPoP-checked requests, rotations, sign-outs and handoff codes run generic plans after five custom ones', async () => {
    const me = 'http://127.0.0.1/v1/auth/me';
    const refresh = 'http://127.0.0.1/v1/auth/refresh';
    for (let i = 0; i < ROUNDS; i++) {
      const challenge = await createChallenge(deps, { publicKey, realm: 'management' });
      const pair = await createSession(deps, {
        challengeId: challenge.id,
        signature: admin.sign(challenge.challenge),
        realm: 'management',
      });
      const ath = createHash('sha256').update(pair.access_token).digest('base64url');
      const principal = await authenticate(deps, {
        token: pair.access_token,
        realm: 'management',
        dpop: { proof: dpopProof(admin, { htm: 'GET', htu: me, now: Date.now(), ath }), htm: 'GET', htu: me },
      });
      const next = await rotateRefreshToken(deps, {
        refreshToken: pair.refresh_token,
        realm: 'management',
        dpop: { proof: dpopProof(admin, { htm: 'POST', htu: refresh, now: Date.now() }), htm: 'POST', htu: refresh },
      });
      assert.notEqual(next.access_token, pair.access_token);
      // A bearer session (signed in under :off) rotates with the statement that records no proof.
      const bearerDeps: AuthDeps = {
        ...deps,
        settings: Object.freeze({ ...deps.settings, senderConstraint: Object.freeze({ management: 'off', application: 'off' } as const) }),
      };
      const again = await createChallenge(bearerDeps, { publicKey, realm: 'management' });
      const bearer = await createSession(bearerDeps, {
        challengeId: again.id,
        signature: admin.sign(again.challenge),
        realm: 'management',
      });
      await rotateRefreshToken(bearerDeps, { refreshToken: bearer.refresh_token, realm: 'management' });
      await revokeSession(deps, { principal });
      await deps.store.createHandoffCode({
        digest: randomBytes(32).toString('hex'),
        sessionId: pair.session_id,
        origin: 'https://app.example.com',
        bindingDigest: randomBytes(32).toString('hex'),
        createdAt: Date.now(),
        expiresAt: Date.now() + 60_000,
      });
    }
    const plans = [...(await plansOf(pool, 'svc_')), ...(await plansOf(budgetPool, 'svc_'))];
    for (const name of [
      'svc_create_challenge',
      'svc_read_challenge',
      'svc_use_dpop_proof',
      'svc_rotate_with_proof_if_unchanged',
      'svc_rotate_if_unchanged',
      'svc_create_handoff_code',
    ]) {
      const ran = plans.find((p) => p.name === name);
      assert.ok(ran !== undefined, `${name} did not run: ${plans.map((p) => p.name).join(', ')}`);
      assert.ok(ran.generic >= 1, `${name} never ran its generic plan (${ran.custom} custom plans)`);
    }
    for (const p of plans) {
      assert.ok(p.custom <= 5, `${p.name} was planned anew ${p.custom} times (generic plan used ${p.generic} times)`);
    }
  });
});

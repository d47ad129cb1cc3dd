import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type AttemptReservation, decideAttemptWindow } from '@svc/core/store';
import type { PostgresStore } from '../../src/index.js';
import { createTestEnv } from '../pg-test-env.js';

const T0 = Date.UTC(2026, 10, 22, 10, 0, 0, 0);
const WINDOW = 60_000;
const MAX = 30;
const LEASE = 30_000;

const env = createTestEnv();
after(() => env.dispose());

describe('shared attempt budget on PostgreSQL (two nodes, one schema)', () => {
  let a: PostgresStore;
  let b: PostgresStore;
  let schema: string;
  before(async () => {
    schema = env.schema();
    a = await env.open(schema);
    b = await env.open(schema);
  });
  after(async () => {
    await a.close();
    await b.close();
  });

  const reserve = (node: PostgresStore, keys: readonly string[], now = T0): Promise<AttemptReservation> =>
    node.reserveAttempts({ keys, now, windowMs: WINDOW, max: MAX, leaseMs: LEASE });
  const failAll = async (node: PostgresStore, reservations: readonly AttemptReservation[]) => {
    for (const r of reservations) if (r.reserved) await node.settleAttempts({ windows: r.windows, failed: true });
  };

  test('an attack spread over two nodes: of 100 concurrent attempts against one budget of 30, exactly 30 run; once they fail, the rest are refused', async () => {
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => reserve(i % 2 === 0 ? a : b, ['addr:loopback'])));
    const running = results.filter((r) => r.reserved);
    assert.equal(running.length, MAX);
    assert.ok(
      results.every((r) => (r.reserved ? r.shared : r.busy)),
      'the others wait: busy, not refused, while attempts run',
    );
    await failAll(b, running);
    const refused = await reserve(a, ['addr:loopback']);
    assert.ok(!refused.reserved && !refused.busy, 'refused once the failures fill the budget');
    assert.equal(refused.retryAfterMs, WINDOW);
  });

  test('a settled success gives its slot back, on any node; a window that ended starts afresh', async () => {
    const key = 'refresh:ses_SETTLE';
    const held: AttemptReservation[] = [];
    for (let i = 0; i < MAX; i++) held.push(await reserve(a, [key]));
    assert.equal((await reserve(b, [key])).reserved, false);
    const [first, ...rest] = held;
    assert.ok(first?.reserved);
    await b.settleAttempts({ windows: first.windows, failed: false });
    assert.equal((await reserve(b, [key])).reserved, true, 'the slot came back');
    await failAll(a, rest);
    assert.equal((await reserve(a, [key], T0 + LEASE - 1)).reserved, false, '29 failed and 1 running, within its lease');
    assert.equal((await reserve(a, [key], T0 + WINDOW)).reserved, true, 'a new window');
    // Settling a reservation of the window that ended changes nothing in the new one.
    await a.settleAttempts({ windows: first.windows, failed: true });
    for (let i = 1; i < MAX; i++) assert.equal((await reserve(b, [key], T0 + WINDOW)).reserved, true, `slot ${i + 1}`);
    assert.equal((await reserve(b, [key], T0 + WINDOW)).reserved, false);
  });

  test('concurrent settles on one node leave the rows as settling one by one would', async () => {
    const key = 'addr:192.0.2.44';
    const other = 'device:dev_BATCH';
    const row = async (k: string) =>
      (
        await env.admin.query<{ failures: number; pending: number; window_start: string }>(
          `SELECT failures, pending, window_start FROM ${schema}.attempt_budget WHERE key = $1`,
          [k],
        )
      ).rows[0];
    // An ended window's reservation, settled together with the others below: it owes the new window nothing.
    const old = await reserve(a, [key], T0 - 2 * WINDOW);
    assert.ok(old.reserved);
    const held: AttemptReservation[] = [];
    for (let i = 0; i < 12; i++) held.push(await reserve(i % 2 === 0 ? a : b, i < 4 ? [key, other] : [key]));
    assert.ok(held.every((r) => r.reserved));
    assert.equal((await row(key))?.pending, 12);
    // All at once, on one node: 5 failed (2 of them on both keys), 7 succeeded, and the ended window's failure.
    await Promise.all([
      ...held.map((r, i) => (r.reserved ? b.settleAttempts({ windows: r.windows, failed: i % 3 === 0 || i === 5 }) : null)),
      old.reserved ? b.settleAttempts({ windows: old.windows, failed: true }) : null,
    ]);
    assert.deepEqual(await row(key), { failures: 5, pending: 0, window_start: String(T0) });
    assert.deepEqual(await row(other), { failures: 2, pending: 0, window_start: String(T0) });
    // The budget then counts on from there: 25 more of 30 run, the 26th is refused.
    const more: AttemptReservation[] = [];
    for (let i = 0; i < MAX - 5; i++) more.push(await reserve(a, [key]));
    assert.ok(more.every((r) => r.reserved));
    await failAll(a, more);
    assert.equal((await reserve(b, [key])).reserved, false);
  });

  test('a reservation is all or none across its keys', async () => {
    const held: AttemptReservation[] = [];
    for (let i = 0; i < MAX; i++) held.push(await reserve(a, ['addr:203.0.113.1']));
    await failAll(a, held);
    const refused = await reserve(b, ['addr:203.0.113.2', 'addr:203.0.113.1']);
    assert.equal(refused.reserved, false);
    for (let i = 0; i < MAX; i++) assert.equal((await reserve(b, ['addr:203.0.113.2'])).reserved, true, `slot ${i + 1} is still free`);
  });

  test('a node whose clock was stepped back 1 h finds the window in the future: the failures stay, the wait is at most one window', async () => {
    const key = 'addr:198.51.100.7';
    const held: AttemptReservation[] = [];
    for (let i = 0; i < MAX; i++) held.push(await reserve(a, [key]));
    await failAll(a, held);
    const stepped = await reserve(b, [key], T0 - 3_600_000);
    assert.ok(!stepped.reserved && !stepped.busy, 'stepping the clock back does not reopen the budget');
    assert.equal(stepped.retryAfterMs, WINDOW, 'nor stretch the wait to 61 minutes');
  });

  test('a sweep of ended windows that fails does not fail the reservation it follows, nor keep its slot', async () => {
    // Every 64th reservation of a node sweeps windows that ended long ago, after the
    // reservation committed. A trigger makes that sweep fail here.
    await env.admin.query(`
      CREATE FUNCTION ${schema}.refuse_sweep() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'sweep refused by the test'; END $$;
      CREATE TRIGGER refuse_sweep BEFORE DELETE ON ${schema}.attempt_budget FOR EACH ROW EXECUTE FUNCTION ${schema}.refuse_sweep();
      INSERT INTO ${schema}.attempt_budget (key, window_start, failures, pending, pending_since) VALUES ('sweep:old', ${T0 - 10 * WINDOW}, 3, 0, 0);`);
    try {
      const node = await env.open(schema);
      try {
        for (let i = 0; i < 64; i++) {
          const r = await node.reserveAttempts({ keys: [`sweep:${i}`], now: T0, windowMs: WINDOW, max: MAX, leaseMs: LEASE });
          assert.ok(r.reserved, `reservation ${i + 1} is answered, the failing sweep notwithstanding`);
          await node.settleAttempts({ windows: r.windows, failed: false });
        }
      } finally {
        await node.close();
      }
      const left = await env.admin.query(
        `SELECT count(*)::int AS n FROM ${schema}.attempt_budget WHERE key LIKE 'sweep:%' AND key <> 'sweep:old' AND pending > 0`,
      );
      assert.equal((left.rows[0] as { n: number }).n, 0, 'every slot was given back');
    } finally {
      await env.admin.query(`DROP TRIGGER refuse_sweep ON ${schema}.attempt_budget`);
    }
  });

  test('a node killed with SIGKILL while holding 29 of 30 slots: the survivor reclaims them after the lease, long before the window ends', async () => {
    const key = 'addr:killed-node';
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        fileURLToPath(new URL('../fixtures/reserve-and-hang.ts', import.meta.url)),
        schema,
        `signin|${key}`,
        '29',
        String(T0),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('waited 20 s for the child node to reserve its 29 slots')), 20_000);
        child.stdout?.on('data', (chunk: Buffer) => {
          if (chunk.toString('utf8').includes('reserved')) {
            clearTimeout(timer);
            resolve();
          }
        });
        child.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`the child node exited (${code}) before reserving`));
        });
      });
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    const k = `signin|${key}`;
    // Held: the survivor gets the one slot left, then the window is full of the dead node's.
    const one = await reserve(a, [k], T0 + 1_000);
    assert.ok(one.reserved, 'the 30th slot');
    const busy = await reserve(a, [k], T0 + 2_000);
    assert.ok(!busy.reserved && busy.busy, "the dead node's 29 slots are still leased");
    // After the lease (and 30 s before the window ends) they are reclaimed: the survivor's
    // attempts are counted again, 30 of them, with no wait for the window.
    for (let i = 0; i < MAX; i++) {
      const r = await reserve(b, [k], T0 + LEASE + 1_000);
      assert.ok(r.reserved, `survivor attempt ${i + 1} after the lease`);
    }
    assert.equal((await reserve(b, [k], T0 + LEASE + 1_000)).reserved, false, 'the budget still holds: 30 running');
  });

  test("one statement decides as core does: over every kind of stored window, the reservation and the row it leaves are decideAttemptWindow's", async () => {
    // The statement carries core's rule as SQL (attemptWindowSql); the store decides again in
    // TypeScript on the locked row and refuses to go on when the two differ. A drift in either
    // fails here: a throw, or a row or an answer other than the rule's.
    const starts = [T0 - WINDOW - 1, T0 - WINDOW, T0 - WINDOW + 1, T0 - 1_000, T0, T0 + 3_600_000];
    const failures = [0, 1, MAX - 1, MAX, MAX + 1];
    const pending = [0, 1, MAX - 1, MAX];
    const leases = [T0 - LEASE - 1, T0 - LEASE, T0 - LEASE + 1, T0, T0 + 3_600_000];
    let n = 0;
    for (const start of starts) {
      for (const f of failures) {
        for (const p of pending) {
          for (const since of leases) {
            const key = `grid:${n++}`;
            await env.admin.query(
              `INSERT INTO ${schema}.attempt_budget (key, window_start, failures, pending, pending_since) VALUES ($1, $2, $3, $4, $5)`,
              [key, start, f, p, since],
            );
            const stored = f + p === 0 ? undefined : { key, start, failures: f, pending: p, pendingSince: since };
            const expected = decideAttemptWindow(key, stored, { now: T0, windowMs: WINDOW, max: MAX, leaseMs: LEASE });
            const got = await reserve(n % 2 === 0 ? a : b, [key]);
            const row = (
              await env.admin.query(`SELECT window_start, failures, pending, pending_since FROM ${schema}.attempt_budget WHERE key = $1`, [
                key,
              ])
            ).rows[0] as { window_start: string; failures: number; pending: number; pending_since: string };
            const after = {
              key,
              start: Number(row.window_start),
              failures: row.failures,
              pending: row.pending,
              pendingSince: Number(row.pending_since),
            };
            const where = `start ${start - T0} ms from now, ${f} failed, ${p} running since ${since - T0} ms from now`;
            if (expected.kind === 'reserve') {
              assert.deepEqual(got, { reserved: true, shared: true, windows: [expected.window] }, where);
              assert.deepEqual(after, expected.window, where);
            } else {
              assert.deepEqual(
                got,
                expected.kind === 'busy'
                  ? { reserved: false, busy: true, retryAfterMs: 1000 }
                  : { reserved: false, busy: false, retryAfterMs: expected.retryAfterMs },
                where,
              );
              assert.deepEqual(after, { key, start, failures: f, pending: p, pendingSince: since }, `${where}: nothing moves`);
            }
          }
        }
      }
    }
  });
});

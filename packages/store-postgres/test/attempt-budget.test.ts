import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { AttemptReservation } from '@svc/core';
import type { PostgresStore } from '../src/index.js';
import { createTestEnv } from './pg-test-env.js';

const T0 = Date.UTC(2026, 10, 22, 10, 0, 0, 0);
const WINDOW = 60_000;
const MAX = 30;

const env = createTestEnv();
after(() => env.dispose());

describe('shared attempt budget on PostgreSQL (two nodes, one schema)', () => {
  let a: PostgresStore;
  let b: PostgresStore;
  before(async () => {
    const schema = env.schema();
    a = await env.open(schema);
    b = await env.open(schema);
  });
  after(async () => {
    await a.close();
    await b.close();
  });

  const reserve = (node: PostgresStore, keys: readonly string[], now = T0): Promise<AttemptReservation> =>
    node.reserveAttempts({ keys, now, windowMs: WINDOW, max: MAX });
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
    assert.equal((await reserve(a, [key], T0 + 30_000)).reserved, false);
    assert.equal((await reserve(a, [key], T0 + WINDOW)).reserved, true, 'a new window');
    // Settling a reservation of the window that ended changes nothing in the new one.
    await a.settleAttempts({ windows: first.windows, failed: true });
    for (let i = 1; i < MAX; i++) assert.equal((await reserve(b, [key], T0 + WINDOW)).reserved, true, `slot ${i + 1}`);
    assert.equal((await reserve(b, [key], T0 + WINDOW)).reserved, false);
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
});

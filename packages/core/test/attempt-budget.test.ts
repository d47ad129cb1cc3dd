import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decideAttemptWindow } from '../src/attempt-budget.js';

const T0 = Date.UTC(2026, 10, 22, 10, 0, 0, 0);
const RULE = { windowMs: 60_000, max: 30, leaseMs: 10_000 };

describe('decideAttemptWindow: running attempts are held on a lease', () => {
  const deadNode = { key: 'addr:loopback', start: T0, failures: 0, pending: 29, pendingSince: T0 };

  test("within the lease, a killed node's 29 running attempts still count: one slot is left, then busy", () => {
    const one = decideAttemptWindow('addr:loopback', deadNode, { ...RULE, now: T0 + 9_999 });
    assert.deepEqual(one, { kind: 'reserve', window: { ...deadNode, pending: 30 } });
    assert.deepEqual(decideAttemptWindow('addr:loopback', { ...deadNode, pending: 30 }, { ...RULE, now: T0 + 9_999 }), { kind: 'busy' });
  });

  test('after the lease they are dropped and a new lease period opens at now, long before the window ends', () => {
    const now = T0 + 10_000;
    assert.deepEqual(decideAttemptWindow('addr:loopback', { ...deadNode, pending: 30 }, { ...RULE, now }), {
      kind: 'reserve',
      window: { key: 'addr:loopback', start: T0, failures: 0, pending: 1, pendingSince: now },
    });
  });

  test('failures are never dropped with the lease: a spent budget stays spent until the window ends', () => {
    const spent = { ...deadNode, failures: 30, pending: 0 };
    assert.deepEqual(decideAttemptWindow('addr:loopback', spent, { ...RULE, now: T0 + 30_000 }), { kind: 'refuse', retryAfterMs: 30_000 });
  });

  test('a lease dated in the future (a clock behind) keeps its count but restarts at now: held at most one lease', () => {
    const ahead = { ...deadNode, pending: 5, pendingSince: T0 + 3_600_000 };
    const d = decideAttemptWindow('addr:loopback', ahead, { ...RULE, now: T0 + 1_000 });
    assert.deepEqual(d, { kind: 'reserve', window: { ...ahead, pending: 6, pendingSince: T0 + 1_000 } });
  });
});

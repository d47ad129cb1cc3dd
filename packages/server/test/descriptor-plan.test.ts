import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  APPLICATION_CONNECTION_LIMITS,
  DEFAULT_UPSTREAM_CONNECTIONS,
  MANAGEMENT_CONNECTION_LIMITS,
  NODE_CONNECTION_LIMITS,
  parseDescriptorLimit,
} from '../src/http/connection-limits.js';
import { DESCRIPTOR_RESERVE, descriptorsForDefaults, planConnectionLimits } from '../src/index.js';

const ALL = { management: true, node: true, application: true };

/** Descriptors the plan's listeners (and the upstream pool) hold when every one of them is full. */
function fullUse(plan: ReturnType<typeof planConnectionLimits>): number {
  return (
    plan.reserve + plan.management.maxConnections + plan.node.maxConnections + plan.application.maxConnections + plan.upstreamConnections
  );
}

test('the open-file limit is read from /proc/<pid>/limits, unlimited included', () => {
  const text = [
    'Limit                     Soft Limit           Hard Limit           Units     ',
    'Max processes             63704                63704                processes ',
    'Max open files            1024                 524288               files     ',
  ].join('\n');
  assert.deepEqual(parseDescriptorLimit(text), { soft: 1024, hard: 524288 });
  assert.deepEqual(parseDescriptorLimit('Max open files            unlimited            unlimited            files'), {
    soft: Number.POSITIVE_INFINITY,
    hard: Number.POSITIVE_INFINITY,
  });
  assert.equal(parseDescriptorLimit('Max processes 1 1 processes'), null);
});

test('with a large or unknown limit every listener keeps its default caps', () => {
  for (const limit of [null, Number.POSITIVE_INFINITY, descriptorsForDefaults(), 1_048_576]) {
    const plan = planConnectionLimits(limit, ALL);
    assert.deepEqual(plan.management, MANAGEMENT_CONNECTION_LIMITS);
    assert.deepEqual(plan.node, NODE_CONNECTION_LIMITS);
    assert.deepEqual(plan.application, APPLICATION_CONNECTION_LIMITS);
    assert.equal(plan.upstreamConnections, DEFAULT_UPSTREAM_CONNECTIONS);
    assert.equal(plan.reduced, false);
  }
});

test('below it, every listener full at once (and the upstream pool) still fits the limit, and the management API and node surface keep a share', () => {
  for (const limit of [128, 200, 256, 512, 1024, descriptorsForDefaults() - 1]) {
    for (const reserve of [DESCRIPTOR_RESERVE, 90]) {
      if (limit - reserve < 64) continue;
      const plan = planConnectionLimits(limit, ALL, reserve);
      assert.ok(fullUse(plan) <= limit, `limit ${limit}, reserve ${reserve}: ${fullUse(plan)} descriptors when full`);
      assert.equal(plan.reduced, true);
      assert.ok(plan.management.maxConnections >= 4, `limit ${limit}: the management API keeps a share`);
      assert.ok(plan.node.maxConnections >= 8, `limit ${limit}: the node surface keeps a share`);
      assert.ok(plan.application.maxConnections >= 1 && plan.upstreamConnections >= 1);
      for (const l of [plan.management, plan.node, plan.application]) assert.ok(l.maxConnectionsPerPeer <= l.maxConnections);
    }
  }
});

test('a listener that does not run takes no share', () => {
  const alone = planConnectionLimits(512, { management: false, node: false, application: true });
  const all = planConnectionLimits(512, ALL);
  assert.ok(alone.application.maxConnections > all.application.maxConnections);
});

test('a limit too small to serve is refused', () => {
  assert.throws(() => planConnectionLimits(100, ALL), RangeError);
  assert.throws(() => planConnectionLimits(150, ALL, 120), RangeError);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nodeKeyValidAt } from '@svc/core';

const CURRENT = 'a'.repeat(64);
const OLD = 'b'.repeat(64);
const OLDEST = 'c'.repeat(64);
const keys = {
  public_key: CURRENT,
  previous_keys: [
    { node_id: 'x', public_key: OLD, valid_from: '2026-11-01T00:00:00.000Z', valid_until: '2026-11-20T00:00:00.000Z' },
    { node_id: 'y', public_key: OLDEST, valid_from: null, valid_until: '2026-11-01T00:00:00.000Z' },
  ],
};

test('the current key is accepted at any time', () => {
  assert.equal(nodeKeyValidAt(keys, CURRENT.toUpperCase(), '2020-01-01T00:00:00.000Z'), true);
});

test('a previous key is accepted from its valid_from up to, not including, its valid_until', () => {
  assert.equal(nodeKeyValidAt(keys, OLD, '2026-11-01T00:00:00.000Z'), true);
  assert.equal(nodeKeyValidAt(keys, OLD, '2026-11-19T23:59:59.999Z'), true);
  assert.equal(nodeKeyValidAt(keys, OLD, '2026-11-20T00:00:00.000Z'), false);
  assert.equal(nodeKeyValidAt(keys, OLD, '2026-10-31T23:59:59.999Z'), false);
});

test('a previous key without a known start is accepted for everything before its retirement', () => {
  assert.equal(nodeKeyValidAt(keys, OLDEST, '2000-01-01T00:00:00.000Z'), true);
  assert.equal(nodeKeyValidAt(keys, OLDEST, '2026-11-01T00:00:00.000Z'), false);
});

test('an unknown key or an unreadable time is refused', () => {
  assert.equal(nodeKeyValidAt(keys, 'd'.repeat(64), '2026-11-10T00:00:00.000Z'), false);
  assert.equal(nodeKeyValidAt(keys, OLD, 'yesterday'), false);
  assert.equal(nodeKeyValidAt({ public_key: CURRENT }, OLD, '2026-11-10T00:00:00.000Z'), false);
});

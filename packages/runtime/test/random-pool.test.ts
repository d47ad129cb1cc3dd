import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRandomPool } from '../src/random.js';

test('the random pool never hands out the same bytes twice and refills across its end', () => {
  const random = createRandomPool(1024);
  const seen = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const b = random(32);
    assert.equal(b.length, 32);
    const hex = Buffer.from(b).toString('hex');
    assert.ok(!seen.has(hex), 'a 256-bit draw repeated');
    seen.add(hex);
  }
});

test("bytes handed out are the caller's own copy: reusing the pool does not change them", () => {
  const random = createRandomPool(64);
  const first = Buffer.from(random(16));
  const kept = random(16);
  const copy = Buffer.from(kept);
  for (let i = 0; i < 10; i++) random(16);
  assert.deepEqual(Buffer.from(kept), copy);
  assert.notDeepEqual(first, copy);
});

test('large draws bypass the pool and still have the requested length', () => {
  assert.equal(createRandomPool(64)(1000).length, 1000);
});

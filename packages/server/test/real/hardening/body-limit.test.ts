import assert from 'node:assert/strict';
import { test } from 'node:test';
import { againstEverySurface, outcomeOf, send } from './surfaces.js';

const BODY_LIMIT = 65_536;

againstEverySurface('body-limit', (surface, listener) => {
  test('a declared Content-Length over 65,536 bytes is 413 payload_too_large before parsing', async () => {
    const big = JSON.stringify({ public_key: 'a'.repeat(BODY_LIMIT) });
    const r = await send(listener(), {
      method: 'POST',
      path: surface.bodyPath,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(big) },
      body: big,
    });
    assert.equal(r.status, 413);
    assert.equal(r.body.code, 'payload_too_large');
    assert.equal(r.headers['cache-control'], 'no-store', '413');
    assert.equal(r.headers['x-content-type-options'], 'nosniff', '413');
  });

  test('a body over 64 KiB without a declared length (70,000 bytes) is 413 payload_too_large', async () => {
    const r = await send(listener(), {
      method: 'POST',
      path: surface.bodyPath,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ intent_id: 'x'.repeat(70_000) }),
    });
    assert.equal(r.status, 413);
    assert.equal(r.body.code, 'payload_too_large');
  });

  test('a chunked body growing over 65,536 bytes is 413 payload_too_large', async () => {
    const chunk = 'a'.repeat(16_384);
    const r = await send(listener(), {
      method: 'POST',
      path: surface.bodyPath,
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      chunks: ['{"public_key":"', chunk, chunk, chunk, chunk, chunk, '"}'],
    });
    assert.equal(r.status, 413);
    assert.equal(r.body.code, 'payload_too_large');
  });

  test('a body of exactly 65,536 bytes is parsed (and refused only for its content)', async () => {
    const prefix = '{"public_key":"';
    const suffix = '"}';
    const body = prefix + 'a'.repeat(BODY_LIMIT - prefix.length - suffix.length) + suffix;
    assert.equal(Buffer.byteLength(body), BODY_LIMIT);
    const r = await send(listener(), {
      method: 'POST',
      path: surface.bodyPath,
      headers: { 'content-type': 'application/json', 'content-length': BODY_LIMIT },
      body,
    });
    assert.deepEqual(outcomeOf(r), surface.bodyAtLimit);
  });
});

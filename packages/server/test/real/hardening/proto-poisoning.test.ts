import assert from 'node:assert/strict';
import { test } from 'node:test';
import { againstEverySurface, send } from './surfaces.js';

againstEverySurface('proto-poisoning', (surface, listener) => {
  test('a __proto__ key is 400 invalid_request', async () => {
    for (const body of ['{"public_key":"ab","__proto__":{"isAdmin":true}}', '{"__proto__": {"x": 1}}']) {
      const r = await send(listener(), { method: 'POST', path: surface.bodyPath, headers: { 'content-type': 'application/json' }, body });
      assert.equal(r.status, 400, body);
      assert.equal(r.body.code, 'invalid_request', body);
    }
    assert.equal(({} as { isAdmin?: boolean }).isAdmin, undefined);
    assert.equal(({} as { x?: number }).x, undefined);
  });

  test('constructor-poisoning: a constructor.prototype key is 400 invalid_request', async () => {
    const r = await send(listener(), {
      method: 'POST',
      path: surface.bodyPath,
      headers: { 'content-type': 'application/json' },
      body: '{"public_key":"ab","constructor":{"prototype":{"isAdmin":true}}}',
    });
    assert.equal(r.status, 400);
    assert.equal(r.body.code, 'invalid_request');
  });
});

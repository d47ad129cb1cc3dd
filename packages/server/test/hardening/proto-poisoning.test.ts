import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Listener, SURFACES, send } from './surfaces.js';

for (const surface of SURFACES) {
  describe(`proto-poisoning: ${surface.name}`, () => {
    let l: Listener;
    before(async () => {
      l = await surface.start();
    });
    after(() => l.close());

    test('a __proto__ key is 400 invalid_request', async () => {
      for (const body of ['{"public_key":"ab","__proto__":{"isAdmin":true}}', '{"__proto__": {"x": 1}}']) {
        const r = await send(l, { method: 'POST', path: surface.bodyPath, headers: { 'content-type': 'application/json' }, body });
        assert.equal(r.status, 400, body);
        assert.equal(r.body.code, 'invalid_request', body);
      }
      assert.equal(({} as { isAdmin?: boolean }).isAdmin, undefined);
      assert.equal(({} as { x?: number }).x, undefined);
    });

    test('constructor-poisoning: a constructor.prototype key is 400 invalid_request', async () => {
      const r = await send(l, {
        method: 'POST',
        path: surface.bodyPath,
        headers: { 'content-type': 'application/json' },
        body: '{"public_key":"ab","constructor":{"prototype":{"isAdmin":true}}}',
      });
      assert.equal(r.status, 400);
      assert.equal(r.body.code, 'invalid_request');
    });
  });
}

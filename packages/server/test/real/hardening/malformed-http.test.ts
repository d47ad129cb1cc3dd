import assert from 'node:assert/strict';
import { test } from 'node:test';
import { againstEverySurface, rawExchange, send } from './surfaces.js';

againstEverySurface('malformed HTTP', (surface, listener) => {
  test('a garbage request line is answered 400 problem+json, then the connection is closed', async () => {
    for (const request of ['GARBAGE\r\n\r\n', 'GET\r\n\r\n', 'GET / HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n', '\u0000\u0001\u0002\r\n\r\n']) {
      const text = await rawExchange(listener().port, request);
      assert.match(text, /^HTTP\/1\.1 400 /, JSON.stringify(request));
      assert.match(text, /cache-control: no-store/i, JSON.stringify(request));
      assert.match(text, /content-type: application\/problem\+json/i, JSON.stringify(request));
      assert.match(text, /"code":"invalid_request"/, JSON.stringify(request));
    }
  });

  test('a malformed URL is 400 invalid_request with the security headers', async () => {
    const r = await send(listener(), { path: `${surface.publicPaths[0]}/%zz` });
    assert.equal(r.status, 400);
    assert.equal(r.body.code, 'invalid_request');
    assert.equal(r.headers['cache-control'], 'no-store', 'bad url');
    assert.equal(r.headers['x-content-type-options'], 'nosniff', 'bad url');
  });

  test('a CONNECT request is answered like any other unsupported method, not with a closed connection', async () => {
    // Authority form (a proxy tunnel request): no route has that target.
    const tunnel = await rawExchange(listener().port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    assert.match(tunnel, /^HTTP\/1\.1 404 /);
    assert.match(tunnel, /content-type: application\/problem\+json/i);
    assert.match(tunnel, /cache-control: no-store/i);
    assert.match(tunnel, /"code":"not_found"/);
    // A known path with the CONNECT method: 405 with Allow, as for any other method it lacks.
    const known = await rawExchange(listener().port, `CONNECT ${surface.publicPaths[0]} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    assert.match(known, /^HTTP\/1\.1 405 /);
    assert.match(known, new RegExp(`allow: ${surface.publicAllow}`, 'i'));
    assert.match(known, /"code":"method_not_allowed"/);
  });
});

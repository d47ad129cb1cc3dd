import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { isLoopbackHostHeader, isLoopbackOrigin } from '../../../src/http/loopback.js';
import { againstEverySurface, type Listener, networkAddress, rawExchange, SURFACES, send } from './surfaces.js';

const LOOPBACK_HOSTS = [
  '127.0.0.1',
  '127.0.0.1:9090',
  '127.1.2.3:1',
  'localhost',
  'LocalHost:8080',
  '[::1]',
  '[::1]:9090',
  '[0:0:0:0:0:0:0:1]:1',
];
const FOREIGN_HOSTS = [
  'evil.example',
  'evil.example:9090',
  '127.0.0.1.evil.example',
  'localhost.evil.example',
  'localhost.',
  'sub.localhost',
  '10.0.0.1',
  '0.0.0.0',
  '128.0.0.1',
  '127.1',
  '0x7f.0.0.1',
  '2130706433',
  '127.0.0.01',
  '[::]',
  '[::ffff:127.0.0.1]',
  '[fe80::1]',
  '::1',
  'localhost:99999',
  'localhost:',
  'localhost:abc',
  'user@localhost',
  '',
];
const LOOPBACK_ORIGINS = ['http://localhost', 'http://localhost:5173', 'https://127.0.0.1:9090', 'http://[::1]:3000'];
const FOREIGN_ORIGINS = [
  'null',
  'http://evil.example',
  'https://evil.example:9090',
  'http://localhost.evil.example',
  'file://',
  'ftp://localhost',
  'http://localhost/path',
  'http://user@localhost',
  'http://10.0.0.1',
  '',
];

test('the host and origin checks agree with the table', () => {
  for (const host of LOOPBACK_HOSTS) assert.equal(isLoopbackHostHeader(host), true, host);
  for (const host of FOREIGN_HOSTS) assert.equal(isLoopbackHostHeader(host), false, host);
  assert.equal(isLoopbackHostHeader(undefined), false);
  assert.equal(isLoopbackOrigin('http://127.0.0.1:1'), true);
  assert.equal(isLoopbackOrigin('null'), false);
});

// Reached over loopback, every surface is guarded against DNS rebinding, whatever it binds: a
// hostile page's rebound name is the only way a browser gets in there.
againstEverySurface('dns-rebinding guard over loopback', (surface, listener) => {
  test('a loopback Host (127.0.0.0/8, [::1], localhost, any port) is served', async () => {
    for (const path of surface.publicPaths) {
      for (const host of [...LOOPBACK_HOSTS, `localhost:${listener().port}`]) {
        const r = await send(listener(), { path, headers: { host } });
        assert.equal(r.status, 200, `${path} Host: ${host}`);
      }
    }
  });

  test('a non-loopback Host is 403 forbidden_host, and nothing of the route is read', async () => {
    // node:http replaces an empty Host with its own; the raw-socket test below sends one.
    for (const path of surface.publicPaths) {
      for (const host of FOREIGN_HOSTS.filter((x) => x !== '')) {
        const r = await send(listener(), { path, headers: { host } });
        assert.equal(r.status, 403, `${path} Host: ${JSON.stringify(host)}`);
        assert.equal(r.body.code, 'forbidden_host', host);
        assert.equal(r.headers['cache-control'], 'no-store');
        assert.doesNotMatch(r.text, /svc_|node_id|openapi/, `${path} leaks nothing`);
      }
    }
  });

  test('a rebound name is refused before the body is parsed or a handler runs', async () => {
    const r = await send(listener(), {
      method: 'POST',
      path: surface.bodyPath,
      headers: { host: 'evil.example:9090', 'content-type': 'text/plain' },
      body: 'not json',
    });
    assert.equal(r.status, 403);
    assert.equal(r.body.code, 'forbidden_host');
  });

  test('a request without a Host header (HTTP/1.0) or with an empty one is 403 forbidden_host', async () => {
    const path = surface.publicPaths[0];
    for (const request of [`GET ${path} HTTP/1.0\r\n\r\n`, `GET ${path} HTTP/1.1\r\nHost: \r\nConnection: close\r\n\r\n`]) {
      const text = await rawExchange(listener().port, request, { endAfterBody: true });
      assert.match(text, /^HTTP\/1\.[01] 403 /, request);
      assert.match(text, /"code":"forbidden_host"/, request);
    }
  });

  test('host-header-duplication: two Host headers, the first loopback, are refused (which one counts depends on the parser)', async () => {
    const path = surface.publicPaths[0];
    for (const hosts of [
      ['127.0.0.1', 'evil.example'],
      ['localhost', '127.0.0.1'],
    ]) {
      const text = await rawExchange(
        listener().port,
        // The second field in another letter case: still a Host field.
        `GET ${path} HTTP/1.1\r\n${hosts.map((h, i) => `${i === 0 ? 'Host' : 'hOsT'}: ${h}\r\n`).join('')}Connection: close\r\n\r\n`,
        { endAfterBody: true },
      );
      assert.match(text, /^HTTP\/1\.1 400 /, hosts.join(' + '));
      assert.match(text, /"code":"invalid_request"/, hosts.join(' + '));
    }
  });

  test('absolute-form-foreign-authority: GET http://evil.example/... with a loopback Host is 403 forbidden_host', async () => {
    const path = surface.publicPaths[0];
    for (const authority of ['evil.example', 'evil.example:9090', '10.0.0.1']) {
      const text = await rawExchange(
        listener().port,
        `GET http://${authority}${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
        { endAfterBody: true },
      );
      // The gateway's hygiene refuses every absolute-form target as ambiguous (400) before its guard runs.
      const [status, code] = surface.name === 'application gateway' ? ['400', 'invalid_request'] : ['403', 'forbidden_host'];
      assert.match(text, new RegExp(`^HTTP/1\\.1 ${status} `), authority);
      assert.match(text, new RegExp(`"code":"${code}"`), authority);
    }
  });

  test('absolute-form-loopback-authority: an absolute-form target is refused as ambiguous (400 invalid_request), never routed', async () => {
    const path = surface.publicPaths[0];
    const text = await rawExchange(
      listener().port,
      `GET http://127.0.0.1${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
      { endAfterBody: true },
    );
    assert.match(text, /^HTTP\/1\.1 400 /);
    assert.match(text, /"code":"invalid_request"/);
  });

  test('a loopback Origin is served; a foreign or null Origin is 403 forbidden_host', async () => {
    for (const path of surface.publicPaths) {
      for (const origin of LOOPBACK_ORIGINS) {
        const r = await send(listener(), { path, headers: { origin } });
        assert.equal(r.status, 200, `${path} Origin: ${origin}`);
      }
      for (const origin of FOREIGN_ORIGINS) {
        const r = await send(listener(), { path, headers: { origin } });
        assert.equal(r.status, 403, `${path} Origin: ${JSON.stringify(origin)}`);
        assert.equal(r.body.code, 'forbidden_host', origin);
      }
    }
  });
});

const NET = networkAddress();
const needsNetwork = NET === undefined ? 'this machine has no non-loopback IPv4 address' : false;

// A surface that may bind a network address is reached under whatever name it is published
// as; the guard still covers every request that arrives on a loopback address.
for (const surface of SURFACES.filter((s) => !s.loopbackOnly)) {
  for (const bind of ['0.0.0.0', NET ?? 'no network address']) {
    describe(`dns-rebinding guard: ${surface.name} bound to ${bind === '0.0.0.0' ? 'every interface' : 'a network address'}`, {
      skip: needsNetwork,
    }, () => {
      let l: Listener;
      before(async () => {
        l = await surface.start(bind);
      });
      after(() => l.close());

      test('over the network, any Host is served under the name the surface is published as', async () => {
        const path = surface.publicPaths[0] as string;
        const r = await send(l, { host: NET as string, path, headers: { host: 'node.example:9091' } });
        assert.equal(r.status, 200);
        assert.notEqual(r.body, null);
        assert.deepEqual(r.body, (await send(l, { host: NET as string, path })).body, 'the same document as under its own address');
      });

      test('reached at 127.0.0.1 (a wildcard bind), Host: evil.example is 403 forbidden_host', { skip: bind !== '0.0.0.0' }, async () => {
        const r = await send(l, { path: surface.publicPaths[0] as string, headers: { host: 'evil.example' } });
        assert.equal(r.status, 403);
        assert.equal(r.body.code, 'forbidden_host');
      });
    });
  }
}

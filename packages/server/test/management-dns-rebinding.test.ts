import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { isLoopbackHostHeader, isLoopbackOrigin } from '../src/index.js';
import { type Harness, raw, startHarness } from './support/harness.js';

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

describe('dns-rebinding guard', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness();
  });
  after(() => h.close());

  test('a loopback Host (127.0.0.0/8, [::1], localhost, any port) is served', async () => {
    for (const host of LOOPBACK_HOSTS) {
      const r = await raw(h, { path: '/health', headers: { host } });
      assert.equal(r.status, 200, host);
    }
  });

  test('a non-loopback Host is 403 forbidden_host', async () => {
    // node:http replaces an empty Host with its own; the raw-socket test below sends one.
    for (const host of FOREIGN_HOSTS.filter((x) => x !== '')) {
      const r = await raw(h, { path: '/health', headers: { host } });
      assert.equal(r.status, 403, `Host: ${JSON.stringify(host)}`);
      assert.equal(r.body.code, 'forbidden_host', host);
      assert.equal(r.headers['cache-control'], 'no-store');
    }
  });

  test('a rebound name is refused before the body is parsed or a handler runs', async () => {
    const r = await raw(h, {
      method: 'POST',
      path: '/v1/auth/enroll',
      headers: { host: 'evil.example:9090', 'content-type': 'text/plain' },
      body: 'not json',
    });
    assert.equal(r.status, 403);
    assert.equal(r.body.code, 'forbidden_host');
  });

  test('a request without a Host header (HTTP/1.0) or with an empty one is 403 forbidden_host', async () => {
    const { connect } = await import('node:net');
    const send = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(h.port, '127.0.0.1', () => socket.write(request));
        let data = '';
        socket.on('data', (c) => {
          data += c.toString('utf8');
          if (data.includes('}')) socket.end();
        });
        socket.on('end', () => resolve(data));
        socket.on('error', reject);
      });
    for (const request of ['GET /health HTTP/1.0\r\n\r\n', 'GET /health HTTP/1.1\r\nHost: \r\nConnection: close\r\n\r\n']) {
      const text = await send(request);
      assert.match(text, /^HTTP\/1\.[01] 403 /, request);
      assert.match(text, /"code":"forbidden_host"/, request);
    }
  });

  test('a loopback Origin is served; a foreign or null Origin is 403 forbidden_host', async () => {
    for (const origin of ['http://localhost', 'http://localhost:5173', 'https://127.0.0.1:9090', 'http://[::1]:3000']) {
      const r = await raw(h, { path: '/health', headers: { origin } });
      assert.equal(r.status, 200, origin);
    }
    for (const origin of [
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
    ]) {
      const r = await raw(h, { path: '/health', headers: { origin } });
      assert.equal(r.status, 403, `Origin: ${JSON.stringify(origin)}`);
      assert.equal(r.body.code, 'forbidden_host', origin);
    }
  });

  test('the host and origin checks agree with the table', () => {
    for (const host of LOOPBACK_HOSTS) assert.equal(isLoopbackHostHeader(host), true, host);
    for (const host of FOREIGN_HOSTS) assert.equal(isLoopbackHostHeader(host), false, host);
    assert.equal(isLoopbackHostHeader(undefined), false);
    assert.equal(isLoopbackOrigin('http://127.0.0.1:1'), true);
    assert.equal(isLoopbackOrigin('null'), false);
  });
});

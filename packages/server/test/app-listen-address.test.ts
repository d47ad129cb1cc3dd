import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_APP_LISTEN } from '@svc/core/settings';
import { APP_LISTEN_ENV } from '../src/http/network-listen.js';
import { cleartextExposed, isLoopbackHost, ListenAddressError, resolveAppListen } from '../src/index.js';

test('the gateway address: --app-listen > SVC_APP_LISTEN > :svc/app-listen > 127.0.0.1:8080, empty values unset', () => {
  assert.equal(DEFAULT_APP_LISTEN, '127.0.0.1:8080');
  assert.equal(APP_LISTEN_ENV, 'SVC_APP_LISTEN');
  assert.deepEqual(resolveAppListen({}), { host: '127.0.0.1', port: 8080 });
  assert.deepEqual(resolveAppListen({ config: '0.0.0.0:80' }), { host: '0.0.0.0', port: 80 });
  assert.deepEqual(resolveAppListen({ env: '[::]:81', config: '0.0.0.0:80' }), { host: '::', port: 81 });
  assert.deepEqual(resolveAppListen({ flag: '10.0.0.2:82', env: '[::]:81', config: '0.0.0.0:80' }), { host: '10.0.0.2', port: 82 });
  assert.deepEqual(resolveAppListen({ flag: undefined, env: '', config: null }), { host: '127.0.0.1', port: 8080 });
});

test('off disables the gateway from any of the three, in any case; the first source that speaks decides', () => {
  assert.equal(resolveAppListen({ flag: 'off' }), 'off');
  assert.equal(resolveAppListen({ env: 'OFF' }), 'off');
  assert.equal(resolveAppListen({ config: 'off' }), 'off');
  assert.deepEqual(resolveAppListen({ flag: '127.0.0.1:0', config: 'off' }), { host: '127.0.0.1', port: 0 });
  assert.equal(resolveAppListen({ env: 'off', config: '127.0.0.1:1' }), 'off');
});

test('a malformed gateway address names where it came from', () => {
  for (const [values, source] of [
    [{ flag: '127.1:80' }, '--app-listen'],
    [{ env: '8080' }, 'SVC_APP_LISTEN'],
    [{ config: '[::1]8080' }, ':svc/app-listen'],
  ] as const) {
    assert.throws(
      () => resolveAppListen(values),
      (e: unknown) => e instanceof ListenAddressError && e.code === 'listen_address_refused' && e.message.startsWith(`${source} `),
    );
  }
});

test('cleartext exposure: plain HTTP on a non-loopback address, with neither TLS nor a trusted proxy', () => {
  const none = { tls: false, trustedProxies: [] };
  for (const host of ['0.0.0.0', '::', '192.0.2.7', 'app.example']) assert.equal(cleartextExposed(host, none), true, host);
  for (const host of ['127.0.0.1', '127.9.9.9', '::1', '0:0:0:0:0:0:0:1', 'localhost']) {
    assert.equal(isLoopbackHost(host), true, host);
    assert.equal(cleartextExposed(host, none), false, host);
  }
  assert.equal(cleartextExposed('0.0.0.0', { tls: true, trustedProxies: [] }), false);
  assert.equal(cleartextExposed('0.0.0.0', { tls: false, trustedProxies: ['10.0.0.5'] }), false);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ListenAddressError, resolveMetricsListen } from '../src/index.js';

test('the metrics listener is off unless the flag, SVC_METRICS_LISTEN or :svc/metrics-listen names an address', () => {
  assert.equal(resolveMetricsListen({}), 'off');
  assert.equal(resolveMetricsListen({ flag: undefined, env: '', config: null }), 'off');
  assert.equal(resolveMetricsListen({ env: 'off', config: '127.0.0.1:9464' }), 'off');
  assert.equal(resolveMetricsListen({ env: ' OFF ' }), 'off');
});

test('--metrics-listen beats SVC_METRICS_LISTEN, which beats :svc/metrics-listen', () => {
  const all = { flag: '127.0.0.1:1', env: '127.0.0.1:2', config: '127.0.0.1:3' };
  assert.deepEqual(resolveMetricsListen(all), { host: '127.0.0.1', port: 1, exposed: false });
  assert.deepEqual(resolveMetricsListen({ ...all, flag: undefined }), { host: '127.0.0.1', port: 2, exposed: false });
  assert.deepEqual(resolveMetricsListen({ ...all, flag: undefined, env: undefined }), { host: '127.0.0.1', port: 3, exposed: false });
  assert.deepEqual(resolveMetricsListen({ flag: '[::1]:0' }), { host: '::1', port: 0, exposed: false });
  assert.deepEqual(resolveMetricsListen({ env: 'localhost:9464' }), { host: 'localhost', port: 9464, exposed: false });
});

test('a network metrics address from the flag or the environment is refused: only project.edn may expose it', () => {
  for (const address of ['0.0.0.0:9464', '[::]:9464', '192.0.2.7:9464', 'metrics.example.internal:9464']) {
    assert.throws(
      () => resolveMetricsListen({ flag: address }),
      /--metrics-listen .* is refused: the metrics listener binds a loopback address/,
    );
    assert.throws(() => resolveMetricsListen({ env: address }), /SVC_METRICS_LISTEN .* is refused: .*:svc\/metrics-listen in project\.edn/);
    const host = address.slice(0, address.lastIndexOf(':')).replace(/^\[|\]$/g, '');
    assert.deepEqual(resolveMetricsListen({ config: address }), { host, port: 9464, exposed: true });
  }
});

test('malformed metrics addresses are refused wherever they come from, and the flag cannot say off', () => {
  for (const bad of ['9464', ':9464', '127.1:9464', '127.0.0.1:65536', '[::1]9464', 'http://127.0.0.1:9464']) {
    assert.throws(() => resolveMetricsListen({ flag: bad }), ListenAddressError, bad);
    assert.throws(() => resolveMetricsListen({ env: bad }), ListenAddressError, bad);
    assert.throws(() => resolveMetricsListen({ config: bad }), ListenAddressError, bad);
  }
  assert.throws(() => resolveMetricsListen({ flag: 'off' }), /--metrics-listen "off" is refused/);
});

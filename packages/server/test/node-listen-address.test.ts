import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ListenAddressError, resolveNodeListen } from '../src/index.js';
import { DEFAULT_NODE_LISTEN, parseNodeListenAddress } from '../src/node/listen-address.js';

test('the node surface may bind loopback, network and wildcard addresses, and host names', () => {
  assert.deepEqual(parseNodeListenAddress('127.0.0.1:9091'), { host: '127.0.0.1', port: 9091 });
  assert.deepEqual(parseNodeListenAddress('0.0.0.0:9091'), { host: '0.0.0.0', port: 9091 });
  assert.deepEqual(parseNodeListenAddress('192.0.2.10:0'), { host: '192.0.2.10', port: 0 });
  assert.deepEqual(parseNodeListenAddress('[::]:9091'), { host: '::', port: 9091 });
  assert.deepEqual(parseNodeListenAddress('[2001:db8::1]:443'), { host: '2001:db8::1', port: 443 });
  assert.deepEqual(parseNodeListenAddress('Node-1.Example.internal:9091'), { host: 'node-1.example.internal', port: 9091 });
  assert.deepEqual(parseNodeListenAddress('localhost:65535'), { host: 'localhost', port: 65535 });
});

test('obviously malformed node listen addresses are refused before anything binds', () => {
  for (const bad of [
    '',
    '9091',
    ':9091',
    '127.0.0.1',
    '127.0.0.1:',
    '127.0.0.1:65536',
    '127.0.0.1:-1',
    '127.0.0.1:90x1',
    '127.1:9091',
    '256.0.0.1:9091',
    '010.0.0.1:9091',
    '0x7f.0.0.1:9091',
    '::1:9091',
    '[::1]9091',
    '[::1]',
    '[nothost]:9091',
    'bad_host:9091',
    'a..b:9091',
    '-leading.example:9091',
    '*:9091',
    'http://127.0.0.1:9091',
  ]) {
    assert.throws(() => parseNodeListenAddress(bad), ListenAddressError, bad);
  }
});

test('--listen beats SVC_NODE_LISTEN, which beats :svc/node-listen, which beats 127.0.0.1:9091', () => {
  assert.equal(DEFAULT_NODE_LISTEN, '127.0.0.1:9091');
  assert.deepEqual(resolveNodeListen({}), { host: '127.0.0.1', port: 9091 });
  assert.deepEqual(resolveNodeListen({ config: '0.0.0.0:7000' }), { host: '0.0.0.0', port: 7000 });
  assert.deepEqual(resolveNodeListen({ env: '127.0.0.2:7001', config: '0.0.0.0:7000' }), { host: '127.0.0.2', port: 7001 });
  assert.deepEqual(resolveNodeListen({ flag: '127.0.0.3:7002', env: '127.0.0.2:7001', config: '0.0.0.0:7000' }), {
    host: '127.0.0.3',
    port: 7002,
  });
  // An empty environment value counts as unset; a bad one below a good flag is never looked at.
  assert.deepEqual(resolveNodeListen({ env: '', config: '0.0.0.0:7000' }), { host: '0.0.0.0', port: 7000 });
  assert.deepEqual(resolveNodeListen({ flag: '127.0.0.1:0', env: 'garbage' }), { host: '127.0.0.1', port: 0 });
});

test('SVC_NODE_LISTEN=off disables the node surface of svc serve; --listen and the project file cannot say off', () => {
  assert.equal(resolveNodeListen({ env: 'off' }), 'off');
  assert.equal(resolveNodeListen({ env: ' OFF ', config: '0.0.0.0:7000' }), 'off');
  assert.throws(() => resolveNodeListen({ flag: 'off' }), ListenAddressError);
  assert.throws(() => resolveNodeListen({ config: 'off' }), ListenAddressError);
  assert.throws(() => resolveNodeListen({ env: '127.1:9091' }), /SVC_NODE_LISTEN/);
  assert.throws(() => resolveNodeListen({ config: '127.1:9091' }), /:svc\/node-listen/);
});

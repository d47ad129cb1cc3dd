import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ListenAddressError, resolveManagementListen } from '../src/index.js';
import { DEFAULT_MANAGEMENT_LISTEN, parseListenAddress } from '../src/management/listen-address.js';

describe('management listen address', () => {
  test('loopback addresses are accepted', () => {
    const table: [string, { host: string; port: number }][] = [
      ['127.0.0.1:9090', { host: '127.0.0.1', port: 9090 }],
      ['127.0.0.1:0', { host: '127.0.0.1', port: 0 }],
      ['127.255.255.254:65535', { host: '127.255.255.254', port: 65535 }],
      ['localhost:8080', { host: 'localhost', port: 8080 }],
      ['LOCALHOST:1', { host: 'localhost', port: 1 }],
      ['[::1]:9090', { host: '::1', port: 9090 }],
      ['[0:0:0:0:0:0:0:1]:9090', { host: '::1', port: 9090 }],
    ];
    for (const [value, expected] of table) assert.deepEqual(parseListenAddress(value), expected, value);
  });

  test('wildcard, non-loopback, host names and bad ports are refused with one clear line', () => {
    const refused = [
      '0.0.0.0:9090',
      ':9090',
      '*:9090',
      '[::]:9090',
      '[0:0:0:0:0:0:0:0]:9090',
      '::1:9090',
      ':::9090',
      '10.0.0.1:9090',
      '192.168.1.10:9090',
      '128.0.0.1:9090',
      '[fe80::1]:9090',
      '[::ffff:127.0.0.1]:9090',
      'example.com:9090',
      'localhost.localdomain:9090',
      '127.1:9090',
      '0x7f000001:9090',
      '127.0.0.01:9090',
      '127.0.0.1',
      'localhost',
      '[::1]',
      '127.0.0.1:',
      '127.0.0.1:abc',
      '127.0.0.1:-1',
      '127.0.0.1:65536',
      '127.0.0.1:123456',
      '127.0.0.1: 9090',
      '',
    ];
    for (const value of refused) {
      assert.throws(
        () => parseListenAddress(value),
        (err: unknown) => err instanceof ListenAddressError && !err.message.includes('\n') && err.message.includes(JSON.stringify(value)),
        value,
      );
    }
  });

  test('--listen beats SVC_MANAGEMENT_LISTEN, which beats 127.0.0.1:9090', () => {
    assert.equal(DEFAULT_MANAGEMENT_LISTEN, '127.0.0.1:9090');
    assert.deepEqual(resolveManagementListen({}), { host: '127.0.0.1', port: 9090 });
    assert.deepEqual(resolveManagementListen({ env: '' }), { host: '127.0.0.1', port: 9090 });
    assert.deepEqual(resolveManagementListen({ env: 'localhost:7000' }), { host: 'localhost', port: 7000 });
    assert.deepEqual(resolveManagementListen({ flag: '127.0.0.2:7001', env: 'localhost:7000' }), { host: '127.0.0.2', port: 7001 });
    assert.deepEqual(resolveManagementListen({ flag: '[::1]:0', env: 'off' }), { host: '::1', port: 0 });
  });

  test('SVC_MANAGEMENT_LISTEN=off disables the API; the flag cannot be off', () => {
    assert.equal(resolveManagementListen({ env: 'off' }), 'off');
    assert.throws(() => resolveManagementListen({ flag: 'off' }), ListenAddressError);
  });

  test('a refused address is reported with where it came from', () => {
    assert.throws(() => resolveManagementListen({ env: '0.0.0.0:9090' }), /SVC_MANAGEMENT_LISTEN "0\.0\.0\.0:9090"/);
    assert.throws(() => resolveManagementListen({ flag: '10.0.0.1:1', env: '127.0.0.1:1' }), /--listen "10\.0\.0\.1:1"/);
  });
});

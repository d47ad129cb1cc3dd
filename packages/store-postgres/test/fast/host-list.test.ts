import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError } from '@svc/core/config';
import { svcStore } from '../../src/addon-export.js';
import { postgresFault } from '../../src/faults.js';
import { splitConnectionString } from '../../src/hosts.js';

describe('libpq host lists (splitConnectionString)', () => {
  test('each host keeps its own port, in order, and gets a single-host URL with the rest of the string', () => {
    const t = splitConnectionString('postgres://svc@db1:5432,db2:5433/control?sslmode=disable&target_session_attrs=read-write');
    assert.deepEqual(t.hosts, [
      { host: 'db1', port: 5432 },
      { host: 'db2', port: 5433 },
    ]);
    assert.equal(t.attrs, 'read-write');
    assert.deepEqual(t.urls, ['postgres://svc@db1:5432/control?sslmode=disable', 'postgres://svc@db2:5433/control?sslmode=disable']);
  });

  test('a host without a port takes the default, IPv6 hosts are bracketed, and no target_session_attrs means any', () => {
    const t = splitConnectionString('postgresql://u@[::1]:6000,db2/d', 5444);
    assert.deepEqual(t.hosts, [
      { host: '::1', port: 6000 },
      { host: 'db2', port: 5444 },
    ]);
    assert.equal(t.attrs, 'any');
    assert.deepEqual(t.urls, ['postgresql://u@[::1]:6000/d', 'postgresql://u@db2:5444/d']);
  });

  test('a session kind the store cannot write on (read-only, standby, prefer-standby) is refused', () => {
    for (const attrs of ['read-only', 'standby', 'prefer-standby', 'bogus']) {
      assert.throws(
        () => splitConnectionString(`postgres://u@a,b/d?target_session_attrs=${attrs}`),
        /target_session_attrs must be one of any, read-write, primary/,
      );
    }
  });

  test('a bad port or a malformed host is refused without echoing a password', () => {
    assert.throws(
      () => splitConnectionString('postgres://u:hunter2@a:99999,b/d'),
      (err: Error) => /1 to 65535/.test(err.message) && !err.message.includes('hunter2'),
    );
    assert.throws(
      () => splitConnectionString('postgres://u:hunter2@a:1:2/d'),
      (err: Error) => /not host\[:port\]/.test(err.message) && !err.message.includes('hunter2'),
    );
    assert.throws(() => splitConnectionString('mysql://u@a/d'), /expected a postgres:\/\//);
  });
});

describe('the :store/url of the addon with a host list', () => {
  const where = { configFile: '/p/project.edn', configKey: ':svc/modules :pg :config', resolveSecret: () => '' } as never;

  test('a target_session_attrs the store cannot use is a config error naming the key', async () => {
    const config = new Map([[':store/url', 'postgres://svc@a:5432,b:5433/d?target_session_attrs=standby']]);
    await assert.rejects(svcStore.open(config, where), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.message, /:store\/url/);
      assert.match(err.message, /target_session_attrs must be one of/);
      return true;
    });
  });

  test('a password inside a host list is refused as in a one-host URL', async () => {
    const config = new Map([[':store/url', 'postgres://svc:pw@a:5432,b:5433/d']]);
    await assert.rejects(
      svcStore.open(config, where),
      (err: unknown) => err instanceof ConfigError && /holds a password/.test(err.message),
    );
  });
});

describe('faults of a failover', () => {
  test('a write refused by a server that became a standby (25006) is a lost connection (503), not a 500', () => {
    assert.equal(postgresFault({ code: '25006', message: 'cannot execute INSERT in a read-only transaction' }), 'connection');
  });
  test('no host of the list accepting a read-write session (08001) is a lost connection', () => {
    assert.equal(postgresFault({ code: '08001', message: 'no PostgreSQL host accepts a read-write session' }), 'connection');
  });
});

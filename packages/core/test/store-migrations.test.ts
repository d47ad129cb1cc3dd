import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type Migration,
  type MigrationDriver,
  migrationsFrom,
  runMigrations,
  runMigrationsSync,
  type SyncMigrationDriver,
} from '@svc/core/store';

/** A driver over an in-memory list of applied versions that records what the runner did. */
function fakeDriver(applied: number[]): MigrationDriver & { readonly log: string[] } {
  const log: string[] = [];
  return {
    log,
    async appliedVersions() {
      return [...applied].sort((a, b) => a - b);
    },
    async exclusively(fn) {
      log.push('begin');
      const before = [...applied];
      try {
        const result = await fn();
        log.push('commit');
        return result;
      } catch (error) {
        applied.splice(0, applied.length, ...before);
        log.push('rollback');
        throw error;
      }
    },
    async apply(m) {
      if (m.sql === 'FAIL') throw new Error(`migration ${m.version} failed`);
      applied.push(m.version);
      log.push(`apply ${m.version}`);
    },
    newerSchema: (found, latest) => new Error(`schema ${found} is newer than ${latest}`),
  };
}

const MIGRATIONS: readonly Migration[] = [
  { version: 1, name: 'initial', sql: 'A' },
  { version: 2, name: 'more', sql: 'B' },
  { version: 3, name: 'last', sql: 'C' },
];

test('runMigrations applies the missing migrations in order in one exclusive transaction', async () => {
  const driver = fakeDriver([1]);
  assert.deepEqual(await runMigrations(driver, MIGRATIONS, 0), [2, 3]);
  assert.deepEqual(driver.log, ['begin', 'apply 2', 'apply 3', 'commit']);
});

test('runMigrations only reads an up-to-date store: no transaction', async () => {
  const driver = fakeDriver([1, 2, 3]);
  assert.deepEqual(await runMigrations(driver, MIGRATIONS, 0), []);
  assert.deepEqual(driver.log, []);
});

test("runMigrations refuses a schema newer than the store's migrations with the driver's error, changing nothing", async () => {
  const driver = fakeDriver([1, 2, 3, 4]);
  await assert.rejects(runMigrations(driver, MIGRATIONS, 0), /schema 4 is newer than 3/);
  assert.deepEqual(driver.log, []);
});

test('runMigrations rolls every migration of the run back when one fails', async () => {
  const applied: number[] = [];
  const driver = fakeDriver(applied);
  await assert.rejects(runMigrations(driver, [...MIGRATIONS.slice(0, 2), { version: 3, name: 'bad', sql: 'FAIL' }], 0), /3 failed/);
  assert.deepEqual(driver.log, ['begin', 'apply 1', 'apply 2', 'rollback']);
  assert.deepEqual(applied, []);
});

test('migrationsFrom orders NNN_name.sql files, ignores others, and refuses duplicates and an empty directory', () => {
  const read = (file: string) => `-- ${file}`;
  const found = migrationsFrom(['002_b.sql', 'README.md', '001_a.sql', '010_c.sql'], read, '/m');
  assert.deepEqual(
    found.map((m) => [m.version, m.name, m.sql]),
    [
      [1, 'a', '-- 001_a.sql'],
      [2, 'b', '-- 002_b.sql'],
      [10, 'c', '-- 010_c.sql'],
    ],
  );
  assert.throws(() => migrationsFrom(['001_a.sql', '001_b.sql'], read, '/m'), /two migrations share version 1/);
  assert.throws(() => migrationsFrom(['notes.txt'], read, '/m'), /no migrations found in \/m/);
});

test('runMigrationsSync makes the same decisions without yielding', () => {
  const applied = [1];
  const log: string[] = [];
  const driver: SyncMigrationDriver = {
    appliedVersions: () => [...applied],
    exclusively: (fn) => {
      log.push('begin');
      const result = fn();
      log.push('commit');
      return result;
    },
    apply: (m) => {
      applied.push(m.version);
      log.push(`apply ${m.version}`);
    },
    newerSchema: (found, latest) => new Error(`schema ${found} is newer than ${latest}`),
  };
  assert.deepEqual(runMigrationsSync(driver, MIGRATIONS, 0), [2, 3]);
  assert.deepEqual(runMigrationsSync(driver, MIGRATIONS, 0), []);
  assert.deepEqual(log, ['begin', 'apply 2', 'apply 3', 'commit']);
  applied.push(9);
  assert.throws(() => runMigrationsSync(driver, MIGRATIONS, 0), /schema 9 is newer than 3/);
});

import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { api, newDeviceKey, type Reply } from '../support/harness.js';
import { adminToken, type NodeHarness, nodeApi, startNodeHarness } from '../support/node-harness.js';

// better-sqlite3 as the store package resolves it, for the other process.
const BETTER_SQLITE3 = createRequire(createRequire(import.meta.url).resolve('svc-store-sqlite/package.json')).resolve('better-sqlite3');

/**
 * Another process that takes the control database's write lock with BEGIN EXCLUSIVE and holds
 * it until told to let go: a real lock by a real process, no timing involved.
 */
async function holdWriteLock(file: string): Promise<{ release(): Promise<void>; kill(): void }> {
  const script = `
    const Database = require(${JSON.stringify(BETTER_SQLITE3)});
    const db = new Database(${JSON.stringify(file)});
    db.exec('BEGIN EXCLUSIVE');
    process.stdout.write('locked\\n');
    process.stdin.once('data', () => { db.exec('COMMIT'); db.close(); process.stdout.write('released\\n'); process.exit(0); });
  `;
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, ['-e', script], { stdio: 'pipe' });
  const lines = (want: string) =>
    new Promise<void>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString('utf8');
        if (out.includes(want)) resolve();
      });
      child.once('exit', (code) => (out.includes(want) ? resolve() : reject(new Error(`locker exited ${code}`))));
    });
  await lines('locked');
  return {
    async release() {
      const done = lines('released');
      child.stdin.write('go\n');
      await done;
    },
    kill() {
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

const challengeWrite = (h: NodeHarness) => api(h, 'POST', '/v1/auth/challenges', { body: { public_key: newDeviceKey().publicKeyHex } });

describe('SQLite store faults: clear 503s, honest health, the event loop keeps serving, recovery without a restart', () => {
  test("another process's lock on the SQLite file does not freeze the server: reads, health and the other listener answer, writes get 503 locked, and all recovers when it lets go", async () => {
    const h = await startNodeHarness({ storeOptions: { busyTimeoutMs: 1500 } });
    let locker: Awaited<ReturnType<typeof holdWriteLock>> | undefined;
    try {
      const token = await adminToken(h);
      assert.equal((await challengeWrite(h)).status, 201);
      locker = await holdWriteLock(join(h.dir, 'control.db'));

      // A write waits for the lock; meanwhile the event loop serves reads and both listeners.
      let writeSettled = false;
      const write = challengeWrite(h).finally(() => {
        writeSettled = true;
      });
      const me = await api(h, 'GET', '/v1/auth/me', { token });
      assert.equal(me.status, 200, 'a bearer check (a read) is served while the write waits');
      const discovery = await nodeApi(h, 'GET', '/.well-known/edge');
      assert.equal(discovery.status, 200, 'the node listener is served while the write waits');
      assert.equal(writeSettled, false, 'the reads were answered while the write was still waiting for the lock');

      const refused: Reply = await write;
      assert.equal(refused.status, 503);
      assert.equal(refused.body.code, 'store_unavailable');
      assert.match(refused.headers.get('retry-after') ?? '', /^\d+$/);
      assert.match(refused.headers.get('content-type') ?? '', /^application\/problem\+json/);

      const health = await api(h, 'GET', '/health');
      assert.equal(health.status, 503);
      assert.equal(health.body.code, 'store_unavailable');
      assert.equal(health.body.health, 'degraded');
      assert.equal(health.body.reason, 'locked');
      const nodeHealth = await nodeApi(h, 'GET', '/edge/0-alpha/health');
      assert.equal(nodeHealth.status, 503);
      assert.deepEqual(nodeHealth.body.store, { status: 'failed', reason: 'locked' });

      await locker.release();
      // Health turns healthy by itself (no write needed to notice), and writes go through again.
      assert.deepEqual((await api(h, 'GET', '/health')).body, { status: 'ok' });
      assert.equal((await nodeApi(h, 'GET', '/edge/0-alpha/health')).status, 200);
      assert.equal((await challengeWrite(h)).status, 201);
    } finally {
      locker?.kill();
      await h.close();
    }
  });

  // The test mounts the small file system it fills, which needs root. A developer's unprivileged
  // run skips it, saying so; under CI (which runs as root) it never skips: it fails instead.
  const root = process.getuid?.() === 0;
  test('a full disk (SQLITE_FULL on a real, small tmpfs) is 503 store_unavailable with health degraded disk_full, reads still served, and recovery once space is freed', {
    skip: root || process.env.CI ? false : 'needs root to mount a tmpfs (under CI it fails instead of skipping)',
  }, async () => {
    assert.ok(root, 'the disk-full test needs root to mount its tmpfs; CI must run it as root');
    const mount = mkdtempSync(join(tmpdir(), 'svc-full-disk-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m,mode=0700', 'tmpfs', mount], { stdio: 'pipe' });
    } catch (error) {
      rmSync(mount, { recursive: true, force: true });
      throw new Error(`mounting a 4 MiB tmpfs on ${mount} failed (the test needs root with CAP_SYS_ADMIN): ${(error as Error).message}`);
    }
    let h: NodeHarness | undefined;
    try {
      const dir = join(mount, 'control');
      mkdirSync(dir, { mode: 0o700 });
      h = await startNodeHarness({ dir });
      const token = await adminToken(h);
      // Fill the file system to the last byte.
      const filler = join(mount, 'filler');
      const fd = openSync(filler, 'w');
      try {
        const chunk = Buffer.alloc(64 * 1024);
        for (;;) {
          try {
            writeSync(fd, chunk);
          } catch {
            try {
              writeSync(fd, Buffer.alloc(512));
            } catch {
              break;
            }
          }
        }
      } finally {
        closeSync(fd);
      }

      let refused: Reply | undefined;
      for (let i = 0; i < 1000 && refused === undefined; i++) {
        const r = await challengeWrite(h);
        if (r.status !== 201) refused = r;
      }
      assert.ok(refused !== undefined, 'a write ran out of space');
      assert.equal(refused.status, 503);
      assert.equal(refused.body.code, 'store_unavailable');
      assert.match(refused.headers.get('retry-after') ?? '', /^\d+$/);

      const health = await api(h, 'GET', '/health');
      assert.equal(health.status, 503);
      assert.equal(health.body.health, 'degraded');
      assert.equal(health.body.reason, 'disk_full');
      assert.deepEqual((await nodeApi(h, 'GET', '/edge/0-alpha/health')).body.store, { status: 'failed', reason: 'disk_full' });
      assert.equal((await api(h, 'GET', '/v1/auth/me', { token })).status, 200, 'reads are still served');

      unlinkSync(filler);
      assert.deepEqual((await api(h, 'GET', '/health')).body, { status: 'ok' }, 'health recovers by itself once space is free');
      assert.equal((await challengeWrite(h)).status, 201);
    } finally {
      await h?.close().catch(() => undefined);
      try {
        execFileSync('umount', [mount]);
      } finally {
        rmSync(mount, { recursive: true, force: true });
      }
    }
  });
});

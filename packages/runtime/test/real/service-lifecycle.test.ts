import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { initProject, ListenRefusedError, openService, RuntimeError } from '../../src/index.js';

const quiet = pino({ level: 'silent' });
let work: string;
let project: string;

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'svc-runtime-lifecycle-'));
  project = join(work, 'demo');
  await initProject(project, { profile: null, env: {}, recover: false });
});
after(() => rmSync(work, { recursive: true, force: true }));

/** Whether something accepts TCP connections at `url` (bounded: 5 s). */
async function answers(url: string): Promise<boolean> {
  try {
    await fetch(`${url}/health`, { signal: AbortSignal.timeout(5_000) });
    return true;
  } catch {
    return false;
  }
}

describe('the service as a library', () => {
  test('management on a wildcard address passed as an address object is refused like the same HOST:PORT string (no bind)', async () => {
    await assert.rejects(
      openService(project, { env: {}, logger: quiet, listeners: ['management'], listen: { management: { host: '0.0.0.0', port: 0 } } }),
      (error: unknown) =>
        error instanceof ListenRefusedError && error.code === 'listen_refused' && error.listener === 'management' && error.given,
    );
  });

  test('stop() called while start() is under way leaves nothing listening once it resolves', async () => {
    const service = await openService(project, {
      env: {},
      logger: quiet,
      listeners: ['management'],
      listen: { management: '127.0.0.1:0' },
    });
    const started = service.start();
    const stopped = service.stop();
    await started;
    const url = service.addresses.management;
    await stopped;
    assert.deepEqual(service.addresses, {}, 'a stopped service lists no address');
    if (url !== undefined) assert.equal(await answers(url), false, `${url} still answers after stop()`);
    await assert.rejects(service.start(), (error: unknown) => error instanceof RuntimeError && error.code === 'service_failed');
  });

  test('a start that fails part-way (a port in use) stops what it started and lists no address', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const service = await openService(project, {
        env: {},
        logger: quiet,
        listeners: ['management', 'node'],
        listen: { management: '127.0.0.1:0', node: `127.0.0.1:${port}` },
      });
      await assert.rejects(service.start(), (error: unknown) => error instanceof RuntimeError && /already in use/.test(error.message));
      assert.deepEqual(service.addresses, {});
      await service.stop();
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  test('two stop() calls both resolve after the service has stopped', async () => {
    const service = await openService(project, {
      env: {},
      logger: quiet,
      listeners: ['management'],
      listen: { management: '127.0.0.1:0' },
    });
    await service.start();
    const url = service.addresses.management as string;
    assert.equal(await answers(url), true);
    await Promise.all([service.stop(), service.stop()]);
    assert.equal(await answers(url), false);
  });
});

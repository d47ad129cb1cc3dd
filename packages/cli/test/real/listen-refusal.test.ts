import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanEnv, freePort, startServer, tempDir } from '../helpers.js';
// A serve that listens is the installed `svc`, spawned; `init` and the refusals, which return
// before anything binds and whose exit code and output are the subject, run in process.
import { initProjectInProcess as initProject, svcInProcess as svc } from '../in-process.js';

/** A port nothing listens on right now (bound and released). */
async function nothingListens(port: number): Promise<boolean> {
  try {
    await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(5000) });
    return false;
  } catch {
    return true;
  }
}

describe('refused management binds', () => {
  const tmp = tempDir();
  const dir = join(tmp.dir, 'demo');
  before(async () => {
    await initProject(dir);
  });
  after(() => tmp.cleanup());

  for (const address of ['0.0.0.0:PORT', '[::]:PORT', ':PORT', '192.0.2.1:PORT', '10.0.0.1:PORT', 'example.com:PORT']) {
    test(`--listen ${address} is refused before binding with one line and a non-zero exit`, async () => {
      const port = await freePort();
      const r = await svc(['auth', 'serve', '--listen', address.replace('PORT', String(port)), dir]);
      assert.notEqual(r.code, 0);
      assert.equal(r.stdout, '');
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.ok(await nothingListens(port));
    });
  }

  test('a refused SVC_MANAGEMENT_LISTEN is refused too, for auth serve and svc serve', async () => {
    for (const cmd of [['auth', 'serve'], ['serve']]) {
      const r = await svc([...cmd, dir], { env: cleanEnv({ SVC_MANAGEMENT_LISTEN: '0.0.0.0:0' }) });
      assert.notEqual(r.code, 0);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    }
  });

  test('--listen beats SVC_MANAGEMENT_LISTEN, which beats the default', async () => {
    // The flag wins over a refused environment value.
    const s1 = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir], {
      env: cleanEnv({ SVC_MANAGEMENT_LISTEN: '0.0.0.0:9090' }),
    });
    await s1.stop();
    // The environment wins over the default.
    const port = await freePort();
    const s2 = await startServer(['auth', 'serve', dir], { env: cleanEnv({ SVC_MANAGEMENT_LISTEN: `127.0.0.1:${port}` }) });
    try {
      assert.equal(s2.port, port);
      assert.equal((await fetch(`${s2.url}/health`)).status, 200);
    } finally {
      await s2.stop();
    }
    // svc serve embeds the same API from the same setting.
    const s3 = await startServer(['serve', dir], {
      env: cleanEnv({ SVC_MANAGEMENT_LISTEN: '127.0.0.1:0', SVC_NODE_LISTEN: '127.0.0.1:0' }),
    });
    try {
      assert.equal((await fetch(`${s3.url}/health`)).status, 200);
    } finally {
      assert.equal(await s3.stop('SIGINT'), 0);
    }
  });

  test('SVC_MANAGEMENT_LISTEN=off cannot turn off auth serve, and with SVC_NODE_LISTEN=off and SVC_APP_LISTEN=off leaves svc serve nothing to run', async () => {
    const env = cleanEnv({ SVC_MANAGEMENT_LISTEN: 'off', SVC_NODE_LISTEN: 'off', SVC_APP_LISTEN: 'off' });
    assert.equal((await svc(['auth', 'serve', dir], { env })).code, 1);
    assert.equal((await svc(['serve', dir], { env })).code, 1);
    assert.equal((await svc(['auth', 'serve', '--listen', 'off', dir])).code, 2);
  });
});

import assert from 'node:assert/strict';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanEnv, freePort, tempDir } from '../helpers.js';
// The servers are the installed `svc`, spawned; `init` and the refusals, which return before
// anything binds and whose exit code and output are the subject, run in process.
import { initProjectInProcess as initProject, svcInProcess as svc } from '../in-process.js';
import { startServe } from '../support/node-serve.js';

describe('serving the node surface: svc node serve and svc serve', () => {
  const tmp = tempDir('svc-node-serve-test-');
  const dir = join(tmp.dir, 'demo');
  before(async () => {
    await initProject(dir);
  });
  after(() => tmp.cleanup());

  test('svc node serve runs the node surface alone, prints its ready line, and exits 0 on SIGTERM', async () => {
    const s = await startServe(['node', 'serve', '--listen', '127.0.0.1:0', dir]);
    try {
      assert.match(s.stdout(), /^svc node: node surface listening on http:\/\/127\.0\.0\.1:\d+\n$/);
      const d = await fetch(`${s.nodeUrl}/.well-known/edge`);
      assert.equal(d.status, 200);
      assert.equal(d.headers.get('cache-control'), 'no-store');
      const body = (await d.json()) as { node_id: string; routes: unknown[] };
      assert.equal(body.routes.length, 6);
      assert.equal((await fetch(`${s.nodeUrl}/edge/0-alpha/health`)).status, 200);
      // No management API on this listener.
      assert.equal((await fetch(`${s.nodeUrl}/v1/auth/me`)).status, 404);
    } finally {
      assert.equal(await s.stop('SIGTERM'), 0);
    }
  });

  test('the node id is stable across restarts: it is derived from the node key made at init', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const s = await startServe(['node', 'serve', '--listen', '127.0.0.1:0', dir]);
      try {
        ids.push(((await (await fetch(`${s.nodeUrl}/.well-known/edge`)).json()) as { node_id: string }).node_id);
      } finally {
        await s.stop();
      }
    }
    assert.equal(ids[0], ids[1]);
  });

  test('--listen beats SVC_NODE_LISTEN, which beats :svc/node-listen in project.edn', async () => {
    const [p1, p2, p3] = [await freePort(), await freePort(), await freePort()];
    const file = join(dir, 'project.edn');
    const original = readFileSync(file, 'utf8');
    writeFileSync(file, original.replace(/^\{/, `{:svc/node-listen "127.0.0.1:${p1}"\n `));
    try {
      const fromConfig = await startServe(['node', 'serve', dir]);
      assert.equal(fromConfig.nodeUrl, `http://127.0.0.1:${p1}`);
      await fromConfig.stop();
      const fromEnv = await startServe(['node', 'serve', dir], { env: cleanEnv({ SVC_NODE_LISTEN: `127.0.0.1:${p2}` }) });
      assert.equal(fromEnv.nodeUrl, `http://127.0.0.1:${p2}`);
      await fromEnv.stop();
      const fromFlag = await startServe(['node', 'serve', '--listen', `127.0.0.1:${p3}`, dir], {
        env: cleanEnv({ SVC_NODE_LISTEN: `127.0.0.1:${p2}` }),
      });
      assert.equal(fromFlag.nodeUrl, `http://127.0.0.1:${p3}`);
      await fromFlag.stop();
    } finally {
      writeFileSync(file, original);
    }
  });

  test('a malformed node address is refused before binding: exit 2 from --listen, 1 from SVC_NODE_LISTEN', async () => {
    for (const bad of ['127.1:0', ':9091', '127.0.0.1', '[::1]9091', 'bad_host:1', '127.0.0.1:70000']) {
      const r = await svc(['node', 'serve', '--listen', bad, dir]);
      assert.equal(r.code, 2, `${bad}: ${r.stderr}`);
      assert.equal(r.stdout, '');
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    }
    const env = await svc(['node', 'serve', dir], { env: cleanEnv({ SVC_NODE_LISTEN: '127.1:0' }) });
    assert.equal(env.code, 1);
    assert.match(env.stderr, /SVC_NODE_LISTEN/);
    assert.equal((await svc(['node', 'serve', '--listen', 'off', dir])).code, 2);
    assert.equal((await svc(['node', 'serve', dir], { env: cleanEnv({ SVC_NODE_LISTEN: 'off' }) })).code, 1);
  });

  test('svc serve with SVC_MANAGEMENT_LISTEN=off runs the node surface alone', async () => {
    const s = await startServe(['serve', dir], { env: cleanEnv({ SVC_MANAGEMENT_LISTEN: 'off', SVC_NODE_LISTEN: '127.0.0.1:0' }) });
    try {
      assert.doesNotMatch(s.stdout(), /management API listening/);
      assert.equal((await fetch(`${s.nodeUrl}/edge/0-alpha/health`)).status, 200);
    } finally {
      assert.equal(await s.stop('SIGINT'), 0);
    }
  });

  test('svc serve runs both surfaces on their own addresses, and SVC_NODE_LISTEN=off leaves the management API alone', async () => {
    const both = await startServe(['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', dir], {
      management: true,
    });
    try {
      assert.notEqual(both.managementUrl, both.nodeUrl);
      assert.equal((await fetch(`${both.managementUrl}/health`)).status, 200);
      assert.equal((await fetch(`${both.nodeUrl}/.well-known/edge`)).status, 200);
      assert.equal((await fetch(`${both.managementUrl}/.well-known/edge`)).status, 404);
    } finally {
      assert.equal(await both.stop(), 0);
    }
    const managementOnly = await startServe(['serve', dir], {
      env: cleanEnv({ SVC_MANAGEMENT_LISTEN: '127.0.0.1:0', SVC_NODE_LISTEN: 'off' }),
      management: true,
      node: false,
    });
    try {
      assert.equal((await fetch(`${managementOnly.managementUrl}/health`)).status, 200);
    } finally {
      assert.equal(await managementOnly.stop(), 0);
    }
    assert.doesNotMatch(managementOnly.stdout(), /node surface listening/);
    const r = await svc(['serve', '--node-listen', '0.0.0.0:notaport', dir]);
    assert.equal(r.code, 2);
  });

  test('svc node serve refuses (exit 1) a node key readable by others, before listening', async () => {
    const key = join(dir, '.svc', 'control', 'node-key.pem');
    chmodSync(key, 0o640);
    try {
      const r = await svc(['node', 'serve', '--listen', '127.0.0.1:0', dir]);
      assert.equal(r.code, 1);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, /chmod 600/);
    } finally {
      chmodSync(key, 0o600);
    }
  });
});

import assert from 'node:assert/strict';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cleanEnv, tempDir } from '../helpers.js';
// The nodes are the installed `svc`, spawned; `init` and the refusal of a missing node key,
// which returns before anything binds, run in process.
import { svcInProcess as svc, svcOkInProcess as svcOk } from '../in-process.js';
import { startServe } from '../support/node-serve.js';
import { createSchemas, writePostgresProject } from '../support/store-projects.js';

describe('node identity', () => {
  const tmp = tempDir();
  const schemas = createSchemas();
  after(async () => {
    await schemas.dispose();
    tmp.cleanup();
  });

  test('a second node on PostgreSQL creates its own owner-only identity on first start, distinct from the first', async () => {
    const project = await writePostgresProject(tmp.dir, { schema: schemas.fresh() });
    await svcOk(['auth', 'init', project]);
    const env = (controlDir: string) => cleanEnv({ SVC_CONTROL_DIR: controlDir, SVC_NODE_LISTEN: '127.0.0.1:0' });
    const first = await startServe(['node', 'serve', project], { env: env(join(project, '.svc', 'control')) });
    const secondControl = join(tmp.dir, 'node-b', 'control');
    const second = await startServe(['node', 'serve', project], { env: env(secondControl) });
    try {
      const a = (await (await fetch(`${first.nodeUrl}/.well-known/edge`)).json()) as { node_id: string };
      const b = (await (await fetch(`${second.nodeUrl}/.well-known/edge`)).json()) as { node_id: string };
      assert.notEqual(a.node_id, b.node_id);
      assert.equal(statSync(secondControl).mode & 0o777, 0o700);
      assert.equal(statSync(join(secondControl, 'node-key.pem')).mode & 0o777, 0o600);
      assert.match(second.stderr(), /created this node's identity key/);
    } finally {
      await first.stop();
      await second.stop();
    }
  });

  test('with the embedded store a missing node key is refused, not silently replaced', async () => {
    const project = join(tmp.dir, 'embedded');
    mkdirSync(project, { recursive: true });
    await svcOk(['auth', 'init', project]);
    rmSync(join(project, '.svc', 'control', 'node-key.pem'));
    const r = await svc(['node', 'serve', '--listen', '127.0.0.1:0', project]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /node-key\.pem does not exist/);
  });
});

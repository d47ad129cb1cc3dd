import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { initProject, keygen, type ServerProcess, startServer, svc, tempDir } from '../helpers.js';

function codeOf(stderr: string): string | undefined {
  return /\(([a-z_]+)\)/.exec(stderr)?.[1];
}

// The bootstrap token over the management API of a spawned `svc auth serve`; the offline
// commands' tests are in ../init-and-bootstrap.test.ts (in process).
describe('init and the bootstrap token', () => {
  const tmp = tempDir();
  let server: ServerProcess | undefined;
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('a bootstrap token is single use through the API', async () => {
    const dir = join(tmp.dir, 'single-api');
    const init = await initProject(dir);
    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir]);
    const enroll = async (pem: string) =>
      fetch(`${server?.url}/v1/auth/enroll`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ bootstrap_token: init.bootstrap_token, public_key: await keygen(join(tmp.dir, pem)) }),
      });
    const first = await enroll('a1.pem');
    assert.equal(first.status, 201);
    const second = await enroll('a2.pem');
    assert.equal(second.status, 401);
    assert.equal(((await second.json()) as { code: string }).code, 'bootstrap_token_used');
    // And the CLI agrees, on the same project.
    const cli = await svc(['auth', 'enroll', init.bootstrap_token, await keygen(join(tmp.dir, 'a3.pem')), dir]);
    assert.equal(codeOf(cli.stderr), 'bootstrap_token_used');
  });
});

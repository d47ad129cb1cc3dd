import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cleanEnv, SVC_BIN, svc, svcOk, tempDir } from '../helpers.js';

// The conventions that need a process of their own: a fresh module cache, a port held by
// another listener, a umask. The rest of cli-conventions runs in process (../cli-conventions.test.ts).
describe('svc behaves like the CLIs operators like', () => {
  test('svc --help loads no command module: not the server, the stores, pino or Fastify', () => {
    const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
    const probe = `const { main } = await import(${JSON.stringify(main)});
      const { writeSync } = await import('node:fs');
      await main(['--help']);
      const { createRequire } = await import('node:module');
      const loaded = Object.keys(createRequire(import.meta.url).cache);
      writeSync(2, JSON.stringify(loaded));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', probe], { encoding: 'utf8', env: cleanEnv() });
    assert.equal(r.status, 0, r.stderr);
    const loaded = JSON.parse(r.stderr) as string[];
    const heavy = loaded.filter((f) => /\/(fastify|pino|better-sqlite3|pg|edn-data)\//.test(f));
    assert.deepEqual(heavy, []);
  });

  describe('hints name options that exist', () => {
    let blocker: Server;
    let port: number;
    const tmp = tempDir();
    before(async () => {
      blocker = createServer();
      await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
      port = (blocker.address() as { port: number }).port;
    });
    after(async () => {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
      tmp.cleanup();
    });

    test('a port clash on svc serve names --node-listen or --management-listen, whichever clashed', async () => {
      const dir = join(tmp.dir, 'clash');
      await svcOk(['auth', 'init', dir, '--json']);
      const node = await svc(['serve', dir, '--management-listen', '127.0.0.1:0', '--node-listen', `127.0.0.1:${port}`]);
      assert.equal(node.code, 1);
      assert.match(node.stderr, /already in use; choose another address with --node-listen or SVC_NODE_LISTEN/);
      const mgmt = await svc(['serve', dir, '--management-listen', `127.0.0.1:${port}`, '--node-listen', '127.0.0.1:0']);
      assert.equal(mgmt.code, 1);
      assert.match(mgmt.stderr, /already in use; choose another address with --management-listen or SVC_MANAGEMENT_LISTEN/);
    });
  });

  describe('the device key lives in the user’s config directory, owner-only', () => {
    const tmp = tempDir();
    after(() => tmp.cleanup());

    test('keygen without --out writes ~/.config/svc/device.pem (0600 in a 0700 folder) even under umask 002, and nothing in the working directory', async () => {
      const home = join(tmp.dir, 'home');
      const cwd = join(tmp.dir, 'work');
      const env = cleanEnv({ HOME: home });
      const r = spawnSync(
        'bash',
        ['-c', `mkdir -p "${cwd}" && cd "${cwd}" && umask 002 && "${process.execPath}" "$SVC_BIN_PATH" auth keygen`],
        {
          encoding: 'utf8',
          env: { ...env, SVC_BIN_PATH: SVC_BIN },
        },
      );
      assert.equal(r.status, 0, r.stderr);
      const pub = r.stdout.trim();
      assert.match(pub, /^[0-9a-f]{64}$/);
      const key = join(home, '.config', 'svc', 'device.pem');
      assert.equal(statSync(key).mode & 0o777, 0o600);
      assert.equal(statSync(join(home, '.config', 'svc')).mode & 0o777, 0o700);
      assert.deepEqual(spawnSync('ls', ['-A', cwd], { encoding: 'utf8' }).stdout, '');
      assert.equal((await svcOk(['auth', 'pubkey'], { env })).stdout.trim(), pub, 'pubkey reads the same default key');
      const again = await svc(['auth', 'keygen'], { env });
      assert.equal(again.code, 1, 'an existing key is never replaced without --force');
    });
  });
});

import assert from 'node:assert/strict';
import { copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cleanEnv, run, type ServerProcess, startServer, svcOk, tempDir } from '../helpers.js';
import { REPO_ROOT } from '../repo.js';

const repoGitignore = join(REPO_ROOT, '.gitignore');

describe('ignore files', () => {
  const tmp = tempDir('svc-ignore-test-');
  const env = cleanEnv({ HOME: join(tmp.dir, 'home'), GIT_CONFIG_NOSYSTEM: '1' });
  let server: ServerProcess | undefined;

  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('the quick start run inside a checkout leaves no key, credentials or project for git to commit', async () => {
    // A working tree with this repository's .gitignore, where a user follows the quick start.
    const tree = join(tmp.dir, 'checkout');
    assert.equal((await run('git', ['init', '-q', tree], { env })).code, 0);
    copyFileSync(repoGitignore, join(tree, '.gitignore'));
    const opts = { env, cwd: tree };

    const init = JSON.parse((await svcOk(['auth', 'init', 'demo', '--json'], opts)).stdout) as { bootstrap_token: string };
    const pub = (await svcOk(['auth', 'keygen', '--out', 'admin.pem'], opts)).stdout.trim();
    await svcOk(['auth', 'keygen', '--out', 'device.pem'], opts);
    await svcOk(['auth', 'enroll', init.bootstrap_token, pub, 'demo', '--name', 'laptop'], opts);
    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', join(tree, 'demo')], { env });
    await svcOk(['auth', 'login', '--key', 'admin.pem', '--url', server.url, '--credentials', 'credentials.json'], opts);
    await svcOk(['auth', 'login', '--key', 'admin.pem', '--url', server.url, '--credentials', 'credentials-laptop.json'], opts);
    // The server still runs: its database and -wal/-shm side files are open in the project.
    const status = await run('git', ['status', '--porcelain', '--untracked-files=all', '--ignored=no'], opts);
    assert.equal(status.code, 0, status.stderr);
    const untracked = status.stdout.split('\n').filter((l) => l !== '');
    assert.deepEqual(untracked, ['?? .gitignore'], `git would offer these for a commit: ${untracked.join(', ')}`);
    // The secrets were really written there, and git ignores each of them.
    for (const file of ['admin.pem', 'device.pem', 'credentials.json', 'credentials-laptop.json', 'demo/.svc/control/control.db']) {
      assert.equal(existsSync(join(tree, file)), true, `${file} was written`);
      assert.equal((await run('git', ['check-ignore', '-q', file], opts)).code, 0, `${file} is ignored`);
    }
  });
});

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { CHILD_TIMEOUT_MS, cleanEnv, enrolledProject, SVC_BIN, tempDir } from '../helpers.js';

/**
 * Runs `svc args` with a standard output whose reader has already gone: the read end of the
 * pipe is closed before the child can write, so its first write fails with EPIPE, as under
 * `svc ... | head -1` once head has its line.
 */
function svcIntoClosedPipe(args: readonly string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SVC_BIN, ...args], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`svc ${args.join(' ')} did not exit within ${CHILD_TIMEOUT_MS} ms after its stdout was closed`));
    }, CHILD_TIMEOUT_MS);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe('what svc says to an operator (issue #26.11)', () => {
  const tmp = tempDir();
  let project: Awaited<ReturnType<typeof enrolledProject>>;
  before(async () => {
    project = await enrolledProject(tmp.dir);
  });
  after(() => tmp.cleanup());

  test('a reader that closed the pipe (svc ... | head -1) ends every command with exit 0 and nothing on stderr', async () => {
    for (const args of [['auth', 'audit', project.dir], ['auth', 'devices', project.dir], ['--help'], ['help', 'auth', 'init']]) {
      const r = await svcIntoClosedPipe(args);
      assert.deepEqual(r, { code: 0, stderr: '' }, `svc ${args.join(' ')}`);
    }
  });
});

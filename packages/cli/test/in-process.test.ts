import assert from 'node:assert/strict';
import { mkdirSync, realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cleanEnv, tempDir } from './helpers.js';
import { svcInProcess, svcOkInProcess } from './in-process.js';

// The fast tier's CLI tests trust svcInProcess to give each run its own process-wide state and
// to leave none behind: these tests hold it to that.
describe('svc in process: each run has its own streams, environment, stdin and directory, and leaves nothing behind', () => {
  const tmp = tempDir();
  after(() => tmp.cleanup());

  test('stdout and stderr are the run’s, not the test process’s', async () => {
    const ok = await svcInProcess(['--version']);
    assert.deepEqual({ code: ok.code, stderr: ok.stderr }, { code: 0, stderr: '' });
    assert.match(ok.stdout, /^\d+\.\d+\.\d+\n$/);
    const bad = await svcInProcess(['frobnicate']);
    assert.equal(bad.code, 2);
    assert.equal(bad.stdout, '');
    assert.match(bad.stderr, /unknown command "frobnicate"/);
  });

  test('the logger’s lines (pino writes fd 2 itself) are the run’s stderr too', async () => {
    const r = await svcOkInProcess(['auth', 'init', join(tmp.dir, 'logged')], { env: cleanEnv({ SVC_LOG_LEVEL: 'info' }) });
    assert.match(r.stderr, /"event":"bootstrap\.issued"/);
    assert.doesNotMatch(r.stderr, /svcb_/, 'the log line carries no token');
  });

  test('the run reads its own environment; the test process’s is untouched, during and after', async () => {
    const before = { ...process.env };
    const r = await svcInProcess(['auth', 'whoami'], { env: cleanEnv({ SVC_LOG_LEVEL: 'bogus' }) });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /SVC_LOG_LEVEL="bogus"/);
    assert.equal(process.env.SVC_LOG_LEVEL, before.SVC_LOG_LEVEL);
    assert.deepEqual({ ...process.env }, before);
  });

  test('HOME (what os.homedir() reads) and the working directory are the run’s, and restored after it', async () => {
    const home = join(tmp.dir, 'home');
    const cwd = join(tmp.dir, 'cwd');
    mkdirSync(cwd);
    const [homeBefore, cwdBefore] = [homedir(), process.cwd()];
    const key = await svcOkInProcess(['auth', 'keygen'], { env: cleanEnv({ HOME: home }), cwd });
    assert.match(key.stderr, new RegExp(`wrote the private key to ${join(home, '.config', 'svc', 'device.pem')}`));
    const init = await svcOkInProcess(['auth', 'init', 'relative', '--json'], { cwd });
    assert.equal(realpathSync((JSON.parse(init.stdout) as { project: string }).project), realpathSync(join(cwd, 'relative')));
    assert.deepEqual([homedir(), process.cwd()], [homeBefore, cwdBefore]);
  });

  test('a `-` secret is read from the run’s stdin; without one, it is missing', async () => {
    const project = join(tmp.dir, 'stdin');
    const token = (await svcOkInProcess(['auth', 'init', project, '--token-only'])).stdout;
    const key = (await svcOkInProcess(['auth', 'keygen', '--out', join(tmp.dir, 'stdin.pem')])).stdout.trim();
    const missing = await svcInProcess(['auth', 'enroll', '-', key, project]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /no bootstrap token on standard input/);
    const enrolled = await svcInProcess(['auth', 'enroll', '-', key, project, '--json'], { stdin: token });
    assert.equal(enrolled.code, 0, enrolled.stderr);
  });

  test('overlapping runs are serialised, each with its own output', async () => {
    const runs = await Promise.all([svcInProcess(['--version']), svcInProcess(['frobnicate']), svcInProcess(['help', 'auth'])]);
    assert.deepEqual(
      runs.map((r) => r.code),
      [0, 2, 0],
    );
    assert.equal(runs[0]?.stderr, '');
    assert.equal(runs[1]?.stdout, '');
    assert.match(runs[2]?.stdout ?? '', /svc auth init/);
  });
});

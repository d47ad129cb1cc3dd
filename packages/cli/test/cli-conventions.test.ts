import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cleanEnv, tempDir } from './helpers.js';
// In process: what is tested here is what `main` prints and returns, not the process around it
// (real/cli-conventions.test.ts has the tests that need one).
import { svcInProcess as svc, svcOkInProcess as svcOk } from './in-process.js';

const cliPackage = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

describe('svc behaves like the CLIs operators like', () => {
  test('svc alone shows the help and exits 0; -h, --help, -v and --version too', async () => {
    const bare = await svc([]);
    assert.equal(bare.code, 0, bare.stderr);
    assert.match(bare.stdout, /Usage: svc <command>/);
    assert.match(bare.stdout, /svc auth init/);
    for (const flag of ['-h', '--help']) assert.equal((await svc([flag])).stdout, bare.stdout);
    for (const flag of ['-v', '--version']) {
      const r = await svc([flag]);
      assert.equal(r.code, 0);
      assert.match(r.stdout, /^\d+\.\d+\.\d+\n$/);
      assert.equal(r.stdout, `${cliPackage.version}\n`, 'the version is the one of package.json');
    }
  });

  test('svc help auth lists the auth commands only; svc help auth init is the command’s own help', async () => {
    const group = await svc(['help', 'auth']);
    assert.equal(group.code, 0, group.stderr);
    assert.match(group.stdout, /svc auth init/);
    assert.doesNotMatch(group.stdout, /svc package install|svc node serve/);
    assert.equal((await svc(['auth'])).stdout, group.stdout, '`svc auth` shows the same');
    const one = await svc(['help', 'auth', 'init']);
    assert.equal(one.code, 0);
    assert.equal(one.stdout, (await svc(['auth', 'init', '--help'])).stdout);
    assert.match(one.stdout, /Usage: svc auth init <PROJECT>/);
  });

  const typos: [string[], RegExp][] = [
    [['auth', 'initt', 'demo'], /unknown command "auth initt"\. Did you mean `svc auth init`\?/],
    [['auth', 'sesions'], /Did you mean `svc auth sessions`\?/],
    [['sever', 'demo'], /Did you mean `svc serve`\?/],
    [['auth', 'devices', 'remvoe', 'dev_x', 'demo'], /Did you mean `svc auth devices remove`\?/],
    [['auth', 'init', 'demo', '--jsn'], /unknown option "--jsn" \(did you mean --json\?\)/],
    [['help', 'auth', 'logn'], /Did you mean `svc auth login`\?/],
  ];
  for (const [args, expected] of typos) {
    test(`a typo gets one line with a suggestion and exit 2: svc ${args.join(' ')}`, async () => {
      const r = await svc(args);
      assert.equal(r.code, 2);
      assert.equal(r.stdout, '');
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, expected);
    });
  }

  test('a word that is nothing like a command gets no suggestion', async () => {
    const r = await svc(['frobnicate']);
    assert.equal(r.code, 2);
    assert.doesNotMatch(r.stderr, /Did you mean/);
  });

  test('SVC_LOG_LEVEL=bogus is a usage error that lists the levels, not "a bug"', async () => {
    const r = await svc(['auth', 'whoami'], { env: cleanEnv({ SVC_LOG_LEVEL: 'bogus' }) });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /SVC_LOG_LEVEL="bogus" is not a log level; use one of fatal, error, warn, info, debug, trace, silent/);
    assert.doesNotMatch(r.stderr, /a bug/);
  });

  test('the command table svc --help lists matches every command it loads: words and summary', async () => {
    const { COMMANDS } = (await import(
      fileURLToPath(new URL('../dist/commands/index.js', import.meta.url))
    )) as typeof import('../src/commands/index.js');
    for (const entry of COMMANDS) {
      const command = await entry.load();
      assert.deepEqual(command.path, entry.path);
      assert.equal(command.summary, entry.summary, entry.path.join(' '));
    }
  });

  describe('hints name options that exist', () => {
    const tmp = tempDir();
    after(() => tmp.cleanup());

    test('follow-up commands quote a project name with a space, so they can be pasted', async () => {
      const dir = join(tmp.dir, 'my project');
      const r = await svcOk(['auth', 'init', dir]);
      assert.ok(r.stdout.includes(`svc auth enroll - '${dir}'`), r.stdout);
    });
  });
});

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cleanEnv, svc, svcOk, tempDir } from './helpers.js';

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

  test('svc --help loads no command module: not the server, the stores, pino or Fastify', () => {
    const main = fileURLToPath(new URL('../dist/main.js', import.meta.url));
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

    test('follow-up commands quote a project name with a space, so they can be pasted', async () => {
      const dir = join(tmp.dir, 'my project');
      const r = await svcOk(['auth', 'init', dir]);
      assert.ok(r.stdout.includes(`svc auth enroll - '${dir}'`), r.stdout);
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
          env: { ...env, SVC_BIN_PATH: fileURLToPath(new URL('../../../node_modules/.bin/svc', import.meta.url)) },
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

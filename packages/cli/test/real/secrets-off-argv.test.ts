import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CHILD_TIMEOUT_MS, cleanEnv, keygen, SVC_BIN, svcOk, svcOnTerminal, tempDir } from '../helpers.js';
import { type ServeProcess, startServe } from '../support/node-serve.js';

/**
 * Runs `svc args` with `secret` written to its standard input only after a watcher has
 * started reading the process's `/proc/PID/cmdline` (what any local user can read), and keeps
 * watching until it exits. Resolves with what the watcher saw and the command's result.
 */
function runWatched(
  args: readonly string[],
  secret: string,
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string; cmdlines: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SVC_BIN, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    const cmdlines = new Set<string>();
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const watch = (): void => {
      try {
        cmdlines.add(readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').join(' '));
      } catch {
        // gone already
      }
    };
    watch();
    const timer = setInterval(watch, 2);
    // The secret arrives on stdin a moment later, as a pipe from another process would send it.
    setTimeout(() => child.stdin.end(`${secret}\n`), 200);
    // Bounded: a command that never exits fails the test by name.
    const deadline = setTimeout(() => {
      clearInterval(timer);
      child.kill('SIGKILL');
      reject(new Error(`svc ${args.join(' ')} did not exit within ${CHILD_TIMEOUT_MS} ms\nstderr: ${stderr}`));
    }, CHILD_TIMEOUT_MS);
    child.on('error', reject);
    child.on('close', (code) => {
      clearInterval(timer);
      clearTimeout(deadline);
      resolve({ code, stdout, stderr, cmdlines: [...cmdlines] });
    });
  });
}

describe('one-time secrets never appear in a process’s arguments', () => {
  const tmp = tempDir();
  const env = cleanEnv();
  let project: string;
  let token: string;
  let adminKey: string;
  let server: ServeProcess | undefined;

  before(async () => {
    project = join(tmp.dir, 'demo');
    const init = await svcOk(['auth', 'init', project]);
    token = /bootstrap token: (svcb_\S+)/.exec(init.stdout)?.[1] ?? '';
    assert.match(token, /^svcb_/);
    // The attack this closes: the hint used to print the token inside the next command.
    const hint = init.stdout.split('\n').filter((l) => !l.startsWith('bootstrap token:'));
    assert.ok(!hint.join('\n').includes(token), `init's follow-up shows the token:\n${init.stdout}`);
    assert.ok(
      hint.some((l) => l.includes('svc auth enroll - ')),
      init.stdout,
    );
    adminKey = join(tmp.dir, 'admin.pem');
    await keygen(adminKey, { env });
  });
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('a local watcher reading /proc/PID/cmdline of `svc auth enroll -` never sees the bootstrap token', async () => {
    const r = await runWatched(['auth', 'enroll', '-', project, '--key', adminKey, '--json'], token, env);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).device.realm, 'management');
    assert.ok(r.cmdlines.length > 0, 'the watcher read the command line');
    for (const line of r.cmdlines) assert.ok(!line.includes(token), `the token is in the arguments: ${line}`);
  });

  test('enroll without the token and without a terminal is a usage error naming the `-` form', () => {
    const r = spawnSync(process.execPath, [SVC_BIN, 'auth', 'enroll', project, '--key', adminKey], { env, encoding: 'utf8', input: '' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /the bootstrap token is missing; pass `-` in place of <BOOTSTRAP_TOKEN>/);
  });

  test('on a terminal, enroll prompts for the token and does not echo it (driven through a pty by Python)', async () => {
    const recovered = await svcOk(['auth', 'init', '--recover', project, '--json']);
    const fresh = JSON.parse(recovered.stdout).bootstrap_token as string;
    const key = join(tmp.dir, 'tty.pem');
    await keygen(key, { env });
    const result = await svcOnTerminal(['auth', 'enroll', project, '--key', key, '--name', 'tty'], {
      env,
      prompt: 'bootstrap token: ',
      answer: fresh,
    });
    assert.equal(result.code, 0, result.screen);
    assert.match(result.screen, /bootstrap token: /);
    assert.match(result.screen, /enrolled device dev_\S+ \("tty"\)/);
    assert.ok(!result.screen.includes(fresh), 'the token was echoed to the terminal');
  });

  test('a local watcher reading /proc/PID/cmdline of `svc auth pair complete --code -` never sees the pairing code; the printed command holds no code', async () => {
    server = await startServe(['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', project], {
      management: true,
      env,
    });
    const adminEnv = cleanEnv({ SVC_CREDENTIALS: join(tmp.dir, 'admin-creds.json') });
    await svcOk(['auth', 'login', '--key', adminKey, '--url', server.managementUrl as string], { env: adminEnv });
    const deviceKey = join(tmp.dir, 'device.pem');
    const devicePub = await keygen(deviceKey, { env });
    const prepare = ['auth', 'pair', '--node-url', server.nodeUrl, '--device-key', devicePub];
    const prepared = JSON.parse((await svcOk([...prepare, '--json'], { env: adminEnv })).stdout);
    assert.ok(!String(prepared.command).includes(prepared.code), `the follow-up command holds the code: ${prepared.command}`);
    const human = await svcOk(prepare, { env: adminEnv });
    const shown = /code:\s+(\S+)/.exec(human.stdout)?.[1] ?? '';
    const followUp = human.stdout.split('\n').find((l) => l.includes('svc auth pair complete')) ?? '';
    assert.ok(followUp !== '' && !followUp.includes(shown), human.stdout);

    const r = await runWatched(
      [
        'auth',
        'pair',
        'complete',
        '--node-url',
        server.nodeUrl,
        '--intent',
        prepared.intent_id,
        '--code',
        '-',
        '--key',
        deviceKey,
        '--json',
      ],
      prepared.code,
      env,
    );
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).device.realm, 'management');
    for (const line of r.cmdlines) assert.ok(!line.includes(prepared.code), `the code is in the arguments: ${line}`);
  });
});

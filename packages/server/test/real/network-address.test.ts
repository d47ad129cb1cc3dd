import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

// The dummy interface the network-attack tests make when the machine has no non-loopback
// address: it must not outlive the run, nor a leftover of it break the next one.
const ROOT = process.getuid?.() === 0 && process.platform === 'linux';
const MODULE = fileURLToPath(new URL('../support/network-address.ts', import.meta.url));

/** Whether this machine has an interface named `name`. */
function linkExists(name: string): boolean {
  return spawnSync('ip', ['link', 'show', name], { stdio: 'ignore' }).status === 0;
}

function removeLink(name: string): void {
  if (linkExists(name)) execFileSync('ip', ['link', 'del', name]);
}

/** A child process that adds `address` on a dummy interface `name` and then waits to be stopped. */
function dummyHolder(name: string, address: string): ChildProcess {
  const script = `import(${JSON.stringify(MODULE)}).then((m) => {
    try { m.addDummyAddress(${JSON.stringify(name)}, ${JSON.stringify(address)}); console.log('ready'); }
    catch (e) { console.log('failed: ' + e.message); process.exit(3); }
    setInterval(() => {}, 60_000);
  })`;
  return spawn(process.execPath, ['--import', 'tsx', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
}

/** The first line the child prints, within 30 s (its setup), or an error naming what it waited for. */
async function firstLine(child: ChildProcess, what: string): Promise<string> {
  let text = '';
  const line = new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const end = text.indexOf('\n');
      if (end >= 0) resolve(text.slice(0, end));
    });
    child.once('exit', (code) => reject(new Error(`${what}: the child exited (${code}) before printing a line`)));
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  try {
    return await Promise.race([
      line,
      once(child, 'exit').then(() => {
        throw new Error(`${what}: no line within 30 s`);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Waits (at most 30 s) for `child` to exit, naming what it waited for. */
async function exited(child: ChildProcess, what: string): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  let late = false;
  const timer = setTimeout(() => {
    late = true;
    child.kill('SIGKILL');
  }, 30_000);
  try {
    await once(child, 'exit');
    assert.equal(late, false, `${what}: the child did not exit within 30 s`);
  } finally {
    clearTimeout(timer);
  }
}

describe('the network-attack tests’ dummy interface', {
  skip: ROOT || process.env.CI ? false : 'making an interface needs root on Linux (under CI it fails instead of skipping)',
}, () => {
  const name = `svcu${process.pid % 100_000}`;
  const address = `10.253.${(process.pid >> 8) & 255}.${((process.pid & 255) % 254) + 1}`;
  after(() => removeLink(name));

  test('test-interface-leftover: a leftover interface of the same name does not break the setup, which replaces it', async () => {
    assert.ok(ROOT, 'this test needs root on Linux; CI must run it as root');
    removeLink(name);
    // What a killed earlier run leaves behind.
    try {
      execFileSync('ip', ['link', 'add', name, 'type', 'dummy'], { stdio: 'ignore' });
    } catch {
      execFileSync('ip', ['link', 'add', name, 'type', 'bridge']);
    }
    const child = dummyHolder(name, address);
    try {
      assert.equal(await firstLine(child, 'the setup over a leftover interface'), 'ready');
      assert.match(
        execFileSync('ip', ['-4', 'addr', 'show', name], { encoding: 'utf8' }),
        new RegExp(`inet ${address.replaceAll('.', '\\.')}/32`),
      );
    } finally {
      child.kill('SIGKILL');
      await exited(child, 'the killed holder');
    }
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    test(`test-interface-left-behind-on-${signal}: the dummy interface is removed when the run is stopped by ${signal}`, async () => {
      assert.ok(ROOT, 'this test needs root on Linux; CI must run it as root');
      removeLink(name);
      const child = dummyHolder(name, address);
      assert.equal(await firstLine(child, 'the setup'), 'ready');
      assert.ok(linkExists(name), 'the interface exists while the run holds it');
      child.kill(signal);
      await exited(child, `the holder stopped by ${signal}`);
      assert.equal(child.signalCode, signal, `the holder still ends by ${signal}, as it would have without the cleanup`);
      assert.equal(linkExists(name), false, `the interface ${name} is gone after ${signal}`);
    });
  }
});

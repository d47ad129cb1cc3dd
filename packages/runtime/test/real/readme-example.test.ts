import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { initProject } from '../../src/index.js';

const PACKAGE = fileURLToPath(new URL('../../', import.meta.url));

/** The one JavaScript example of the package's README, as a reader would copy it. */
function readmeExample(): string {
  const readme = readFileSync(join(PACKAGE, 'README.md'), 'utf8');
  const blocks = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1] as string);
  assert.equal(blocks.length, 1, 'the README has exactly one js example');
  return blocks[0] as string;
}

test("the README's example starts a project's service (the listeners it names), answers on real sockets, and stops on SIGTERM", async () => {
  const work = mkdtempSync(join(tmpdir(), 'svc-runtime-readme-'));
  // The script lives inside the package so that `@svc/runtime` resolves as it does for an installed
  // dependency: to the built package (the tests run on a built tree, as `npm test` builds first).
  const scripts = join(PACKAGE, '.tmp');
  mkdirSync(scripts, { recursive: true });
  const script = join(scripts, `readme-example-${process.pid}.mjs`);
  try {
    await initProject(join(work, 'demo'), { profile: null, env: {}, recover: false });
    writeFileSync(script, readmeExample());
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: work, SVC_LOG_LEVEL: 'warn' };
    const child = spawn(process.execPath, [script], { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
    });
    child.stderr.on('data', (b: Buffer) => {
      stderr += b.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const line = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`waited 60 s for the example to print its addresses; stderr: ${stderr}`)), 60_000);
      const check = () => {
        const first = stdout.split('\n')[0];
        if (stdout.includes('\n') && first !== undefined) {
          clearTimeout(timer);
          resolve(first);
        }
      };
      child.stdout.on('data', check);
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`the example exited (${code}) before printing its addresses; stderr: ${stderr}`));
      });
    });
    const addresses = JSON.parse(line) as Record<string, string>;
    assert.deepEqual(Object.keys(addresses), ['management', 'node'], 'only the listeners asked for run');
    const health = await fetch(`${addresses.management}/health`, { signal: AbortSignal.timeout(10_000) });
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok' });
    const discovery = await fetch(`${addresses.node}/.well-known/edge`, { signal: AbortSignal.timeout(10_000) });
    assert.equal(discovery.status, 200);
    assert.match(String(((await discovery.json()) as { node_id?: unknown }).node_id), /^[0-9A-Z-]+$/);
    child.kill('SIGTERM');
    const code = await Promise.race([
      exited,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('waited 30 s for the example to exit after SIGTERM')), 30_000)),
    ]);
    assert.equal(code, 0, `stderr: ${stderr}`);
  } finally {
    rmSync(scripts, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
});

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CHILD_TIMEOUT_MS, cleanEnv, keygen, run, SVC_BIN, svcOk, tempDir } from './helpers.js';

// The container's entrypoint and HEALTHCHECK, run as they are in the image but against a temp
// project and control directory (no container engine here). `svc` is the lead's tracked
// bin/svc.js once it exists, else the built dist/bin.js; SVC_BIN overrides both.
const ENTRYPOINT = fileURLToPath(new URL('../../../docs/docker/entrypoint.sh', import.meta.url));
const HEALTHCHECK = fileURLToPath(new URL('../../../docs/docker/healthcheck.mjs', import.meta.url));
const TRACKED_BIN = fileURLToPath(new URL('../bin/svc.js', import.meta.url));
const BIN = process.env.SVC_BIN ?? (existsSync(TRACKED_BIN) ? TRACKED_BIN : SVC_BIN);

const NODE_READY = /svc node: node surface listening on (http:\/\/127\.0\.0\.1:(\d+))/;
const MANAGEMENT_READY = /svc auth: management API listening on (http:\/\/127\.0\.0\.1:(\d+))/;
const TOKEN = /svcb_[A-Za-z0-9_-]{43}/g;

interface Container {
  readonly child: ChildProcess;
  readonly nodePort: number;
  readonly managementPort: number;
  stdout(): string;
  stop(): Promise<number | null>;
}

/** Runs entrypoint.sh (no arguments, as the image's ENTRYPOINT) until both surfaces listen. */
function startContainer(env: NodeJS.ProcessEnv): Promise<Container> {
  const child = spawn(ENTRYPOINT, [], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the entrypoint did not serve within ${CHILD_TIMEOUT_MS} ms\nstdout: ${out}\nstderr: ${err}`));
    }, CHILD_TIMEOUT_MS);
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const node = NODE_READY.exec(out);
      const management = MANAGEMENT_READY.exec(out);
      if (node === null || management === null) return;
      clearTimeout(timer);
      resolve({
        child,
        nodePort: Number(node[2]),
        managementPort: Number(management[2]),
        stdout: () => out,
        async stop() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          return exited;
        },
      });
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the entrypoint exited with ${code} before serving\nstdout: ${out}\nstderr: ${err}`));
    });
  });
}

/** The image's HEALTHCHECK command (`node healthcheck.mjs`) with the container's environment. */
function healthcheck(env: Record<string, string>) {
  return run(process.execPath, [HEALTHCHECK], { env: cleanEnv(env) });
}

describe('the container entrypoint', () => {
  const tmp = tempDir('svc-entrypoint-test-');
  const project = join(tmp.dir, 'srv', 'project');
  const control = join(tmp.dir, 'var', 'lib', 'svc', 'control');
  // The image's environment, with ports 0 and temp directories instead of volumes.
  const env = cleanEnv({
    HOME: join(tmp.dir, 'home'),
    SVC_BIN: BIN,
    SVC_PROJECT_DIR: project,
    SVC_CONTROL_DIR: control,
    SVC_MANAGEMENT_LISTEN: '127.0.0.1:0',
    SVC_NODE_LISTEN: '127.0.0.1:0',
  });
  const containers: Container[] = [];
  let token = '';

  after(async () => {
    for (const c of containers) await c.stop();
    tmp.cleanup();
  });

  test('the first start on an empty control volume initialises the project, prints the bootstrap token once and serves', async () => {
    const first = await startContainer(env);
    containers.push(first);
    const tokens = first.stdout().match(TOKEN) ?? [];
    assert.equal(tokens.length, 1, `exactly one bootstrap token in the log:\n${first.stdout()}`);
    token = tokens[0] as string;
    // umask 077 and the owner-only control directory, on a volume that started empty.
    assert.equal(statSync(control).mode & 0o777, 0o700);
    assert.equal(statSync(join(control, 'control.db')).mode & 0o777, 0o600);
    assert.equal(statSync(join(control, 'node-key.pem')).mode & 0o777, 0o600);
    assert.equal(statSync(join(project, 'project.edn')).mode & 0o077, 0, 'project.edn is owner-only (umask 077)');
    // The printed token is the live one: the first admin enrolls with it while the node serves.
    const pub = await keygen(join(tmp.dir, 'admin.pem'), { env });
    await svcOk(['auth', 'enroll', token, pub, project, '--name', 'laptop'], { env });
    assert.equal((await healthcheck({ SVC_NODE_LISTEN: `0.0.0.0:${first.nodePort}` })).code, 0);
    assert.equal(await first.stop(), 0, 'svc serve (exec-ed by the entrypoint) stops cleanly on SIGTERM');
  });

  test('a container restart prints no bootstrap token again and keeps the enrolled device', async () => {
    assert.notEqual(token, '', 'the first start ran');
    const second = await startContainer(env);
    containers.push(second);
    assert.doesNotMatch(second.stdout(), /svcb_|bootstrap/, `the restart's log:\n${second.stdout()}`);
    const devices = await svcOk(['auth', 'devices', project, '--json'], { env });
    assert.match(devices.stdout, /"name":\s*"laptop"/);
    // The old token stays spent: a restart did not issue a new one.
    const other = await keygen(join(tmp.dir, 'other.pem'), { env });
    const again = await run(BIN, ['auth', 'enroll', token, other, project], { env });
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /bootstrap_token_used/);
    assert.equal(await second.stop(), 0);
  });

  test('the HEALTHCHECK succeeds against a serving container on the node surface or the management API, and fails once it stops', async () => {
    const third = await startContainer(env);
    containers.push(third);
    assert.equal((await healthcheck({ SVC_NODE_LISTEN: `0.0.0.0:${third.nodePort}` })).code, 0);
    const viaManagement = await healthcheck({ SVC_NODE_LISTEN: 'off', SVC_MANAGEMENT_LISTEN: `127.0.0.1:${third.managementPort}` });
    assert.equal(viaManagement.code, 0, viaManagement.stderr);
    assert.equal(await third.stop(), 0);
    const down = await healthcheck({ SVC_NODE_LISTEN: `0.0.0.0:${third.nodePort}` });
    assert.equal(down.code, 1);
    assert.match(down.stderr, /unhealthy/);
  });
});

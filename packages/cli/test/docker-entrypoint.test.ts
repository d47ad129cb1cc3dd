import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CHILD_TIMEOUT_MS, cleanEnv, keygen, run, SVC_BIN, svcOk, tempDir } from './helpers.js';
import { bundledSha256, createSchemas, PG_URL } from './support/store-projects.js';

// The container's entrypoint and HEALTHCHECK, run as they are in the image but against a temp
// project and control directory (no container engine here). `svc` is the linked
// node_modules/.bin/svc, as the image links /usr/local/bin/svc to packages/cli/bin/svc.js.
const ENTRYPOINT = fileURLToPath(new URL('../../../docs/docker/entrypoint.sh', import.meta.url));
const HEALTHCHECK = fileURLToPath(new URL('../../../docs/docker/healthcheck.mjs', import.meta.url));
const POSTGRES_PROJECT = fileURLToPath(new URL('../../../docs/docker/project.postgres.edn', import.meta.url));

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
  const BIN = SVC_BIN;
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

describe('the container entrypoint with nodes on one PostgreSQL (compose.postgres.yaml)', () => {
  const tmp = tempDir('svc-entrypoint-pg-test-');
  const schemas = createSchemas();
  const BIN = SVC_BIN;
  const containers: Container[] = [];

  after(async () => {
    for (const c of containers) await c.stop();
    await schemas.dispose();
    tmp.cleanup();
  });

  test('the explicit init step prints the token once, and nodes started with SVC_AUTO_INIT=0 serve without issuing another', async () => {
    const template = readFileSync(POSTGRES_PROJECT, 'utf8');
    const pin = /"svc-store-postgres" \{:version "[^"]+"\s+:sha256 "([0-9a-f]{64})"\}/.exec(template);
    assert.equal(
      pin?.[1],
      bundledSha256('svc-store-postgres'),
      'project.postgres.edn pins the store archive this build bundles (npm run docs updates it)',
    );
    // The compose project, pointed at the test server: its URL, a fresh schema, a password file.
    const passwordFile = join(tmp.dir, 'pg_password');
    writeFileSync(passwordFile, 'unused-with-trust-auth\n', { mode: 0o600 });
    const edn = join(tmp.dir, 'project.edn');
    writeFileSync(
      edn,
      template
        .replace('"postgres://svc@postgres:5432/svc"', JSON.stringify(PG_URL))
        .replace('"svc_auth"', JSON.stringify(schemas.fresh()))
        .replace('file:/run/secrets/pg_password', `file:${passwordFile}`),
    );
    const project = join(tmp.dir, 'srv', 'project');
    const node = (name: string, extra: Record<string, string> = {}) =>
      cleanEnv({
        HOME: join(tmp.dir, 'home'),
        SVC_BIN: BIN,
        SVC_PROJECT_DIR: project,
        SVC_CONTROL_DIR: join(tmp.dir, `${name}-control`),
        SVC_MANAGEMENT_LISTEN: '127.0.0.1:0',
        SVC_NODE_LISTEN: '127.0.0.1:0',
        ...extra,
      });

    // `docker compose run --rm init`: the init service (project volume writable, SVC_PROJECT_EDN).
    const init = await run(ENTRYPOINT, ['init'], { env: node('node-a', { SVC_PROJECT_EDN: edn }) });
    assert.equal(init.code, 0, init.stderr);
    const tokens = init.stdout.match(TOKEN) ?? [];
    assert.equal(tokens.length, 1, `exactly one bootstrap token:\n${init.stdout}`);

    // `docker compose up`: both nodes, SVC_AUTO_INIT=0; node-b's control volume is still empty.
    for (const name of ['node-a', 'node-b']) {
      const c = await startContainer(node(name, { SVC_AUTO_INIT: '0' }));
      containers.push(c);
      assert.doesNotMatch(c.stdout(), /svcb_|bootstrap/, `${name}'s log:\n${c.stdout()}`);
      assert.equal((await healthcheck({ SVC_NODE_LISTEN: `0.0.0.0:${c.nodePort}` })).code, 0, `${name} is healthy`);
    }
    assert.equal(existsSync(join(tmp.dir, 'node-b-control', 'node-key.pem')), true, 'node-b made its own node key');
    // The token init printed is still the live one: no node issued a new one on start.
    const pub = await keygen(join(tmp.dir, 'admin.pem'));
    await svcOk(['auth', 'enroll', tokens[0] as string, pub, project, '--name', 'laptop'], { env: node('node-a') });
    for (const c of containers) assert.equal(await c.stop(), 0);
  });
});

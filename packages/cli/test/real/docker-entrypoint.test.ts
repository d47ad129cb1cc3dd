import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type NodeHealthFacts, nodeHealthVerdict } from '@svc/core';
import { bash, CHILD_TIMEOUT_MS, cleanEnv, keygen, run, SVC_BIN, svcOk, tempDir, withTimeout } from '../helpers.js';
import { REPO_ROOT } from '../repo.js';
import { bundledSha256, createSchemas, PG_URL } from '../support/store-projects.js';

// The container's entrypoint and HEALTHCHECK, run as they are in the image but against a temp
// project and control directory (no container engine here). `svc` is the linked
// node_modules/.bin/svc, as the image links /usr/local/bin/svc to packages/cli/bin/svc.js.
const ENTRYPOINT = join(REPO_ROOT, 'docs/docker/entrypoint.sh');
const HEALTHCHECK = join(REPO_ROOT, 'docs/docker/healthcheck.mjs');
const POSTGRES_PROJECT = join(REPO_ROOT, 'docs/docker/project.postgres.edn');
const DOCS = join(REPO_ROOT, 'docs/');

const NODE_READY = /svc node: node surface listening on (http:\/\/127\.0\.0\.1:(\d+))/;
const MANAGEMENT_READY = /svc auth: management API listening on (http:\/\/127\.0\.0\.1:(\d+))/;
const TOKEN = /svcb_[A-Za-z0-9_-]{43}/g;

interface Container {
  readonly child: ChildProcess;
  readonly nodePort: number;
  readonly managementPort: number;
  stdout(): string;
  stderr(): string;
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
        stderr: () => err,
        async stop() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          return withTimeout(exited, 'the entrypoint to exit after SIGTERM', CHILD_TIMEOUT_MS, () => child.kill('SIGKILL'));
        },
      });
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the entrypoint exited with ${code} before serving\nstdout: ${out}\nstderr: ${err}`));
    });
  });
}

/**
 * Enrolls `pub` with the bootstrap token read from `tokenFile` on standard input (`enroll -`),
 * as the entrypoint's hint says: the token is never in an argument or on the terminal.
 */
function enrollFromFile(tokenFile: string, pub: string, project: string, env: NodeJS.ProcessEnv) {
  return bash(`"$SVC" auth enroll - "$PUB" "$PROJECT" --name laptop < "$TOKEN_FILE"`, {
    env: { ...env, SVC: SVC_BIN, PUB: pub, PROJECT: project, TOKEN_FILE: tokenFile },
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

  test('container-log-token-leak: the first start initialises the project and serves, never prints the bootstrap token, and leaves it in a 0600 file of the control volume for `enroll -`', async () => {
    const first = await startContainer(env);
    containers.push(first);
    const log = first.stdout() + first.stderr();
    assert.doesNotMatch(log, /svcb_/, `no bootstrap token in the container log:\n${log}`);
    assert.doesNotMatch(log, /enroll <TOKEN>|enroll svcb_/, 'no hint of the positional token form');
    assert.match(first.stdout(), /svc auth enroll - <PUBHEX>/, 'the hint shows the standard-input form');
    const tokenFile = join(control, 'bootstrap-token');
    assert.match(first.stdout(), new RegExp(`bootstrap token .*${tokenFile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    assert.equal(statSync(tokenFile).mode & 0o777, 0o600, 'the token file is owner-only');
    const tokens = readFileSync(tokenFile, 'utf8').match(TOKEN) ?? [];
    assert.equal(tokens.length, 1, 'the token file holds the one token');
    token = tokens[0] as string;
    // umask 077 and the owner-only control directory, on a volume that started empty.
    assert.equal(statSync(control).mode & 0o777, 0o700);
    assert.equal(statSync(join(control, 'control.db')).mode & 0o777, 0o600);
    assert.equal(statSync(join(control, 'node-key.pem')).mode & 0o777, 0o600);
    assert.equal(statSync(join(project, 'project.edn')).mode & 0o077, 0, 'project.edn is owner-only (umask 077)');
    // The token in the file is the live one: the first admin enrolls with it, from standard input, while the node serves.
    const pub = await keygen(join(tmp.dir, 'admin.pem'), { env });
    const enrolled = await enrollFromFile(tokenFile, pub, project, env);
    assert.equal(enrolled.code, 0, enrolled.stderr);
    assert.equal((await healthcheck({ SVC_NODE_LISTEN: `0.0.0.0:${first.nodePort}` })).code, 0);
    assert.equal(await first.stop(), 0, 'svc serve (exec-ed by the entrypoint) stops cleanly on SIGTERM');
  });

  test('a container restart prints no bootstrap token again and keeps the enrolled device', async () => {
    assert.notEqual(token, '', 'the first start ran');
    const second = await startContainer(env);
    containers.push(second);
    assert.doesNotMatch(second.stdout() + second.stderr(), /svcb_|bootstrap/, `the restart's log:\n${second.stdout()}`);
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

  test('container-log-token-leak on the explicit init step: it prints no token but writes it to a 0600 file, and nodes started with SVC_AUTO_INIT=0 serve without issuing another', async () => {
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
        // The test server trusts local connections (the compose one does not): accepted here only.
        .replace(':store/pool-size 10', ':store/pool-size 10 :store/allow-unauthenticated true')
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
    assert.doesNotMatch(init.stdout + init.stderr, /svcb_/, `no bootstrap token in the init log:\n${init.stdout}`);
    const tokenFile = join(tmp.dir, 'node-a-control', 'bootstrap-token');
    assert.equal(statSync(tokenFile).mode & 0o777, 0o600);
    const tokens = readFileSync(tokenFile, 'utf8').match(TOKEN) ?? [];
    assert.equal(tokens.length, 1, "the token file on node-a's control volume holds the one token");

    // `docker compose up`: both nodes, SVC_AUTO_INIT=0; node-b's control volume is still empty.
    for (const name of ['node-a', 'node-b']) {
      const c = await startContainer(node(name, { SVC_AUTO_INIT: '0' }));
      containers.push(c);
      assert.doesNotMatch(c.stdout() + c.stderr(), /svcb_|bootstrap/, `${name}'s log:\n${c.stdout()}`);
      assert.equal((await healthcheck({ SVC_NODE_LISTEN: `0.0.0.0:${c.nodePort}` })).code, 0, `${name} is healthy`);
    }
    assert.equal(existsSync(join(tmp.dir, 'node-b-control', 'node-key.pem')), true, 'node-b made its own node key');
    // The token init wrote is still the live one: no node issued a new one on start.
    const pub = await keygen(join(tmp.dir, 'admin.pem'));
    const enrolled = await enrollFromFile(tokenFile, pub, project, node('node-a'));
    assert.equal(enrolled.code, 0, enrolled.stderr);
    for (const c of containers) assert.equal(await c.stop(), 0);
  });
});

describe('the container files', () => {
  test('container-log-token-leak in the docs: no compose file, Dockerfile, entrypoint or deployment guide shows a token in an argument or sends the operator to the log for it', () => {
    const files = ['docker/Dockerfile', 'docker/compose.yaml', 'docker/compose.postgres.yaml', 'docker/entrypoint.sh', 'deployment.md'];
    for (const f of files) {
      const text = readFileSync(join(DOCS, f), 'utf8');
      assert.doesNotMatch(text, /enroll <TOKEN>|enroll svcb_|enroll \$\{?TOKEN/, `${f} shows the positional token form`);
      assert.doesNotMatch(text, /\blogs \S+ *#[^\n]*token|bootstrap token svcb_/i, `${f} sends the operator to the log for the token`);
    }
  });
});

describe("the HEALTHCHECK applies core's nodeHealthVerdict to node health (a real /readyz: audit-shipping.test.ts, readiness-rule.test.ts)", () => {
  // A stand-in for the node surface's health route, answering what a real node answers in each
  // case; the verdict is compared with core's rule, which /readyz applies.
  let answer: { status: number; body: string } = { status: 200, body: '{}' };
  let server: Server;
  let listen = '';
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  before(async () => {
    server = createServer((req, res) => {
      if (req.url !== '/edge/0-alpha/health') {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    listen = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  const health = (over: Record<string, unknown>) =>
    JSON.stringify({
      status: 'degraded',
      node_id: 'X',
      checked_at: '2026-11-27T10:00:00.000Z',
      store: { status: 'ok' },
      providers: [
        { name: 'ed25519', kind: 'device-key', status: 'ok' },
        { name: 'corp-sso', kind: 'oidc', status: 'ok' },
      ],
      ...over,
    });
  const check = (status: number, body: string) => {
    answer = { status, body };
    return healthcheck({ SVC_NODE_LISTEN: listen });
  };

  test('idp-outage-unhealthy-container: a provider whose IdP is down (store and shipping ok) leaves the container healthy, as /readyz stays 200, and says which provider', async () => {
    const r = await check(
      503,
      health({
        providers: [
          { name: 'ed25519', kind: 'device-key', status: 'ok' },
          { name: 'corp-sso', kind: 'oidc', status: 'failed' },
        ],
      }),
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout + r.stderr, /corp-sso/);
  });

  test("the node's own faults are unhealthy: the store, audit shipping, the built-in key provider, an unreadable answer", async () => {
    assert.equal((await check(503, 'not json')).code, 1);
    assert.equal((await check(500, health({ status: 'ok' }))).code, 1);
    assert.equal((await check(200, health({ status: 'ok' }))).code, 0);
    const failed = { status: 'failed' } as const;
    const cases: Record<string, unknown>[] = [
      { store: { status: 'failed', reason: 'disk_full' } },
      { audit_shipping: { status: 'failed', code: 'audit_ship_stalled' } },
      { audit_shipping: { status: 'ok' }, providers: [{ name: 'corp-sso', kind: 'oidc', ...failed }] },
      { providers: [{ name: 'ed25519', kind: 'device-key', ...failed }] },
      {
        providers: [
          { name: 'ed25519', kind: 'device-key', ...failed },
          { name: 'corp-sso', kind: 'oidc', ...failed },
        ],
      },
      { store: failed, providers: [{ name: 'corp-sso', kind: 'oidc', ...failed }] },
    ];
    for (const over of cases) {
      const body = health(over);
      const verdict = nodeHealthVerdict(JSON.parse(body) as NodeHealthFacts);
      const r = await check(503, body);
      assert.equal(
        r.code,
        verdict.healthy ? 0 : 1,
        `${body}: the rule says ${JSON.stringify(verdict)}; the HEALTHCHECK: ${r.stderr}${r.stdout}`,
      );
    }
  });
});

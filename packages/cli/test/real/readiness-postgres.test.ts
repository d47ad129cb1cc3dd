import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanEnv, enrolledProject, problemCode, run, type StartedProcess, startUntilReady, tempDir } from '../helpers.js';
import { REPO_ROOT } from '../repo.js';
import { createSchemas, PG_URL, writePostgresProject } from '../support/store-projects.js';

const METRICS = /svc: metrics listening on (http:\/\/\S+)\/metrics/;
const HEALTHCHECK = join(REPO_ROOT, 'docs/docker/healthcheck.mjs');

/** The container image's HEALTHCHECK (`node healthcheck.mjs`) with the metrics listener set as a container would set it. */
function healthcheck(metricsUrl: string) {
  return run(process.execPath, [HEALTHCHECK], { env: cleanEnv({ SVC_METRICS_LISTEN: `127.0.0.1:${new URL(metricsUrl).port}` }) });
}

/** The same HEALTHCHECK without the metrics listener: it asks the node surface's health at `nodeUrl` and applies the rule. */
function nodeHealthcheck(nodeUrl: string) {
  return run(process.execPath, [HEALTHCHECK], { env: cleanEnv({ SVC_NODE_LISTEN: new URL(nodeUrl).host }) });
}

/**
 * A TCP path to the test PostgreSQL that the test can cut and restore, as a network partition
 * between the node and its database would: cutting closes every connection and refuses new ones.
 */
async function cuttablePath(
  target: URL,
): Promise<{ port: number; cut(): Promise<void>; restore(): Promise<void>; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let server: Server;
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server = createServer((client) => {
        const upstream = connect(Number(target.port || 5432), target.hostname);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => undefined);
        }
        client.pipe(upstream).pipe(client);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
    });
  const port = await listen(0);
  const cut = async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const s of sockets) s.destroy();
    });
  };
  return {
    port,
    cut,
    async restore() {
      await listen(port);
    },
    close: cut,
  };
}

async function readyz(url: string): Promise<{ status: number; code: string | undefined }> {
  const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(15_000) });
  if (res.status === 200) {
    assert.deepEqual(await res.json(), { status: 'ready' });
    return { status: 200, code: undefined };
  }
  assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
  return { status: res.status, code: await problemCode(res) };
}

describe('readiness follows the PostgreSQL control store', () => {
  const tmp = tempDir('svc-readiness-pg-');
  const env = cleanEnv({ HOME: tmp.dir });
  const schemas = createSchemas();
  let path: Awaited<ReturnType<typeof cuttablePath>>;
  let server: StartedProcess<string>;

  before(async () => {
    const target = new URL(PG_URL);
    path = await cuttablePath(target);
    await writePostgresProject(tmp.dir, { schema: schemas.fresh(), env });
    const p = await enrolledProject(tmp.dir, { env });
    const file = join(p.dir, 'project.edn');
    const viaPath = new URL(PG_URL);
    viaPath.hostname = '127.0.0.1';
    viaPath.port = String(path.port);
    writeFileSync(file, readFileSync(file, 'utf8').replace(JSON.stringify(PG_URL), JSON.stringify(viaPath.toString())));
    server = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--metrics-listen', '127.0.0.1:0', p.dir],
      (out) => METRICS.exec(out)?.[1] ?? null,
      { env },
    );
  });
  after(async () => {
    await server?.stop('SIGKILL');
    await path?.close().catch(() => undefined);
    try {
      await schemas.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  test('a PostgreSQL cut off from the node makes /readyz answer 503 store_unavailable while /livez stays 200, and ready again once it is back', async () => {
    const node = /svc node: node surface listening on (http:\/\/\S+)/.exec(server.stdout())?.[1];
    assert.ok(node !== undefined, 'the node surface listens');
    assert.deepEqual(await readyz(server.ready), { status: 200, code: undefined });
    assert.equal((await healthcheck(server.ready)).code, 0);
    assert.equal((await nodeHealthcheck(node)).code, 0, 'the HEALTHCHECK through node health agrees with /readyz: healthy');
    await path.cut();
    assert.deepEqual(await readyz(server.ready), { status: 503, code: 'store_unavailable' });
    const unhealthy = await healthcheck(server.ready);
    assert.equal(unhealthy.code, 1);
    assert.match(unhealthy.stderr, /unhealthy: http:\/\/127\.0\.0\.1:\d+\/readyz answered 503/);
    const viaNode = await nodeHealthcheck(node);
    assert.equal(viaNode.code, 1, 'the HEALTHCHECK through node health agrees with /readyz: unhealthy');
    assert.match(viaNode.stderr, /answered 503 \(store failed\)/, 'for the same reason: the store');
    const live = await fetch(`${server.ready}/livez`);
    assert.equal(live.status, 200);
    await path.restore();
    let again = await readyz(server.ready);
    // The pool drops the connections the cut broke; the next ping opens a fresh one.
    for (let i = 0; i < 5 && again.status !== 200; i++) again = await readyz(server.ready);
    assert.deepEqual(again, { status: 200, code: undefined });
    assert.equal(server.child.exitCode, null, 'the node kept running');
  });
});

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createDpopProof, createManagementClient, loadDeviceKey, login } from '@svc/client';
import { cleanEnv, enrolledProject, type StartedProcess, startUntilReady, svc, tempDir } from '../helpers.js';

const MANAGEMENT = /svc auth: management API listening on (http:\/\/\S+)/;
const NODE = /svc node: node surface listening on (http:\/\/\S+)/;
const METRICS = /svc: metrics listening on (http:\/\/\S+)\/metrics/;

/** One scrape: every sample of the exposition, keyed `name{label="value",...}` as Prometheus prints it. */
type Samples = Map<string, number>;

/** Scrapes `/metrics` as Prometheus does and parses the text exposition format. */
async function scrape(metricsUrl: string): Promise<{ samples: Samples; text: string }> {
  const res = await fetch(`${metricsUrl}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const samples: Samples = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) (\S+)$/.exec(line);
    assert.ok(m !== null, `not an exposition line: ${line}`);
    samples.set(m[1] as string, Number(m[2]));
  }
  return { samples, text };
}

/** A sample's value (0 when the series does not exist yet), labels written in registration order. */
function value(samples: Samples, name: string, labels: Record<string, string> = {}): number {
  const body = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(',');
  return samples.get(body === '' ? name : `${name}{${body}}`) ?? 0;
}

function delta(before: Samples, after: Samples, name: string, labels: Record<string, string> = {}): number {
  return value(after, name, labels) - value(before, name, labels);
}

function sum(samples: Samples, name: string): number {
  let total = 0;
  for (const [key, v] of samples) if (key === name || key.startsWith(`${name}{`)) total += v;
  return total;
}

/** A GET with node:http, whose `Host` header fetch would not let a test forge. */
function getWithHost(url: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, headers: { host }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

interface Urls {
  readonly management: string;
  readonly node: string;
  readonly metrics: string;
}

function startServe(args: readonly string[], env: NodeJS.ProcessEnv): Promise<StartedProcess<Urls>> {
  return startUntilReady(
    args,
    (out) => {
      const m = MANAGEMENT.exec(out);
      const n = NODE.exec(out);
      const x = METRICS.exec(out);
      return m === null || n === null || x === null ? null : { management: m[1] as string, node: n[1] as string, metrics: x[1] as string };
    },
    { env },
  );
}

describe('Prometheus metrics and probes of a real svc serve, scraped over HTTP', () => {
  const tmp = tempDir('svc-metrics-test-');
  const env = cleanEnv({ HOME: join(tmp.dir, 'home') });
  let server: StartedProcess<Urls>;
  let project: Awaited<ReturnType<typeof enrolledProject>>;

  before(async () => {
    project = await enrolledProject(tmp.dir, { env });
    server = await startServe(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--metrics-listen', '127.0.0.1:0', project.dir],
      env,
    );
  });
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('the counters move by exactly what real sign-ins, failures, rotations, reuses and revocations did', async () => {
    const client = createManagementClient({ baseUrl: server.ready.management });
    const key = loadDeviceKey(project.keyFile);
    const before = (await scrape(server.ready.metrics)).samples;

    // Two sign-ins.
    const a = await login(client, key);
    const b = await login(client, key);
    // One refused sign-in: a signature over the wrong bytes.
    const challenge = await client.createChallenge(key.publicKeyHex);
    const refused = await fetch(`${server.ready.management}/v1/auth/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ challenge_id: challenge.challenge_id, signature: key.sign('not the challenge') }),
    });
    assert.equal(refused.status, 401);
    assert.equal(((await refused.json()) as { code: string }).code, 'invalid_signature');
    // a: one rotation, then its first refresh token again within the grace interval (each with a
    // DPoP proof by the key: the sessions are bound to it by default).
    const a1 = await client.refresh(a.refresh_token, key);
    await client.refresh(a.refresh_token, key);
    // b: two rotations, then its first refresh token (retired, not the previous one): a reuse, which revokes b.
    const b1 = await client.refresh(b.refresh_token, key);
    await client.refresh(b1.refresh_token, key);
    const refreshUrl = `${server.ready.management}/v1/auth/refresh`;
    const reused = await fetch(refreshUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', dpop: createDpopProof(key, { htm: 'POST', htu: refreshUrl }) },
      body: JSON.stringify({ refresh_token: b.refresh_token }),
    });
    assert.equal(((await reused.json()) as { code: string }).code, 'refresh_token_reused');
    // a logs out.
    await client.revoke(a1.access_token);

    const { samples: after, text } = await scrape(server.ready.metrics);
    assert.equal(delta(before, after, 'svc_signins_total', { realm: 'management' }), 2);
    assert.equal(delta(before, after, 'svc_signin_failures_total', { realm: 'management', reason: 'bad_signature' }), 1, text);
    assert.equal(delta(before, after, 'svc_http_failures_total', { surface: 'management', code: 'invalid_signature' }), 1);
    assert.equal(delta(before, after, 'svc_http_failures_total', { surface: 'management', code: 'refresh_token_reused' }), 1);
    assert.equal(delta(before, after, 'svc_refresh_rotations_total', { realm: 'management' }), 3);
    assert.equal(delta(before, after, 'svc_refresh_grace_rotations_total', { realm: 'management' }), 1);
    assert.equal(delta(before, after, 'svc_refresh_reuses_total', { realm: 'management' }), 1);
    assert.equal(delta(before, after, 'svc_session_revocations_total', { realm: 'management', reason: 'refresh_token_reused' }), 1);
    assert.equal(delta(before, after, 'svc_session_revocations_total', { realm: 'management', reason: 'logout' }), 1);
    const sessions = { surface: 'management', method: 'POST', route: '/v1/auth/sessions' };
    assert.equal(delta(before, after, 'svc_http_requests_total', { ...sessions, status: '201' }), 2);
    assert.equal(delta(before, after, 'svc_http_requests_total', { ...sessions, status: '401' }), 1);
    assert.equal(delta(before, after, 'svc_http_request_duration_seconds_count', { ...sessions, status: '201' }), 2);
    assert.equal(
      delta(before, after, 'svc_http_requests_total', { surface: 'management', method: 'POST', route: '/v1/auth/refresh', status: '200' }),
      4,
    );
    assert.equal(delta(before, after, 'svc_store_operation_duration_seconds_count', { operation: 'createSession', outcome: 'ok' }), 2);
    assert.equal(delta(before, after, 'svc_store_operation_duration_seconds_count', { operation: 'rotateRefreshToken', outcome: 'ok' }), 5);
    // The chain grew by exactly the events this process counted, and the gauge is the chain's length.
    assert.equal(
      value(after, 'svc_audit_chain_length') - value(before, 'svc_audit_chain_length'),
      sum(after, 'svc_audit_events_total') - sum(before, 'svc_audit_events_total'),
    );
    const audit = await client.audit((await login(client, key)).access_token, {
      after: value(after, 'svc_audit_chain_length') - 1,
      limit: 10,
    });
    assert.equal(audit.events[0]?.seq, value(after, 'svc_audit_chain_length'));
    // Process metrics come along.
    assert.ok(value(after, 'process_cpu_user_seconds_total') > 0);
    assert.ok(value(after, 'nodejs_heap_size_total_bytes') > 0);
    // No per-user label: neither the subject, the device nor any session id appears in the exposition.
    for (const secretish of [project.deviceId, project.publicKey, a.session_id, b.session_id])
      assert.ok(!text.includes(secretish), secretish);
  });

  test('requests to many distinct ids add no metric series: routes are labelled by their pattern', async () => {
    const client = createManagementClient({ baseUrl: server.ready.management });
    const access = (await login(client, loadDeviceKey(project.keyFile))).access_token;
    const before = await scrape(server.ready.metrics);
    const ids = Array.from({ length: 20 }, (_, i) => `dev_${'x'.repeat(20)}${i}`);
    for (const id of ids) {
      const res = await fetch(`${server.ready.management}/v1/auth/devices/${id}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${access}` },
      });
      await res.arrayBuffer();
      const stray = await fetch(`${server.ready.node}/no/such/${id}`);
      await stray.arrayBuffer();
    }
    const after = await scrape(server.ready.metrics);
    for (const id of ids) assert.ok(!after.text.includes(id), `the raw id ${id} became a label`);
    const deletes = [...after.samples].filter(([k]) => k.startsWith('svc_http_requests_total{surface="management",method="DELETE"'));
    assert.equal(deletes.length, 1, deletes.map(([k]) => k).join('\n'));
    assert.match(deletes[0]?.[0] as string, /route="\/v1\/auth\/devices\/:id"/);
    const delStatus = /status="(\d+)"/.exec(deletes[0]?.[0] as string)?.[1] as string;
    assert.equal(
      delta(before.samples, after.samples, 'svc_http_requests_total', {
        surface: 'management',
        method: 'DELETE',
        route: '/v1/auth/devices/:id',
        status: delStatus,
      }),
      20,
    );
    assert.equal(
      delta(before.samples, after.samples, 'svc_http_requests_total', {
        surface: 'node',
        method: 'GET',
        route: '(unmatched)',
        status: '404',
      }),
      20,
    );
  });

  test('bearer checks are counted as bearer-cache hits and misses', async () => {
    const client = createManagementClient({ baseUrl: server.ready.management });
    const access = (await login(client, loadDeviceKey(project.keyFile))).access_token;
    const before = (await scrape(server.ready.metrics)).samples;
    for (let i = 0; i < 3; i++) await client.me(access);
    const after = (await scrape(server.ready.metrics)).samples;
    const hits = delta(before, after, 'svc_bearer_cache_lookups_total', { result: 'hit' });
    const misses = delta(before, after, 'svc_bearer_cache_lookups_total', { result: 'miss' });
    assert.equal(hits + misses, 3);
    assert.ok(hits >= 2, `hits ${hits}, misses ${misses}`);
  });

  test('liveness and readiness answer 200 as a Kubernetes probe reads them', async () => {
    const live = await fetch(`${server.ready.metrics}/livez`);
    assert.equal(live.status, 200);
    assert.deepEqual(await live.json(), { status: 'live' });
    const ready = await fetch(`${server.ready.metrics}/readyz`);
    assert.equal(ready.status, 200);
    assert.deepEqual(await ready.json(), { status: 'ready' });
  });

  test('a DNS-rebinding page cannot read the loopback metrics listener: a foreign Host is refused with forbidden_host', async () => {
    for (const path of ['/metrics', '/readyz']) {
      const rebound = await getWithHost(`${server.ready.metrics}${path}`, 'attacker.example:9464');
      assert.equal(rebound.status, 403, path);
      assert.equal((JSON.parse(rebound.body) as { code: string }).code, 'forbidden_host', path);
      assert.doesNotMatch(rebound.body, /svc_/);
    }
    assert.equal((await getWithHost(`${server.ready.metrics}/metrics`, `localhost:${new URL(server.ready.metrics).port}`)).status, 200);
  });

  test('a burst of bad refresh tokens is refused with 429 and every refusal is counted', async () => {
    const before = (await scrape(server.ready.metrics)).samples;
    let refusals = 0;
    for (let i = 0; i < 45; i++) {
      const res = await fetch(`${server.ready.management}/v1/auth/refresh`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ refresh_token: `svc_rt_${'A'.repeat(40)}` }),
      });
      const code = ((await res.json()) as { code: string }).code;
      if (code === 'rate_limited') refusals++;
    }
    assert.ok(refusals > 0, 'the failure limit never refused');
    const after = (await scrape(server.ready.metrics)).samples;
    assert.equal(delta(before, after, 'svc_rate_limit_refusals_total', { surface: 'management', route: '/v1/auth/refresh' }), refusals);
    assert.equal(delta(before, after, 'svc_http_failures_total', { surface: 'management', code: 'rate_limited' }), refusals);
  });
});

describe('where the metrics listener listens', () => {
  const tmp = tempDir('svc-metrics-listen-test-');
  const env = cleanEnv({ HOME: join(tmp.dir, 'home') });
  let dir: string;

  before(async () => {
    dir = (await enrolledProject(tmp.dir, { env })).dir;
  });
  after(() => tmp.cleanup());

  test('the metrics listener is off by default', async () => {
    const started = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', dir],
      (out) => (MANAGEMENT.exec(out) !== null && NODE.exec(out) !== null ? true : null),
      { env },
    );
    try {
      // Both ready lines are out, so every surface has started: none of them is the metrics listener.
      assert.doesNotMatch(started.stdout(), /metrics/);
      assert.doesNotMatch(started.stderr(), /"surface":"metrics"/);
    } finally {
      await started.stop('SIGKILL');
    }
  });

  test('a network metrics address from --metrics-listen or SVC_METRICS_LISTEN is refused before anything binds', async () => {
    const flag = await svc(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--metrics-listen', '0.0.0.0:0', dir],
      {
        env,
      },
    );
    assert.equal(flag.code, 2);
    assert.match(
      flag.stderr,
      /--metrics-listen "0\.0\.0\.0:0" is refused: the metrics listener binds a loopback address unless :svc\/metrics-listen/,
    );
    assert.doesNotMatch(flag.stdout, /listening/);
    const fromEnv = await svc(['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', dir], {
      env: { ...env, SVC_METRICS_LISTEN: '[::]:0' },
    });
    assert.equal(fromEnv.code, 1);
    assert.match(fromEnv.stderr, /SVC_METRICS_LISTEN "\[::\]:0" is refused/);
    assert.doesNotMatch(fromEnv.stdout, /listening/);
  });

  test('a network metrics address configured in project.edn binds it, with a warning, and is scraped', async () => {
    const file = join(dir, 'project.edn');
    const original = await readFile(file, 'utf8');
    writeFileSync(file, original.replace(/^\{/, '{:svc/metrics-listen "0.0.0.0:0"\n '));
    try {
      const started = await startServe(['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', dir], env);
      try {
        assert.match(started.ready.metrics, /^http:\/\/0\.0\.0\.0:\d+$/);
        assert.match(started.stderr(), /"event":"metrics_exposed"/);
        const port = new URL(started.ready.metrics).port;
        const res = await fetch(`http://127.0.0.1:${port}/metrics`);
        assert.equal(res.status, 200);
        assert.match(await res.text(), /^# HELP svc_http_requests_total /m);
      } finally {
        await started.stop('SIGKILL');
      }
    } finally {
      writeFileSync(file, original);
    }
  });
});

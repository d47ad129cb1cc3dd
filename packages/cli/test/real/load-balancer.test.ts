import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type PrivatePostgres, startPrivatePostgres } from '../../../store-postgres/test/private-postgres.js';
import { cleanEnv, enrolledProject, freePort, keygen, type StartedProcess, svcOk, tempDir, waitUntil } from '../helpers.js';
import { pairComplete, type ServedUrls, serveAll, signWith } from '../support/serve-all.js';
import { writePostgresProject } from '../support/store-projects.js';

const HAPROXY = ['/usr/sbin/haproxy', '/usr/bin/haproxy'].find((p) => existsSync(p));

/**
 * The HAProxy configuration of docs/deployment.md ("A cluster"): round robin over the two nodes'
 * application gateways, each taken out when its node health (`GET /edge/0-alpha/health` on the
 * node surface) is not 200 twice in a row and put back after two 200s; a request whose node
 * refused the connection is sent to the other (`retries`, `option redispatch`). The check names
 * a loopback `Host`: the node surface refuses a request on a loopback address without one
 * (`403 forbidden_host`, its DNS-rebinding guard), and HAProxy sends none by default.
 */
export function haproxyConfig(opts: {
  listen: number;
  stats: number;
  nodes: readonly { name: string; app: string; node: string }[];
}): string {
  const servers = opts.nodes.map((n) => {
    const app = new URL(n.app);
    const node = new URL(n.node);
    return `  server ${n.name} ${app.hostname}:${app.port} check port ${node.port}`;
  });
  return `global
  maxconn 512

defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  retries 2
  option redispatch

frontend svc
  bind 127.0.0.1:${opts.listen}
  default_backend nodes

backend nodes
  balance roundrobin
  option httpchk
  http-check send meth GET uri /edge/0-alpha/health ver HTTP/1.1 hdr Host localhost
  http-check expect status 200
  default-server inter 500ms fall 2 rise 2
${servers.join('\n')}

frontend stats
  bind 127.0.0.1:${opts.stats}
  stats enable
  stats uri /stats
`;
}

/** The balancer's view of each server: `{a: 'UP', b: 'DOWN', ...}` from its CSV statistics. */
async function serverStates(statsPort: number): Promise<Record<string, string>> {
  const csv = await (await fetch(`http://127.0.0.1:${statsPort}/stats;csv`, { signal: AbortSignal.timeout(5_000) })).text();
  const states: Record<string, string> = {};
  for (const line of csv.split('\n')) {
    const [proxy, name, ...rest] = line.split(',');
    if (proxy === 'nodes' && name !== undefined && name !== 'BACKEND' && name !== 'FRONTEND')
      states[name] = (rest[15] ?? '').split(' ')[0] ?? '';
  }
  return states;
}

/** An application-realm sign-in through `base` (the balancer or one gateway): the access token, or the failing status. */
async function appSignIn(base: string, keyFile: string, publicKey: string): Promise<{ status: number; token?: string; session?: string }> {
  const post = (path: string, body: unknown) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const chl = await post('/.svc/auth/v1/challenges', { public_key: publicKey });
  if (chl.status !== 201) {
    await chl.body?.cancel();
    return { status: chl.status };
  }
  const { challenge_id, challenge } = (await chl.json()) as { challenge_id: string; challenge: string };
  const ses = await post('/.svc/auth/v1/sessions', { challenge_id, signature: signWith(keyFile, challenge) });
  if (ses.status !== 201) {
    await ses.body?.cancel();
    return { status: ses.status };
  }
  const pair = (await ses.json()) as { access_token: string; session_id: string };
  return { status: 201, token: pair.access_token, session: pair.session_id };
}

function appMe(base: string, token: string): Promise<Response> {
  return fetch(`${base}/.svc/auth/v1/me`, { headers: { authorization: `Bearer ${token}` } });
}

describe('two svc serve nodes behind HAProxy, on one PostgreSQL (started by this file)', {
  skip:
    HAPROXY !== undefined || process.env.CI
      ? false
      : 'HAProxy is not installed (Debian package haproxy; .ci/run installs it, and under CI a missing one fails instead of skipping)',
}, () => {
  const tmp = tempDir('svc-balancer-');
  const adminEnv = cleanEnv({ HOME: join(tmp.dir, 'admin'), SVC_CREDENTIALS: join(tmp.dir, 'admin', 'creds.json') });
  const deviceEnv = cleanEnv({ HOME: join(tmp.dir, 'device'), SVC_CREDENTIALS: join(tmp.dir, 'device', 'creds.json') });
  let pg: PrivatePostgres;
  const nodes: StartedProcess<ServedUrls>[] = [];
  let haproxy: ChildProcess | undefined;
  let haproxyErr = '';
  let lb = '';
  let statsPort = 0;
  const device = { keyFile: join(tmp.dir, 'device', 'app.pem'), publicKey: '' };

  before(async () => {
    assert.ok(HAPROXY !== undefined, 'HAProxy is installed (Debian package haproxy; .ci/run installs it)');
    mkdirSync(join(tmp.dir, 'admin'), { recursive: true });
    mkdirSync(join(tmp.dir, 'device'), { recursive: true });
    pg = await startPrivatePostgres();
    await writePostgresProject(tmp.dir, { schema: 'svc_balanced', env: adminEnv, url: pg.url });
    const p = await enrolledProject(tmp.dir, { env: adminEnv });
    for (let i = 0; i < 2; i++) nodes.push(await serveAll(p.dir, adminEnv));
    const [a] = nodes as [StartedProcess<ServedUrls>];
    // An application device, paired as docs/pairing.md shows, to sign in through the gateways.
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', a.ready.management], { env: adminEnv });
    device.publicKey = await keygen(device.keyFile, { env: deviceEnv });
    const prepared = JSON.parse(
      (
        await svcOk(['auth', 'pair', '--node-url', a.ready.node, '--realm', 'application', '--device-key', device.publicKey, '--json'], {
          env: adminEnv,
        })
      ).stdout,
    ) as { intent_id: string; code: string };
    const nodeId = ((await (await fetch(`${a.ready.node}/.well-known/edge`)).json()) as { node_id: string }).node_id;
    await pairComplete({ nodeUrl: a.ready.node, nodeId, prepared, keyFile: device.keyFile, env: deviceEnv });

    const listen = await freePort();
    statsPort = await freePort();
    const cfg = join(tmp.dir, 'haproxy.cfg');
    writeFileSync(
      cfg,
      haproxyConfig({
        listen,
        stats: statsPort,
        nodes: nodes.map((n, i) => ({ name: i === 0 ? 'a' : 'b', app: n.ready.app, node: n.ready.node })),
      }),
    );
    // -db: in the foreground, logging to stderr; the test owns its life.
    haproxy = spawn(HAPROXY as string, ['-f', cfg, '-db'], { stdio: ['ignore', 'ignore', 'pipe'] });
    haproxy.stderr?.setEncoding('utf8').on('data', (d: string) => {
      haproxyErr += d;
    });
    lb = `http://127.0.0.1:${listen}`;
    let lastStates = '';
    await waitUntil(
      'HAProxy to see both nodes UP through their health checks',
      async () => {
        if (haproxy?.exitCode !== null) throw new Error(`haproxy exited: ${haproxyErr}`);
        const s = await serverStates(statsPort).catch(() => ({}) as Record<string, string>);
        lastStates = JSON.stringify(s);
        return s.a === 'UP' && s.b === 'UP';
      },
      { ms: 30_000, everyMs: 100 },
    ).catch((err: Error) => {
      throw new Error(`${err.message}; HAProxy saw ${lastStates}; its log: ${haproxyErr.slice(-2000)}`);
    });
  });
  after(async () => {
    haproxy?.kill('SIGKILL');
    for (const n of nodes) await n.stop('SIGKILL');
    try {
      await pg?.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  test('a revocation made through either node is refused on both at the next request', async () => {
    const [a, b] = nodes as [StartedProcess<ServedUrls>, StartedProcess<ServedUrls>];
    for (const [via, other] of [
      [a, b],
      [b, a],
    ] as const) {
      const s = await appSignIn(lb, device.keyFile, device.publicKey);
      assert.equal(s.status, 201, 'signed in through the balancer');
      const token = s.token as string;
      for (const n of [a, b]) assert.equal((await appMe(n.ready.app, token)).status, 200, 'the session works on both nodes');
      const out = await fetch(`${via.ready.app}/.svc/auth/v1/revoke`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: '{}',
      });
      assert.equal(out.status, 200);
      await out.body?.cancel();
      for (const n of [other, via, other]) {
        const r = await appMe(n.ready.app, token);
        assert.equal(r.status, 401, 'the revoked token is refused at once on every node');
        assert.equal(((await r.json()) as { code: string }).code, 'invalid_token');
      }
    }
  });

  test('node B killed (SIGKILL) under load: node A keeps serving through the balancer, with a bounded number of failed requests', async (t) => {
    const [a, b] = nodes as [StartedProcess<ServedUrls>, StartedProcess<ServedUrls>];
    const failures = new Map<string, number>();
    let ok = 0;
    let requests = 0;
    let running = true;
    const client = async () => {
      while (running) {
        requests++;
        try {
          const s = await appSignIn(lb, device.keyFile, device.publicKey);
          if (s.status !== 201) {
            failures.set(`sign-in ${s.status}`, (failures.get(`sign-in ${s.status}`) ?? 0) + 1);
            continue;
          }
          const r = await appMe(lb, s.token as string);
          await r.body?.cancel();
          if (r.status === 200) ok++;
          else failures.set(`me ${r.status}`, (failures.get(`me ${r.status}`) ?? 0) + 1);
        } catch (err) {
          const key = `network ${String((err as Error).cause ?? err)}`;
          failures.set(key, (failures.get(key) ?? 0) + 1);
        }
      }
    };
    const clients = Array.from({ length: 8 }, client);
    let okAtKill = 0;
    try {
      await waitUntil('50 sign-ins through the balancer with both nodes up', () => ok >= 50, { ms: 120_000 });
      await b.stop('SIGKILL');
      okAtKill = ok;
      await waitUntil('HAProxy to take node B out (its health check fails)', async () => (await serverStates(statsPort)).b === 'DOWN', {
        ms: 15_000,
        everyMs: 100,
      });
      const out = ok;
      await waitUntil('60 more sign-ins through the balancer, served by node A alone', () => ok >= out + 60, { ms: 120_000 });
    } finally {
      running = false;
      await Promise.all(clients);
    }
    const failed = [...failures.values()].reduce((x, y) => x + y, 0);
    t.diagnostic(
      `balancer figures: ${JSON.stringify({ requests, ok, ok_before_kill: okAtKill, failed, failures: Object.fromEntries(failures) })}`,
    );
    assert.equal(a.child.exitCode, null, 'node A kept running');
    // The failures are requests that died with B: the ones in flight on B, and any that HAProxy
    // sent over an idle connection to B it had not yet seen closed (its default `http-reuse
    // safe` gives a client connection's later requests to idle server connections). When a
    // server closes without answering a request that was not the first on its client
    // connection, HAProxy closes that client connection without an answer and without a log
    // line, as if the keep-alive connection had been closed, and leaves the retry to the client
    // (its keep-alive rule in http_ana.c). With HAProxy's request log turned on in a scratch
    // copy of this test, three runs had 3, 6 and 5 failures and none of them in the log; one CI
    // run had 9 for 8 client loops. Each loop has one request at a time; the test allows two per
    // loop (16), which HAProxy does not promise but no run has come near. Retrying them in
    // HAProxy (`retry-on empty-response`) would replay the applications' POSTs behind the
    // gateway, so the documented configuration does not.
    assert.ok(failed <= 16, `at most two failed requests per client loop (16), got ${failed}`);
    // A request B dropped ends as the balancer's 502/503, or as a connection the balancer closes
    // without an answer (above); nothing else.
    assert.ok(
      [...failures.keys()].every((k) => / (502|503)$/.test(k) || /^network .*(other side closed|ECONNRESET)/.test(k)),
      `the failures are only the requests B dropped: ${[...failures.keys()]}`,
    );
  });

  test('during a store fault the node health HAProxy probes says 503 (store failed), HAProxy takes the node out, and both come back when PostgreSQL does', async () => {
    const a = nodes[0] as StartedProcess<ServedUrls>;
    await pg.stop();
    try {
      const health = await fetch(`${a.ready.node}/edge/0-alpha/health`);
      assert.equal(health.status, 503);
      const body = (await health.json()) as { status: string; store: { status: string; reason?: string } };
      assert.equal(body.status, 'degraded');
      assert.deepEqual(body.store, { status: 'failed', reason: 'connection' });
      await waitUntil('HAProxy to take node A out on its health 503', async () => (await serverStates(statsPort)).a === 'DOWN', {
        ms: 15_000,
        everyMs: 100,
      });
      const through = await fetch(`${lb}/.svc/auth/v1/challenges`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ public_key: device.publicKey }),
      });
      assert.equal(through.status, 503, 'the balancer has no node to send it to');
      await through.body?.cancel();
    } finally {
      await pg.start();
    }
    await waitUntil(
      'node health to answer 200 again once PostgreSQL is back',
      async () => {
        const r = await fetch(`${a.ready.node}/edge/0-alpha/health`);
        await r.body?.cancel();
        return r.status === 200;
      },
      { ms: 30_000, everyMs: 200 },
    );
    await waitUntil('HAProxy to put node A back', async () => (await serverStates(statsPort)).a === 'UP', { ms: 15_000, everyMs: 100 });
    const s = await appSignIn(lb, device.keyFile, device.publicKey);
    assert.equal(s.status, 201, 'signed in through the balancer again');
    assert.equal(a.child.exitCode, null);
  });
});

// `node --import tsx bench/http-soak.ts`: the reliability soak over real HTTP. Starts the real
// `svc serve` (the installed bin, a separate process) on the embedded SQLite store with its
// metrics listener, and drives it for SOAK_WINDOWS windows of SOAK_WINDOW_SECONDS (default 10 ×
// 30 s: five minutes) with the same mixed work on every connection: a challenge, its signed
// session, a refresh, and two bearer checks. After each window it prints the requests served per
// second, the latency p99, the server's own event-loop delay (p99 and max, from its /metrics; the
// histogram restarts at every scrape) and the database's size (file + WAL); at the end, the last
// window's figures over the first's. Ratios within one run on this machine, not absolute speeds.
import { randomBytes, sign } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { type Device, setupProject, start, started, stop, svc } from './harness.js';

const WINDOWS = Number(process.env.SOAK_WINDOWS ?? 10);
const WINDOW_SECONDS = Number(process.env.SOAK_WINDOW_SECONDS ?? 30);
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 16);

type Context = Record<string, unknown>;

/** One connection's loop: sign in with its device, rotate the pair once, check the new access token twice. */
function mixedWork(devices: readonly Device[]): autocannon.Request[] {
  let n = 0;
  const json = { 'content-type': 'application/json' };
  return [
    {
      method: 'POST',
      path: '/v1/auth/challenges',
      headers: json,
      setupRequest: (req, ctx: object) => {
        const c = ctx as Context;
        c.device ??= devices[n++ % devices.length];
        return { ...req, body: JSON.stringify({ public_key: (c.device as Device).pub }) };
      },
      onResponse: (_status, body, ctx: object) => Object.assign(ctx, { challenge: JSON.parse(body) }),
    },
    {
      method: 'POST',
      path: '/v1/auth/sessions',
      headers: json,
      setupRequest: (req, ctx: object) => {
        const c = ctx as Context;
        const challenge = c.challenge as { challenge_id: string; challenge: string };
        const signature = sign(null, Buffer.from(challenge.challenge), (c.device as Device).key).toString('hex');
        return { ...req, body: JSON.stringify({ challenge_id: challenge.challenge_id, signature }) };
      },
      onResponse: (_status, body, ctx: object) => Object.assign(ctx, { pair: JSON.parse(body) }),
    },
    {
      method: 'POST',
      path: '/v1/auth/refresh',
      headers: json,
      setupRequest: (req, ctx: object) => ({
        ...req,
        body: JSON.stringify({ refresh_token: ((ctx as Context).pair as { refresh_token: string }).refresh_token }),
      }),
      onResponse: (_status, body, ctx: object) => Object.assign(ctx, { pair: JSON.parse(body) }),
    },
    ...[1, 2].map(
      (): autocannon.Request => ({
        method: 'GET',
        path: '/v1/auth/me',
        setupRequest: (req, ctx: object) => ({
          ...req,
          headers: { authorization: `Bearer ${((ctx as Context).pair as { access_token: string }).access_token}` },
        }),
      }),
    ),
  ];
}

/** The server's event-loop delay since the last scrape, in milliseconds. */
async function eventLoop(metricsUrl: string): Promise<{ p99: number; max: number }> {
  const text = await (await fetch(metricsUrl)).text();
  const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN) * 1000;
  return { p99: read('nodejs_eventloop_lag_p99_seconds'), max: read('nodejs_eventloop_lag_max_seconds') };
}

function sizeMiB(file: string): number {
  const bytes = statSync(file).size + (statSync(`${file}-wal`, { throwIfNoEntry: false })?.size ?? 0);
  return Math.round((bytes / 2 ** 20) * 10) / 10;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), `svc-http-soak-${randomBytes(3).toString('hex')}-`));
  try {
    const { devices, controlDb } = setupProject(join(dir, 'project'), 'sqlite', '');
    const server = await start(
      [
        svc,
        'serve',
        '--management-listen',
        '127.0.0.1:0',
        '--node-listen',
        '127.0.0.1:0',
        '--metrics-listen',
        '127.0.0.1:0',
        join(dir, 'project'),
      ],
      /^(?=[\s\S]*management API listening on (http:\/\/\S+))(?=[\s\S]*metrics listening on (http:\/\/\S+))/,
    );
    const metricsUrl = server.match[2] as string;
    await eventLoop(metricsUrl);
    const rows: Record<string, number>[] = [];
    for (let w = 1; w <= WINDOWS; w++) {
      const run = await autocannon({ url: server.url, connections: CONNECTIONS, duration: WINDOW_SECONDS, requests: mixedWork(devices) });
      const loop = await eventLoop(metricsUrl);
      const row = {
        window: w,
        db_mib: sizeMiB(controlDb),
        req_per_s: Math.round(run.requests.average),
        latency_p99_ms: run.latency.p99,
        loop_p99_ms: Math.round(loop.p99 * 10) / 10,
        loop_max_ms: Math.round(loop.max * 10) / 10,
        non_2xx: run.non2xx,
        errors: run.errors,
      };
      rows.push(row);
      console.log(JSON.stringify(row));
    }
    await stop(server);
    const first = rows[0] as Record<string, number>;
    const last = rows.at(-1) as Record<string, number>;
    const ratio = (k: string) => Math.round(((last[k] as number) / (first[k] as number)) * 100) / 100;
    const worst = (k: string) => Math.max(...rows.map((r) => r[k] as number));
    console.log(
      JSON.stringify({
        last_over_first: { req_per_s: ratio('req_per_s'), latency_p99_ms: ratio('latency_p99_ms'), loop_p99_ms: ratio('loop_p99_ms') },
        worst_window: { loop_p99_ms: worst('loop_p99_ms'), loop_max_ms: worst('loop_max_ms') },
        non_2xx: rows.reduce((a, r) => a + (r.non_2xx as number), 0),
        errors: rows.reduce((a, r) => a + (r.errors as number), 0),
      }),
    );
  } finally {
    for (const child of started) if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();

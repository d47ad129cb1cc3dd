// `npm run bench`: starts the real server (`svc auth serve`, a separate process) and a bare
// Fastify route (the baseline, also a separate process), drives both with autocannon from
// this process on the same 2-core machine, and reports every figure as a ratio to the
// baseline measured in this same run. Figures are written to bench/results/.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { publicKeyHexOf } from '@svc/core';
import autocannon from 'autocannon';
import { seedSessions } from './seed.js';

const root = new URL('../', import.meta.url).pathname;
const svc = join(root, 'packages/cli/dist/bin.js');
const DURATION = Number(process.env.BENCH_SECONDS ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const SEED = Number(process.env.BENCH_SESSIONS ?? 1_000_000);
// This VM's speed drifts between seconds: every figure is taken in ROUNDS rounds, each right
// after its own baseline, and the median ratio is reported.
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

interface Proc {
  child: ChildProcess;
  url: string;
}

// Every process this run starts, so that a failing run still stops them all.
const started: ChildProcess[] = [];

async function start(args: string[], pattern: RegExp, env: NodeJS.ProcessEnv = {}): Promise<Proc> {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, SVC_LOG_LEVEL: 'error', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  let out = '';
  let err = '';
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  return await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out starting ${args.join(' ')}: ${err}`)), 30_000);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = pattern.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve({ child, url: m[1] });
      }
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}: ${err}`)));
  });
}

async function stop(p: Proc): Promise<void> {
  if (p.child.exitCode !== null) return;
  const done = new Promise((r) => p.child.once('exit', r));
  p.child.kill('SIGTERM');
  await done;
}

function rssMiB(p: Proc): number {
  const status = readFileSync(`/proc/${p.child.pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return Math.round(kb / 1024);
}

async function cannon(opts: autocannon.Options): Promise<{ rps: number; errors: number; non2xx: number; p99: number }> {
  const result = await autocannon({ connections: CONNECTIONS, duration: DURATION, ...opts });
  return { rps: result.requests.average, errors: result.errors, non2xx: result.non2xx, p99: result.latency.p99 };
}

async function post(url: string, path: string, body: unknown, token?: string): Promise<Record<string, unknown>> {
  const res = await fetch(url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function login(url: string, key: KeyObject, pub: string): Promise<{ access_token: string; refresh_token: string }> {
  const c = await post(url, '/v1/auth/challenges', { public_key: pub });
  const sig = sign(null, Buffer.from(c.challenge as string), key).toString('hex');
  return (await post(url, '/v1/auth/sessions', { challenge_id: c.challenge_id, signature: sig })) as {
    access_token: string;
    refresh_token: string;
  };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

interface Device {
  key: KeyObject;
  pub: string;
}

interface StoreFigures {
  baseline: number;
  bearer: number;
  logins: number;
  refresh: number;
  p99: Record<string, number>;
}

const median = (xs: readonly number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

/** The round whose bearer ratio is the median, and the median of each figure's ratio over all rounds. */
interface RoundedFigures {
  rounds: StoreFigures[];
  ratios: { bearer: number; logins: number; refresh: number };
  rates: { baseline: number; bearer: number; logins: number; refresh: number };
}

function summarize(rounds: StoreFigures[]): RoundedFigures {
  return {
    rounds,
    ratios: {
      bearer: median(rounds.map((r) => r.bearer / r.baseline)),
      logins: median(rounds.map((r) => r.logins / r.baseline)),
      refresh: median(rounds.map((r) => r.refresh / r.baseline)),
    },
    rates: {
      baseline: median(rounds.map((r) => r.baseline)),
      bearer: median(rounds.map((r) => r.bearer)),
      logins: median(rounds.map((r) => r.logins)),
      refresh: median(rounds.map((r) => r.refresh)),
    },
  };
}

/** A project on `store`, with 8 enrolled admin devices. */
function setupProject(dir: string, store: 'sqlite' | 'postgres', pgSchema: string): { devices: Device[]; controlDb: string } {
  const cli = (args: string[]) => execFileSync(process.execPath, [svc, ...args], { encoding: 'utf8' });
  if (store === 'postgres') {
    // An existing project directory with the PostgreSQL addon pinned and selected.
    cli(['auth', 'init', '--json', dir]);
    const sums = readFileSync(join(root, 'packages/cli/addons/SHA256SUMS'), 'utf8');
    const digest = /^([0-9a-f]{64}) {2}svc-store-postgres-/m.exec(sums)?.[1] as string;
    cli(['package', 'install', 'svc-store-postgres', '--sha256', digest, dir]);
    const edn = readFileSync(join(dir, 'project.edn'), 'utf8')
      .replace(
        ':store {:package "svc-store-sqlite" :activate [:svc/store]}',
        `:store {:package "svc-store-sqlite" :activate [:svc/store]}\n                :pg {:package "svc-store-postgres" :activate [:svc/store] :config {:store/url "${PG_URL}" :store/schema "${pgSchema}"}}`,
      )
      .replace(':auth/store :store', ':auth/store :pg');
    writeFileSync(join(dir, 'project.edn'), edn);
  }
  const init = JSON.parse(cli(['auth', 'init', '--json', dir])) as { bootstrap_token: string; control_db: string };
  const keys = Array.from({ length: 8 }, () => generateKeyPairSync('ed25519'));
  const devices: Device[] = [];
  let token = init.bootstrap_token;
  for (const [i, k] of keys.entries()) {
    // The first admin with the bootstrap token; the others with audited recovery tokens.
    if (i > 0) token = (JSON.parse(cli(['auth', 'init', '--json', '--recover', dir])) as { bootstrap_token: string }).bootstrap_token;
    cli(['auth', 'enroll', token, publicKeyHexOf(k.publicKey), dir]);
    devices.push({ key: k.privateKey, pub: publicKeyHexOf(k.publicKey) });
  }
  return { devices, controlDb: init.control_db };
}

/** Bearer validation, complete logins and refresh rotations against `server`, each beside a fresh baseline. */
async function measure(server: Proc, bare: Proc, devices: Device[]): Promise<StoreFigures> {
  const first = devices[0] as Device;
  const session = await login(server.url, first.key, first.pub);
  const bearerHeaders = { authorization: `Bearer ${session.access_token}` };
  const baseline = await cannon({ url: bare.url });
  const bearer = await cannon({ url: `${server.url}/v1/auth/me`, headers: bearerHeaders });
  if (bearer.non2xx > 0 || bearer.errors > 0) throw new Error(`bearer run had ${bearer.non2xx} non-2xx, ${bearer.errors} errors`);

  // Complete logins: a challenge, then the signed session, per connection in sequence.
  let n = 0;
  const logins = await cannon({
    url: server.url,
    requests: [
      {
        method: 'POST',
        path: '/v1/auth/challenges',
        headers: { 'content-type': 'application/json' },
        setupRequest: (req, ctx: object) => {
          const context = ctx as Record<string, unknown>;
          const d = devices[n++ % devices.length] as Device;
          context.key = d.key;
          return { ...req, body: JSON.stringify({ public_key: d.pub }) };
        },
        onResponse: (status, body, ctx: object) => {
          const context = ctx as Record<string, unknown>;
          if (status === 201) {
            const c = JSON.parse(body) as { challenge_id: string; challenge: string };
            context.challenge_id = c.challenge_id;
            context.challenge = c.challenge;
          }
        },
      },
      {
        method: 'POST',
        path: '/v1/auth/sessions',
        headers: { 'content-type': 'application/json' },
        setupRequest: (req, ctx: object) => {
          const context = ctx as Record<string, unknown>;
          return {
            ...req,
            body: JSON.stringify({
              challenge_id: context.challenge_id,
              signature: sign(null, Buffer.from(context.challenge as string), context.key as KeyObject).toString('hex'),
            }),
          };
        },
      },
    ],
  });
  if (logins.non2xx > 0 || logins.errors > 0) throw new Error(`login run had ${logins.non2xx} non-2xx, ${logins.errors} errors`);

  // Refresh rotations: every connection rotates its own session's chain. autocannon resets a
  // connection's context when it starts its request list over, so the list is one refresh
  // repeated many times: a chain lives as long as the list, and a fresh one starts after.
  const chains: string[] = [];
  for (let i = 0; i < CONNECTIONS * 4; i++) {
    const d = devices[i % devices.length] as Device;
    chains.push((await login(server.url, d.key, d.pub)).refresh_token);
  }
  const rotation: autocannon.Request = {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    setupRequest: (req, ctx: object) => {
      const context = ctx as Record<string, unknown>;
      context.rt ??= chains.pop();
      return { ...req, body: JSON.stringify({ refresh_token: context.rt }) };
    },
    onResponse: (status, body, ctx: object) => {
      const context = ctx as Record<string, unknown>;
      if (status === 200) context.rt = (JSON.parse(body) as { refresh_token: string }).refresh_token;
    },
  };
  const refresh = await cannon({ url: `${server.url}/v1/auth/refresh`, requests: Array.from({ length: 20_000 }, () => rotation) });
  if (refresh.non2xx > 0 || refresh.errors > 0) throw new Error(`refresh run had ${refresh.non2xx} non-2xx, ${refresh.errors} errors`);
  return {
    baseline: baseline.rps,
    bearer: bearer.rps,
    logins: logins.rps / 2,
    refresh: refresh.rps,
    p99: { baseline: baseline.p99, bearer: bearer.p99, login_pair: logins.p99, refresh: refresh.p99 },
  };
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  const results: Record<string, unknown> = { started_at: new Date().toISOString(), duration_s: DURATION, connections: CONNECTIONS };
  const lines: string[] = [];
  const report = (line: string) => {
    lines.push(line);
    console.log(line);
  };
  const pgSchema = `svc_bench_${randomBytes(4).toString('hex')}`;
  try {
    const bare = await start(['--import', 'tsx', join(root, 'bench/bare-server.ts')], /listening on (http:\/\/\S+)/);
    report(
      `svc auth benchmark: ${DURATION}s per figure, ${CONNECTIONS} connections, server and load generator on one ${cpus().length}-core machine, server log level error`,
    );
    report(
      `every figure is also a ratio to the bare Fastify route measured just before it; ${ROUNDS} rounds, medians shown (rates: median of each figure; ratios: median of the per-round ratios)`,
    );
    const stores = (process.env.BENCH_STORES ?? 'sqlite,postgres').split(',') as ('sqlite' | 'postgres')[];
    for (const store of stores) {
      const dir = join(work, store);
      const { devices, controlDb } = setupProject(dir, store, pgSchema);
      let server = await start([svc, 'auth', 'serve', '--listen', '127.0.0.1:0', dir], /listening on (http:\/\/\S+)/);
      // Warm-up: both servers' hot paths compiled before anything is measured.
      const warm = await login(server.url, (devices[0] as Device).key, (devices[0] as Device).pub);
      await cannon({ url: bare.url, duration: 1 });
      await cannon({ url: `${server.url}/v1/auth/me`, headers: { authorization: `Bearer ${warm.access_token}` }, duration: 1 });
      const rounds: StoreFigures[] = [];
      for (let r = 0; r < ROUNDS; r++) rounds.push(await measure(server, bare, devices));
      const summary = summarize(rounds);
      const f = { ...summary.rates, p99: (rounds[0] as StoreFigures).p99 };
      const durability =
        store === 'sqlite'
          ? 'WAL, synchronous=NORMAL; enrollments, revocations, removals, reuse, bootstrap and pairing commits fsynced'
          : `PostgreSQL ${PG_URL}, synchronous_commit=on`;
      report('');
      report(`store: ${store} (${durability})`);
      // The targets are for the embedded store; PostgreSQL figures are for comparison.
      const target = (t: string) => (store === 'sqlite' ? `(target ${t})` : '');
      const spread = (pick: (r: StoreFigures) => number) => (ROUNDS > 1 ? `   rounds ${rounds.map((r) => fmt(pick(r))).join(' / ')}` : '');
      report(`  baseline  bare Fastify route          ${fmt(f.baseline).padStart(8)} req/s   1.00x${spread((r) => r.baseline)}`);
      report(
        `  bearer    GET /v1/auth/me             ${fmt(f.bearer).padStart(8)} req/s   ${summary.ratios.bearer.toFixed(2)}x   ${target('>= 0.50x')}${spread((r) => r.bearer)}`,
      );
      report(
        `  login     challenge + signed session  ${fmt(f.logins).padStart(8)} /s      ${summary.ratios.logins.toFixed(3)}x   ${target('>= 2,000/s')}${spread((r) => r.logins)}`,
      );
      report(
        `  refresh   rotation                    ${fmt(f.refresh).padStart(8)} /s      ${summary.ratios.refresh.toFixed(3)}x   ${target('>= 4,000/s')}${spread((r) => r.refresh)}`,
      );
      const figures: Record<string, unknown> = {
        durability,
        rounds: ROUNDS,
        baseline_rps: f.baseline,
        bearer_rps: f.bearer,
        bearer_ratio: summary.ratios.bearer,
        logins_per_s: f.logins,
        logins_ratio: summary.ratios.logins,
        refresh_per_s: f.refresh,
        refresh_ratio: summary.ratios.refresh,
        p99_ms: f.p99,
        per_round: rounds,
      };
      // Bearer validation with many sessions in the store, against this run's small-store ratio.
      if (store === 'sqlite' && SEED > 0) {
        const rssSmall = rssMiB(server);
        await stop(server);
        const t0 = Date.now();
        seedSessions(controlDb, SEED);
        const seedS = (Date.now() - t0) / 1000;
        server = await start([svc, 'auth', 'serve', '--listen', '127.0.0.1:0', dir], /listening on (http:\/\/\S+)/);
        const d = devices[0] as Device;
        const fresh = await login(server.url, d.key, d.pub);
        const headers = { authorization: `Bearer ${fresh.access_token}` };
        await cannon({ url: `${server.url}/v1/auth/me`, headers, duration: 1 });
        const base2 = await cannon({ url: bare.url });
        const big = await cannon({ url: `${server.url}/v1/auth/me`, headers });
        const rssBig = rssMiB(server);
        const vsSmall = big.rps / base2.rps / summary.ratios.bearer;
        report(
          `  bearer    with ${fmt(SEED)} sessions ${fmt(big.rps).padStart(8)} req/s   ${(big.rps / base2.rps).toFixed(2)}x   (${vsSmall.toFixed(2)} of the small-store ratio; seeded in ${seedS.toFixed(0)}s)`,
        );
        report(`  memory    server RSS ${rssSmall} MiB with a small store, ${rssBig} MiB with ${fmt(SEED)} sessions`);
        Object.assign(figures, {
          seeded_sessions: SEED,
          bearer_big_rps: big.rps,
          bearer_big_ratio: big.rps / base2.rps,
          bearer_big_vs_small: vsSmall,
          rss_mib: { small: rssSmall, big: rssBig },
        });
      }
      results[store] = figures;
      await stop(server);
    }
    await stop(bare);
  } finally {
    for (const child of started) if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
    try {
      execFileSync('psql', [PG_URL, '-qc', `DROP SCHEMA IF EXISTS ${pgSchema} CASCADE`], { stdio: 'ignore' });
    } catch {
      // No psql or no server: nothing was created there either.
    }
  }
  const dir = join(root, 'bench/results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(join(dir, 'latest.txt'), `${lines.join('\n')}\n`);
  console.log('figures written to bench/results/latest.json and latest.txt');
}

await main();

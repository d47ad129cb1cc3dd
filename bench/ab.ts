// `node --import tsx bench/ab.ts <TREE> <TREE> ...`: compares built checkouts of svc auth by
// what a request COSTS the server, not by how many it answers. Throughput on this 2-core VM
// drifts more from one second to the next than a refactor changes it, so throughput A/B runs
// settle nothing; the CPU time the server process spends per request (all its threads, and its
// main thread alone, from /proc) moves far less with the machine's load. Each tree runs its own
// installed `svc auth serve` on a project its own CLI made; the trees take turns, PAIRS times,
// in alternating order, each turn in a server process of its own. Figures go to
// bench/results/ab.json. AB_STORE=postgres runs each tree on a schema of its own on the bench's
// PostgreSQL (BENCH_PG_URL), PostgreSQL's own CPU per operation beside each figure;
// AB_ONLY=logins[,bearer,rotations] measures only those.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import autocannon from 'autocannon';
import {
  type Chain,
  type Cost,
  costOf,
  type Device,
  libpqEnv,
  login,
  loginRequests,
  type Proc,
  postgresMicros,
  root,
  rotationRequest,
  setupProject,
  start,
  started,
  stop,
} from './harness.js';

const PAIRS = Math.max(1, Number(process.env.AB_PAIRS ?? 3));
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const BEARER_REQUESTS = Number(process.env.AB_BEARER_REQUESTS ?? 40_000);
const LOGINS = Number(process.env.AB_LOGINS ?? 3_000);
const ROTATIONS = Number(process.env.AB_ROTATIONS ?? 10_000);
const STORE = (process.env.AB_STORE ?? 'sqlite') as 'sqlite' | 'postgres';
if (STORE !== 'sqlite' && STORE !== 'postgres') throw new Error(`AB_STORE must be sqlite or postgres, not ${String(STORE)}`);
const OPERATIONS = ['bearer', 'logins', 'rotations'].filter((k) =>
  (process.env.AB_ONLY ?? 'bearer,logins,rotations').split(',').includes(k),
);
if (OPERATIONS.length === 0) throw new Error('AB_ONLY names none of bearer, logins, rotations');
// On PostgreSQL, the database's own CPU too (harness `postgresMicros`).
const db = STORE === 'postgres' ? { also: postgresMicros } : {};
const run = (opts: autocannon.Options) => autocannon({ connections: CONNECTIONS, ...opts });

async function bearer(server: Proc, token: string): Promise<Cost> {
  return costOf(server, () =>
    run({ url: `${server.url}/v1/auth/me`, headers: { authorization: `Bearer ${token}` }, amount: BEARER_REQUESTS }),
  );
}

async function logins(server: Proc, devices: readonly Device[]): Promise<Cost> {
  return costOf(server, () => run({ url: server.url, amount: LOGINS * 2, requests: loginRequests(devices) }), 2, db);
}

async function rotations(server: Proc, devices: readonly Device[]): Promise<Cost> {
  // Sessions are bound to their device key by default (DPoP, #30): each rotation carries a proof by it (harness `rotationRequest`).
  const chains: Chain[] = [];
  for (let i = 0; i < CONNECTIONS * 2; i++) {
    const d = devices[i % devices.length] as Device;
    chains.push({ token: (await login(server.url, d.key, d.pub)).refresh_token, key: d.key });
  }
  const url = `${server.url}/v1/auth/refresh`;
  const rotation = rotationRequest(chains, url);
  // One long request list per connection: a chain lives as long as the list (see bench/run.ts).
  return costOf(server, () => run({ url, amount: ROTATIONS, requests: Array.from({ length: ROTATIONS }, () => rotation) }), 1, db);
}

interface Tree {
  readonly dir: string;
  readonly name: string;
  /** The project its own CLI made, and that CLI. */
  readonly project: string;
  readonly bin: string;
  /** The server of the pair being measured. */
  server: Proc | null;
  readonly devices: Device[];
}

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] as number;

async function main(): Promise<void> {
  const dirs = process.argv.slice(2);
  if (dirs.length < 2) throw new Error('usage: node --import tsx bench/ab.ts <TREE> <TREE> [...] (built checkouts of svc auth)');
  const work = mkdtempSync(join(tmpdir(), 'svc-ab-'));
  const trees: Tree[] = [];
  const schemas: string[] = [];
  const figures: Record<string, Record<string, Cost[]>> = {};
  try {
    for (const [i, dir] of dirs.entries()) {
      const bin = join(dir, 'node_modules/.bin/svc');
      const project = join(work, `tree${i}`);
      const schema = `svc_ab_${randomBytes(4).toString('hex')}_${i}`;
      if (STORE === 'postgres') schemas.push(schema);
      const { devices } = setupProject(project, STORE, schema, bin);
      const name = `${i}:${basename(dir)}@${execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()}`;
      trees.push({ dir, name, project, bin, server: null, devices });
      figures[name] = { bearer: [], logins: [], rotations: [] };
    }
    for (let p = 0; p < PAIRS; p++) {
      const order = p % 2 === 0 ? trees : [...trees].reverse();
      for (const t of order) {
        const f = figures[t.name] as Record<string, Cost[]>;
        // Each pair measures a process of its own: one process's draw (docs/performance.md,
        // 2026-11-29 at 07:00) would otherwise weigh on every pair of its tree, and the
        // challenges each sign-in run leaves unanswered count against its client's budget (100
        // a minute) until the process ends.
        t.server = await start([t.bin, 'auth', 'serve', '--listen', '127.0.0.1:0', t.project], /listening on (http:\/\/\S+)/);
        const server = t.server;
        const first = t.devices[0] as Device;
        const token = (await login(server.url, first.key, first.pub)).access_token;
        // Warm-up: the hot paths compiled, the checkpoint thread (if any) started.
        await run({ url: `${server.url}/v1/auth/me`, headers: { authorization: `Bearer ${token}` }, duration: 2 });
        if (OPERATIONS.includes('logins')) await run({ url: server.url, amount: 1_000, requests: loginRequests(t.devices) });
        if (OPERATIONS.includes('bearer')) f.bearer?.push(await bearer(server, token));
        if (OPERATIONS.includes('logins')) f.logins?.push(await logins(server, t.devices));
        if (OPERATIONS.includes('rotations')) f.rotations?.push(await rotations(server, t.devices));
        const last = (k: string) => f[k]?.at(-1) as Cost;
        console.log(
          `pair ${p + 1} ${t.name}: ` +
            OPERATIONS.map(
              (k) =>
                `${k} ${last(k).all.toFixed(0)} µs (main ${last(k).main.toFixed(0)}${last(k).also === undefined ? '' : `, PostgreSQL ${(last(k).also as number).toFixed(0)}`}) ${last(k).rps.toFixed(0)}/s`,
            ).join(', '),
        );
        await stop(server);
        t.server = null;
      }
    }
  } finally {
    for (const t of trees) if (t.server !== null) await stop(t.server).catch(() => undefined);
    for (const child of started) if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
    for (const schema of schemas)
      execFileSync('psql', ['-qc', `DROP SCHEMA IF EXISTS ${schema} CASCADE`], { stdio: 'ignore', env: libpqEnv() });
  }
  console.log('\nserver CPU per operation, medians of the pairs (all threads / main thread), and throughput:');
  for (const [name, f] of Object.entries(figures)) {
    const line = Object.entries(f)
      .filter(([, costs]) => costs.length > 0)
      .map(
        ([k, costs]) =>
          `${k} ${median(costs.map((c) => c.all)).toFixed(0)} / ${median(costs.map((c) => c.main)).toFixed(0)} µs${STORE === 'postgres' ? ` + ${median(costs.map((c) => c.also ?? 0)).toFixed(0)} µs PostgreSQL` : ''}, ${median(costs.map((c) => c.rps)).toFixed(0)}/s`,
      )
      .join('; ');
    console.log(`  ${name}: ${line}`);
  }
  mkdirSync(join(root, 'bench/results'), { recursive: true });
  writeFileSync(
    join(root, 'bench/results/ab.json'),
    `${JSON.stringify({ store: STORE, pairs: PAIRS, connections: CONNECTIONS, figures }, null, 2)}\n`,
  );
}

await main();

// Two nodes writing at once on one PostgreSQL schema (issue #14 item 2): two `svc auth serve`
// processes on one project, the load split evenly between them, complete logins and refresh
// rotations counted together, and what they cost both servers in CPU. `npm run bench` runs it
// as the `postgres-nodes` scenario; run alone it can measure another build of svc, for a
// before/after on one machine in one sitting:
//
//   node --import tsx bench/pg-nodes.ts [--bin /path/to/other/checkout/node_modules/.bin/svc]
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import {
  cpuMicros,
  type Device,
  fmt,
  login,
  loginRequests,
  median,
  PG_URL,
  type Proc,
  rotationRequest,
  setupProject,
  start,
  started,
  stop,
  svc,
} from './harness.js';

/** The figures of two nodes together: operations per second and server CPU µs per operation (both servers). */
export interface NodesFigures {
  readonly logins_per_s: number;
  readonly rotations_per_s: number;
  readonly cpu_us: { readonly login: number; readonly rotation: number };
  /** PostgreSQL's own CPU µs per operation (every postgres process of the machine). */
  readonly db_cpu_us: { readonly login: number; readonly rotation: number };
  readonly rounds: number;
}

/** CPU microseconds spent so far by every `postgres` process of this machine (the server and its backends). */
function postgresMicros(): number {
  let sum = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== 'postgres') continue;
      sum += cpuMicros(`/proc/${entry}/stat`);
    } catch {
      // Gone meanwhile: a backend that ended.
    }
  }
  return sum;
}

/** Runs `load(node, connections)` on both nodes at once; answers the total rate and CPU µs per unit on both servers and on PostgreSQL. */
async function together(
  nodes: readonly Proc[],
  connections: number,
  load: (node: Proc, connections: number) => Promise<autocannon.Result>,
  perUnit: number,
): Promise<{ rate: number; cpuUs: number; dbUs: number }> {
  const cpu = () => nodes.reduce((sum, n) => sum + cpuMicros(`/proc/${n.child.pid}/stat`), 0);
  const before = cpu();
  const db0 = postgresMicros();
  const results = await Promise.all(nodes.map((n) => load(n, Math.max(1, Math.floor(connections / nodes.length)))));
  const spent = cpu() - before;
  const db = postgresMicros() - db0;
  for (const r of results) if (r.errors > 0 || r.non2xx > 0) throw new Error(`${r.errors} errors, ${r.non2xx} non-2xx`);
  const units = results.reduce((sum, r) => sum + r.requests.total, 0) / perUnit;
  return { rate: results.reduce((sum, r) => sum + r.requests.average, 0) / perUnit, cpuUs: spent / units, dbUs: db / units };
}

/**
 * Two nodes of the `svc` at `bin` on a fresh schema: logins and rotations driven at both at
 * once, `rounds` times, medians reported.
 *
 * @example
 * const figures = await measurePostgresNodes({ seconds: 6, connections: 32, rounds: 3 }, console.log);
 */
export async function measurePostgresNodes(
  opts: { readonly seconds: number; readonly connections: number; readonly rounds: number; readonly bin?: string },
  report: (line: string) => void,
): Promise<NodesFigures> {
  const bin = opts.bin ?? svc;
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-nodes-'));
  const schema = `svc_bench_nodes_${randomBytes(4).toString('hex')}`;
  const nodes: Proc[] = [];
  try {
    const { devices } = setupProject(join(dir, 'project'), 'postgres', schema, bin);
    for (let i = 0; i < 2; i++) {
      nodes.push(await start([bin, 'auth', 'serve', '--listen', '127.0.0.1:0', join(dir, 'project')], /listening on (http:\/\/\S+)/));
    }
    const seconds = opts.seconds;
    const logins = (node: Proc, connections: number) =>
      autocannon({ connections, duration: seconds, url: node.url, requests: loginRequests(devices) });
    const rotations = async (node: Proc, connections: number) => {
      // Each connection rotates its own chain, begun on this node.
      const chains: string[] = [];
      for (let i = 0; i < connections * 4; i++) {
        const d = devices[i % devices.length] as Device;
        chains.push((await login(node.url, d.key, d.pub)).refresh_token);
      }
      const rotation = rotationRequest(chains);
      return autocannon({
        connections,
        duration: seconds,
        url: `${node.url}/v1/auth/refresh`,
        requests: Array.from({ length: 20_000 }, () => rotation),
      });
    };
    // Warm-up: both nodes' paths compiled before anything is measured.
    await together(nodes, 4, (n, c) => autocannon({ connections: c, duration: 1, url: n.url, requests: loginRequests(devices) }), 2);
    type Taken = { rate: number; cpuUs: number; dbUs: number };
    const rounds: { logins: Taken; rotations: Taken }[] = [];
    for (let r = 0; r < opts.rounds; r++) {
      rounds.push({
        logins: await together(nodes, opts.connections, logins, 2),
        rotations: await together(nodes, opts.connections, rotations, 1),
      });
    }
    const figures: NodesFigures = {
      logins_per_s: median(rounds.map((r) => r.logins.rate)),
      rotations_per_s: median(rounds.map((r) => r.rotations.rate)),
      cpu_us: { login: median(rounds.map((r) => r.logins.cpuUs)), rotation: median(rounds.map((r) => r.rotations.cpuUs)) },
      db_cpu_us: { login: median(rounds.map((r) => r.logins.dbUs)), rotation: median(rounds.map((r) => r.rotations.dbUs)) },
      rounds: opts.rounds,
    };
    const spread = (pick: (r: (typeof rounds)[number]) => number) => rounds.map((r) => fmt(pick(r))).join(' / ');
    report('');
    report(`two nodes on one PostgreSQL schema (${PG_URL}, synchronous_commit=on), the load split between them, at once`);
    report(
      `  login     challenge + signed session  ${fmt(figures.logins_per_s).padStart(8)} /s   ${figures.cpu_us.login.toFixed(0)} µs CPU (both servers) + ${figures.db_cpu_us.login.toFixed(0)} µs (PostgreSQL)   rounds ${spread((r) => r.logins.rate)}`,
    );
    report(
      `  refresh   rotation                    ${fmt(figures.rotations_per_s).padStart(8)} /s   ${figures.cpu_us.rotation.toFixed(0)} µs CPU (both servers) + ${figures.db_cpu_us.rotation.toFixed(0)} µs (PostgreSQL)   rounds ${spread((r) => r.rotations.rate)}`,
    );
    return figures;
  } finally {
    for (const n of nodes) await stop(n).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    try {
      execFileSync('psql', [PG_URL, '-qc', `DROP SCHEMA IF EXISTS ${schema} CASCADE`], { stdio: 'ignore' });
    } catch {
      // No psql or no server: nothing was created there either.
    }
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const at = process.argv.indexOf('--bin');
  const bin = at > 0 ? process.argv[at + 1] : undefined;
  try {
    await measurePostgresNodes(
      {
        seconds: Number(process.env.BENCH_SECONDS ?? 6),
        connections: Number(process.env.BENCH_CONNECTIONS ?? 32),
        rounds: Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3)),
        ...(bin === undefined ? {} : { bin }),
      },
      (line) => console.log(line),
    );
  } finally {
    for (const child of started) if (child.exitCode === null) child.kill('SIGKILL');
  }
}

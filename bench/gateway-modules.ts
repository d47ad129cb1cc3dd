// The application gateway's module mode in `npm run bench` (scenario `gateway-modules`): an
// authenticated route served by an application module (the real gateway app: hygiene,
// application-realm bearer checked against SQLite on every request, the module after identity,
// bench/gateway-modules-server.ts) against the same route in a bare Fastify app
// (bench/bare-server.ts), goal >= 0.6x (issue #31). What this machine allows any out-of-process
// design: the same bare route behind a bare reverse proxy (bench/bare-proxy.ts: one HTTP hop, no
// authentication), measured in the same rounds. Each in its own process, autocannon in this one; ROUNDS
// rounds, each right after its own baseline, medians. Also what a request costs each server
// process in CPU microseconds (from /proc, over a fixed number of requests): a figure that moves
// far less with this VM's load than throughput does. The gateway's figure is the gateway process
// plus the confined module process it forwards to (bench/gateway-modules-server.ts writes its pid).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { type Cost, costOf, cpuMicros, fmt, median, type Proc, root, start, stop } from './harness.js';

const DURATION = Number(process.env.BENCH_SECONDS ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
/** How many requests each CPU-per-request figure is taken over. */
export const CPU_REQUESTS = Number(process.env.BENCH_CPU_REQUESTS ?? 20_000);

/** Throughput of `url` for DURATION seconds; throws on any error or non-2xx. */
export async function throughput(url: string, headers: Record<string, string> = {}, duration = DURATION) {
  const r = await autocannon({ url, connections: CONNECTIONS, duration, headers });
  if (r.errors > 0 || r.non2xx > 0) throw new Error(`${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { rps: r.requests.average, p99: r.latency.p99 };
}

/**
 * The CPU microseconds `server` spends per request over {@link CPU_REQUESTS} requests to `url`
 * (the same URL as `server.url` unless the process under test is another one, e.g. a proxy's upstream).
 *
 * @example
 * const cost = await cpuPerRequest(gateway, gateway.url, { authorization: 'Bearer svca_...' });
 */
export function cpuPerRequest(server: Proc, url: string, headers: Record<string, string> = {}): Promise<Cost> {
  return costOf(server, () => autocannon({ url, connections: CONNECTIONS, amount: CPU_REQUESTS, headers }));
}

/** One round: the bare route, then the gateway right after it; then the CPU of each. */
interface Round {
  bare: number;
  gateway: number;
  bare_cpu_us: number;
  /** The gateway process and the module process together. */
  gateway_cpu_us: number;
  /** Of which the module process. */
  module_cpu_us: number;
  /** The bare route behind a bare reverse proxy: its throughput, and the two processes' CPU. */
  hop: number;
  hop_cpu_us: number;
}

/** Like {@link cpuPerRequest}, plus the CPU microseconds per request of the process `extraPid` (the module process) over the same load. */
async function cpuPerRequestWith(
  server: Proc,
  extraPid: number,
  url: string,
  headers: Record<string, string>,
): Promise<{ all: number; extra: number }> {
  const stat = `/proc/${extraPid}/stat`;
  const before = cpuMicros(stat);
  const cost = await cpuPerRequest(server, url, headers);
  const extra = (cpuMicros(stat) - before) / CPU_REQUESTS;
  return { all: cost.all + extra, extra };
}

/**
 * Runs the scenario against `bare` (a running bare Fastify route) and reports its lines.
 *
 * @example
 * results.gateway_modules = await measureGatewayModules(bare, report);
 */
export async function measureGatewayModules(bare: Proc, report: (line: string) => void) {
  const work = mkdtempSync(join(tmpdir(), 'svc-bench-gwm-'));
  const procs: Proc[] = [];
  try {
    const gateway = await start(
      ['--import', 'tsx', join(root, 'bench/gateway-modules-server.ts'), join(work, 'app.token')],
      /listening on (http:\/\/\S+)/,
    );
    procs.push(gateway);
    const hop = await start(['--import', 'tsx', join(root, 'bench/bare-proxy.ts'), bare.url], /listening on (http:\/\/\S+)/);
    procs.push(hop);
    // The same request to both: the bare route ignores the header.
    const auth = { authorization: `Bearer ${readFileSync(join(work, 'app.token'), 'utf8')}` };
    const modulePid = Number(readFileSync(join(work, 'module.pid'), 'utf8'));

    // Warm-up: every hot path compiled before anything is measured.
    await throughput(bare.url, auth, 1);
    await throughput(gateway.url, auth, 1);
    await throughput(hop.url, auth, 1);
    const rounds: Round[] = [];
    const p99: Record<string, number> = {};
    for (let r = 0; r < ROUNDS; r++) {
      const b = await throughput(bare.url, auth);
      const g = await throughput(gateway.url, auth);
      const h = await throughput(hop.url, auth);
      const bc = await cpuPerRequest(bare, bare.url, auth);
      const gc = await cpuPerRequestWith(gateway, modulePid, gateway.url, auth);
      const hc = await cpuPerRequestWith(hop, bare.child.pid as number, hop.url, auth);
      rounds.push({
        bare: b.rps,
        gateway: g.rps,
        bare_cpu_us: bc.all,
        gateway_cpu_us: gc.all,
        module_cpu_us: gc.extra,
        hop: h.rps,
        hop_cpu_us: hc.all,
      });
      if (r === 0) Object.assign(p99, { bare: b.p99, gateway: g.p99, bare_behind_proxy: h.p99 });
    }
    const rate = (pick: (r: Round) => number) => median(rounds.map(pick));
    const ratio = median(rounds.map((r) => r.gateway / r.bare));
    const hopRatio = median(rounds.map((r) => r.hop / r.bare));
    const hopCpu = rate((r) => r.hop_cpu_us);
    const spread = (pick: (r: Round) => number) => (ROUNDS > 1 ? `   rounds ${rounds.map((r) => fmt(pick(r))).join(' / ')}` : '');
    const bareCpu = rate((r) => r.bare_cpu_us);
    const gatewayCpu = rate((r) => r.gateway_cpu_us);
    const moduleCpu = rate((r) => r.module_cpu_us);
    report('');
    report(
      'gateway, module mode: GET / served by an application module after identity, in its confined process (sqlite store, bearer checked on every request)',
    );
    report(`  baseline  the same route, bare Fastify app   ${fmt(rate((r) => r.bare)).padStart(8)} req/s   1.00x${spread((r) => r.bare)}`);
    report(
      `  gateway   authenticated, module route        ${fmt(rate((r) => r.gateway)).padStart(8)} req/s   ${ratio.toFixed(2)}x   (goal >= 0.60x)${spread((r) => r.gateway)}`,
    );
    report(
      `  ceiling   the route behind a bare proxy      ${fmt(rate((r) => r.hop)).padStart(8)} req/s   ${hopRatio.toFixed(2)}x   (one HTTP hop, no auth: what this machine allows any out-of-process module)${spread((r) => r.hop)}`,
    );
    report(
      `  cpu       server processes per request (${fmt(CPU_REQUESTS)} requests): bare ${bareCpu.toFixed(0)} µs, gateway ${gatewayCpu.toFixed(0)} µs incl. module process ${moduleCpu.toFixed(0)} µs (+${(gatewayCpu - bareCpu).toFixed(0)} µs); bare proxy + route ${hopCpu.toFixed(0)} µs${spread((r) => r.gateway_cpu_us)}`,
    );
    return {
      rounds: ROUNDS,
      bare_rps: rate((r) => r.bare),
      gateway_rps: rate((r) => r.gateway),
      gateway_ratio: ratio,
      bare_behind_proxy_rps: rate((r) => r.hop),
      hop_ceiling_ratio: hopRatio,
      cpu_requests: CPU_REQUESTS,
      cpu_us_per_request: { bare: bareCpu, gateway: gatewayCpu, module_process: moduleCpu, bare_behind_proxy: hopCpu },
      p99_ms: p99,
      per_round: rounds,
    };
  } finally {
    for (const p of procs) await stop(p);
    rmSync(work, { recursive: true, force: true });
  }
}

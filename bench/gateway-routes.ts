// Many applications behind one gateway in `npm run bench` (scenario `gateway-routes`): the same
// authenticated proxied request through the real gateway with `:svc/app-routes` of 100 routes
// against 1 route (bench/gateway-server.ts `routes-100` / `routes-1`), each process on its own,
// the two measured alternately in the same run; target: the gateway's CPU per request with 100
// routes within 5% of 1 route's (matching is one lookup by origin and one per path segment,
// never a scan of the routes). Throughput of each is reported too (it drifts more on a shared machine).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CPU_REQUESTS, throughput as cannon, cpuPerRequest } from './gateway-modules.js';
import { fmt, median, type Proc, root, start, stop } from './harness.js';

const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
/** How many routes the large gateway has. */
export const MANY_ROUTES = 100;

/** One round: one route, then many, then the CPU of each. */
interface Round {
  one: number;
  many: number;
  one_cpu_us: number;
  many_cpu_us: number;
}

/**
 * Runs the scenario against `upstream` (a running bare Fastify route) and reports its lines.
 *
 * @example
 * results.gateway_routes = await measureGatewayRoutes(bare, report);
 */
export async function measureGatewayRoutes(upstream: Proc, report: (line: string) => void) {
  const work = mkdtempSync(join(tmpdir(), 'svc-bench-gwr-'));
  const procs: Proc[] = [];
  try {
    const tsx = ['--import', 'tsx'];
    const server = (n: number) =>
      start(
        [...tsx, join(root, 'bench/gateway-server.ts'), upstream.url, `routes-${n}`, join(work, `routes-${n}.token`)],
        /listening on (http:\/\/\S+)/,
      );
    const one = await server(1);
    procs.push(one);
    const many = await server(MANY_ROUTES);
    procs.push(many);
    // Each request names the last route's origin (tools.bench.test, which also has prefix routes).
    const headers = (n: number) => ({
      authorization: `Bearer ${readFileSync(join(work, `routes-${n}.token`), 'utf8')}`,
      host: 'tools.bench.test',
    });
    const url = (p: Proc, _n: number) => `${p.url}/`;
    await cannon(url(one, 1), headers(1), 1);
    await cannon(url(many, MANY_ROUTES), headers(MANY_ROUTES), 1);
    const rounds: Round[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // Alternate which goes first, so drift in the machine's speed does not favour one.
      const first = r % 2 === 0;
      const a = first ? await cannon(url(one, 1), headers(1)) : null;
      const b = await cannon(url(many, MANY_ROUTES), headers(MANY_ROUTES));
      const c = a ?? (await cannon(url(one, 1), headers(1)));
      const oc = await cpuPerRequest(one, url(one, 1), headers(1));
      const mc = await cpuPerRequest(many, url(many, MANY_ROUTES), headers(MANY_ROUTES));
      rounds.push({ one: c.rps, many: b.rps, one_cpu_us: oc.all, many_cpu_us: mc.all });
    }
    const rate = (pick: (r: Round) => number) => median(rounds.map(pick));
    const ratio = median(rounds.map((r) => r.many / r.one));
    const cpuRatio = median(rounds.map((r) => r.one_cpu_us / r.many_cpu_us));
    const spread = (pick: (r: Round) => number) => (ROUNDS > 1 ? `   rounds ${rounds.map((r) => fmt(pick(r))).join(' / ')}` : '');
    report('');
    report('gateway, :svc/app-routes: GET / with Host tools.bench.test, proxied to the bare Fastify route (sqlite store, bearer checked)');
    report(`  baseline  1 route                           ${fmt(rate((r) => r.one)).padStart(8)} req/s   1.00x${spread((r) => r.one)}`);
    report(
      `  routes    ${MANY_ROUTES} routes                        ${fmt(rate((r) => r.many)).padStart(8)} req/s   ${ratio.toFixed(2)}x${spread((r) => r.many)}`,
    );
    report(
      `  cpu       gateway process per request (${fmt(CPU_REQUESTS)} requests): 1 route ${rate((r) => r.one_cpu_us).toFixed(0)} µs, ${MANY_ROUTES} routes ${rate((r) => r.many_cpu_us).toFixed(0)} µs (${cpuRatio.toFixed(2)}x, target >= 0.95x)`,
    );
    return {
      rounds: ROUNDS,
      routes: MANY_ROUTES,
      one_route_rps: rate((r) => r.one),
      many_routes_rps: rate((r) => r.many),
      many_vs_one: ratio,
      cpu_us_per_request: { one: rate((r) => r.one_cpu_us), many: rate((r) => r.many_cpu_us) },
      cpu_one_vs_many: cpuRatio,
      per_round: rounds,
    };
  } finally {
    for (const p of procs) await stop(p);
    rmSync(work, { recursive: true, force: true });
  }
}

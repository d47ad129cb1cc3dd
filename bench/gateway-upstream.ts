// The application gateway's upstream mode in `npm run bench` (scenario `gateway-upstream`):
// an authenticated proxied request (the real gateway app: strip, application-realm bearer
// checked against SQLite, proxy) against the same request through a bare reverse proxy with no
// authentication built with the same library (@fastify/http-proxy), goal >= 0.9x (issue #31); and
// the gateway with its own identity headers (`Svc-Assertion`, an EdDSA JWS signed per request by
// the gateway's signer) against the same bare proxy, goal >= 0.75x. What this machine allows the
// signed figure: the bare proxy that only signs once per request (bench/bare-proxy.ts `sign`),
// measured in the same rounds. Every process on its own: the upstream (the bare Fastify route,
// shared by every round), and the two bare proxies and the two gateways, started anew for every
// round; autocannon in this one. Also the CPU microseconds per request of each proxy process.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CPU_REQUESTS, throughput as cannon, cpuPerRequest } from './gateway-modules.js';
import { fmt, median, type Proc, root, start, stop } from './harness.js';

const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));

/** One round: the bare proxy, then each gateway right after it. */
interface Round {
  bare: number;
  gateway: number;
  signed: number;
  /** The bare proxy that signs once per request. */
  bare_signing: number;
  /** CPU microseconds per request of each proxy process (the upstream's own work not counted). */
  bare_cpu_us: number;
  gateway_cpu_us: number;
  signed_cpu_us: number;
  bare_signing_cpu_us: number;
}

/**
 * Runs the scenario against `upstream` (a running bare Fastify route) and reports its lines.
 *
 * @example
 * results.gateway_upstream = await measureGatewayUpstream(bare, report);
 */
export async function measureGatewayUpstream(upstream: Proc, report: (line: string) => void) {
  const work = mkdtempSync(join(tmpdir(), 'svc-bench-gw-'));
  let procs: Proc[] = [];
  try {
    const tsx = ['--import', 'tsx'];
    /** The four proxies, newly started, each warmed up: every hot path compiled before anything is measured. */
    const startProxies = async (round: number) => {
      const bare = await start([...tsx, join(root, 'bench/bare-proxy.ts'), upstream.url], /listening on (http:\/\/\S+)/);
      procs.push(bare);
      const bareSigning = await start([...tsx, join(root, 'bench/bare-proxy.ts'), upstream.url, 'sign'], /listening on (http:\/\/\S+)/);
      procs.push(bareSigning);
      const gateway = await start(
        [...tsx, join(root, 'bench/gateway-server.ts'), upstream.url, 'plain', join(work, `plain-${round}.token`)],
        /listening on (http:\/\/\S+)/,
      );
      procs.push(gateway);
      const signed = await start(
        [...tsx, join(root, 'bench/gateway-server.ts'), upstream.url, 'signed', join(work, `signed-${round}.token`)],
        /listening on (http:\/\/\S+)/,
      );
      procs.push(signed);
      const auth = (file: string) => ({ authorization: `Bearer ${readFileSync(join(work, file), 'utf8')}` });
      const plainAuth = auth(`plain-${round}.token`);
      const signedAuth = auth(`signed-${round}.token`);
      await cannon(bare.url, {}, 1);
      await cannon(bareSigning.url, {}, 1);
      await cannon(gateway.url, plainAuth, 1);
      await cannon(signed.url, signedAuth, 1);
      return { bare, bareSigning, gateway, signed, plainAuth, signedAuth };
    };
    const rounds: Round[] = [];
    const p99: Record<string, number> = {};
    // Every round has its own processes: how V8 compiles a hot function is settled once per
    // process and can move its CPU per request by a tenth (docs/performance.md, 2026-11-28
    // afternoon), so one set of processes for all rounds would give every round the same draw.
    for (let r = 0; r < ROUNDS; r++) {
      const { bare, bareSigning, gateway, signed, plainAuth, signedAuth } = await startProxies(r);
      const b = await cannon(bare.url);
      const g = await cannon(gateway.url, plainAuth);
      const s = await cannon(signed.url, signedAuth);
      const bs = await cannon(bareSigning.url);
      const bc = await cpuPerRequest(bare, bare.url);
      const gc = await cpuPerRequest(gateway, gateway.url, plainAuth);
      const sc = await cpuPerRequest(signed, signed.url, signedAuth);
      const bsc = await cpuPerRequest(bareSigning, bareSigning.url);
      for (const p of procs) await stop(p);
      procs = [];
      rounds.push({
        bare: b.rps,
        gateway: g.rps,
        signed: s.rps,
        bare_signing: bs.rps,
        bare_cpu_us: bc.all,
        gateway_cpu_us: gc.all,
        signed_cpu_us: sc.all,
        bare_signing_cpu_us: bsc.all,
      });
      if (r === 0) Object.assign(p99, { bare_proxy: b.p99, gateway: g.p99, gateway_signed: s.p99, bare_signing_proxy: bs.p99 });
    }
    const ratio = median(rounds.map((r) => r.gateway / r.bare));
    const signedRatio = median(rounds.map((r) => r.signed / r.bare));
    const assertionCost = median(rounds.map((r) => r.signed / r.gateway));
    const signingCeiling = median(rounds.map((r) => r.bare_signing / r.bare));
    const rate = (pick: (r: Round) => number) => median(rounds.map(pick));
    const spread = (pick: (r: Round) => number) => (ROUNDS > 1 ? `   rounds ${rounds.map((r) => fmt(pick(r))).join(' / ')}` : '');
    report('');
    report('gateway, upstream mode: GET / proxied to the bare Fastify route (sqlite store, bearer checked on every request)');
    report(`  baseline  bare reverse proxy, no auth        ${fmt(rate((r) => r.bare)).padStart(8)} req/s   1.00x${spread((r) => r.bare)}`);
    report(
      `  gateway   authenticated, proxied             ${fmt(rate((r) => r.gateway)).padStart(8)} req/s   ${ratio.toFixed(2)}x   (goal >= 0.90x)${spread((r) => r.gateway)}`,
    );
    report(
      `  signed    + Svc-Assertion (EdDSA, per req)   ${fmt(rate((r) => r.signed)).padStart(8)} req/s   ${signedRatio.toFixed(2)}x   (goal >= 0.75x; ${assertionCost.toFixed(2)} of unsigned: the assertion costs ${((1 - assertionCost) * 100).toFixed(0)}%)${spread((r) => r.signed)}`,
    );
    report(
      `  ceiling   bare proxy + one Ed25519 sign      ${fmt(rate((r) => r.bare_signing)).padStart(8)} req/s   ${signingCeiling.toFixed(2)}x   (what this machine allows any proxy that signs each request)${spread((r) => r.bare_signing)}`,
    );
    const cpu = {
      bare: rate((r) => r.bare_cpu_us),
      gateway: rate((r) => r.gateway_cpu_us),
      signed: rate((r) => r.signed_cpu_us),
      bare_signing: rate((r) => r.bare_signing_cpu_us),
    };
    report(
      `  cpu       proxy process per request (${fmt(CPU_REQUESTS)} requests): bare ${cpu.bare.toFixed(0)} µs, gateway ${cpu.gateway.toFixed(0)} µs, signed ${cpu.signed.toFixed(0)} µs, bare + sign ${cpu.bare_signing.toFixed(0)} µs`,
    );
    return {
      rounds: ROUNDS,
      cpu_requests: CPU_REQUESTS,
      cpu_us_per_request: cpu,
      bare_proxy_rps: rate((r) => r.bare),
      gateway_rps: rate((r) => r.gateway),
      gateway_ratio: ratio,
      signed_rps: rate((r) => r.signed),
      signed_ratio: signedRatio,
      signed_vs_unsigned: assertionCost,
      bare_signing_proxy_rps: rate((r) => r.bare_signing),
      signing_ceiling_ratio: signingCeiling,
      p99_ms: p99,
      per_round: rounds,
    };
  } finally {
    for (const p of procs) await stop(p);
    rmSync(work, { recursive: true, force: true });
  }
}

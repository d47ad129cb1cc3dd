// `npm run bench`: starts the real server (`svc auth serve`, a separate process) and a bare
// Fastify route (the baseline, also a separate process), drives both with autocannon from
// this process on the same 2-core machine, and reports every figure as a ratio to the
// baseline measured in this same run. Figures are written to bench/results/.
//
// BENCH_ONLY=name[,name...] runs only those scenarios: the stores (`sqlite`, `postgres`),
// `postgres-nodes` (two nodes writing at once), `scale`, `dpop` (a DPoP-checked request beside a
// bearer one), `gateway-upstream`, `gateway-routes` (100 routes against 1), `gateway-modules`,
// `peers` (oidc-provider's introspection and better-auth's get-session beside svc's bearer
// check), `people` (a group policy and user pages at 1,000,000 users); its figures go to
// bench/results/latest-<names>.{json,txt}.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { measureGatewayModules } from './gateway-modules.js';
import { measureGatewayRoutes } from './gateway-routes.js';
import { measureGatewayUpstream } from './gateway-upstream.js';
import {
  analyzePostgresSchema,
  anonMiB,
  type Chain,
  type Cost,
  costOf,
  type Device,
  dpopProof,
  insertPostgresSessions,
  libpqEnv,
  login,
  loginRequests,
  PG_SEED_SESSIONS,
  PG_URL,
  type Proc,
  postgresMicros,
  root,
  rotationRequest,
  rssMiB,
  setupProject,
  shownPgUrl,
  start,
  started,
  stop,
  svc,
} from './harness.js';
import { measurePeers, peerTargets } from './peers.js';
import { measurePeople } from './people.js';
import { measurePostgresNodes } from './pg-nodes.js';
import { seedSessions } from './seed.js';
import { ed25519VerifyRate, reportTargets, type TargetFigure } from './targets.js';

const DURATION = Number(process.env.BENCH_SECONDS ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const SEED = Number(process.env.BENCH_SESSIONS ?? 1_000_000);
// This VM's speed drifts between seconds: every figure is taken in ROUNDS rounds, each right
// after its own baseline, and the median ratio is reported.
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const ONLY = process.env.BENCH_ONLY === undefined ? null : process.env.BENCH_ONLY.split(',');
const runs = (scenario: string) => ONLY === null || ONLY.includes(scenario);

async function cannon(opts: autocannon.Options): Promise<{ rps: number; errors: number; non2xx: number; p99: number }> {
  const result = await autocannon({ connections: CONNECTIONS, duration: DURATION, ...opts });
  return { rps: result.requests.average, errors: result.errors, non2xx: result.non2xx, p99: result.latency.p99 };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

/** Server CPU microseconds per operation of each server a store's figures measure (null where that server does not run). */
interface ServerCpu {
  baseline: number;
  bearer: number;
  login: number;
  refresh: number;
  login_floor: number;
  login_stored_floor: number | null;
  bearer_ceiling: number | null;
}

interface StoreFigures {
  baseline: number;
  bearer: number;
  logins: number;
  refresh: number;
  /** Raw Ed25519 verifications per second on one core of the bench process, measured right after the logins. */
  ed25519_verify: number;
  /** The same logins against the storage-free login server (bench/login-floor-server.ts), right after. */
  login_floor: number;
  /** The same logins against that server keeping them in a SQLite file or PostgreSQL schema of its own (`login-floor-server.ts sqlite|postgres`), right after. */
  login_stored_floor: number | null;
  /** The same bearer requests to the read-only ceiling (bench/sqlite-read-server.ts, bench/pg-read-server.ts), right after svc's. */
  bearer_ceiling: number | null;
  /** Server CPU microseconds per bare-route request, per bearer check, per complete login, per rotation, per storage-free login. */
  cpu_us: ServerCpu;
  /** PostgreSQL's own CPU microseconds (every postgres process) per bearer check, complete login, rotation and ceiling check; null on SQLite. */
  db_us: { bearer: number; login: number; refresh: number; bearer_ceiling: number; login_stored_floor: number | null } | null;
  /** The load generator's (this process's) CPU microseconds per complete login, against each server. */
  client_us: { login: number; login_floor: number };
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
  ratios: {
    bearer: number;
    logins: number;
    refresh: number;
    logins_vs_ed25519: number;
    floor_vs_ed25519: number;
    bearer_ceiling: number | null;
  };
  cpu: ServerCpu & { client_login: number; client_login_floor: number };
  /** PostgreSQL's CPU µs per operation (medians), null on SQLite. */
  db: { bearer: number; login: number; refresh: number; bearer_ceiling: number; login_stored_floor: number | null } | null;
  /** Storage-free login server's CPU per login / svc's (per round, median): 1 / the issue's "x times the floor". */
  floorCpuRatio: number;
  /** The same with PostgreSQL's CPU added to svc's (null on SQLite). */
  floorCpuRatioWithDb: number | null;
  /** Storage-free login server's CPU per login / the same server's keeping them in the store's database (per round, median); its own CPU only, PostgreSQL's beside it in `db`. */
  storedFloorCpuRatio: number | null;
  rates: { baseline: number; bearer: number; logins: number; refresh: number };
}

function summarize(rounds: StoreFigures[]): RoundedFigures {
  return {
    rounds,
    ratios: {
      bearer: median(rounds.map((r) => r.bearer / r.baseline)),
      logins: median(rounds.map((r) => r.logins / r.baseline)),
      refresh: median(rounds.map((r) => r.refresh / r.baseline)),
      logins_vs_ed25519: median(rounds.map((r) => r.logins / r.ed25519_verify)),
      floor_vs_ed25519: median(rounds.map((r) => r.login_floor / r.ed25519_verify)),
      bearer_ceiling: rounds.every((r) => r.bearer_ceiling !== null)
        ? median(rounds.map((r) => (r.bearer_ceiling as number) / r.baseline))
        : null,
    },
    cpu: {
      baseline: median(rounds.map((r) => r.cpu_us.baseline)),
      bearer: median(rounds.map((r) => r.cpu_us.bearer)),
      login: median(rounds.map((r) => r.cpu_us.login)),
      refresh: median(rounds.map((r) => r.cpu_us.refresh)),
      login_floor: median(rounds.map((r) => r.cpu_us.login_floor)),
      login_stored_floor: rounds.every((r) => r.cpu_us.login_stored_floor !== null)
        ? median(rounds.map((r) => r.cpu_us.login_stored_floor as number))
        : null,
      bearer_ceiling: rounds.every((r) => r.cpu_us.bearer_ceiling !== null)
        ? median(rounds.map((r) => r.cpu_us.bearer_ceiling as number))
        : null,
      client_login: median(rounds.map((r) => r.client_us.login)),
      client_login_floor: median(rounds.map((r) => r.client_us.login_floor)),
    },
    db: rounds.every((r) => r.db_us !== null)
      ? {
          bearer: median(rounds.map((r) => r.db_us?.bearer as number)),
          login: median(rounds.map((r) => r.db_us?.login as number)),
          refresh: median(rounds.map((r) => r.db_us?.refresh as number)),
          bearer_ceiling: median(rounds.map((r) => r.db_us?.bearer_ceiling as number)),
          login_stored_floor: rounds.every((r) => typeof r.db_us?.login_stored_floor === 'number')
            ? median(rounds.map((r) => r.db_us?.login_stored_floor as number))
            : null,
        }
      : null,
    floorCpuRatio: median(rounds.map((r) => r.cpu_us.login_floor / r.cpu_us.login)),
    floorCpuRatioWithDb: rounds.every((r) => r.db_us !== null)
      ? median(rounds.map((r) => r.cpu_us.login_floor / (r.cpu_us.login + (r.db_us?.login as number))))
      : null,
    storedFloorCpuRatio: rounds.every((r) => r.cpu_us.login_stored_floor !== null)
      ? median(rounds.map((r) => r.cpu_us.login_floor / (r.cpu_us.login_stored_floor as number)))
      : null,
    rates: {
      baseline: median(rounds.map((r) => r.baseline)),
      bearer: median(rounds.map((r) => r.bearer)),
      logins: median(rounds.map((r) => r.logins)),
      refresh: median(rounds.map((r) => r.refresh)),
    },
  };
}

/**
 * Bearer validation, complete logins and refresh rotations against `server`, each beside a
 * fresh baseline; the logins also against `floor`, the storage-free login server, and on
 * against `storedFloor`, the same server keeping them in a SQLite file or its own PostgreSQL schema; the bearer
 * requests also against `readCeiling`, the least a check that answers from the store's truth does
 * (bench/sqlite-read-server.ts, bench/pg-read-server.ts).
 */
async function measure(
  server: Proc,
  bare: Proc,
  floor: Proc,
  devices: Device[],
  store: 'sqlite' | 'postgres',
  readCeiling: Proc | null,
  storedFloor: Proc | null,
): Promise<StoreFigures> {
  const first = devices[0] as Device;
  const session = await login(server.url, first.key, first.pub);
  const bearerHeaders = { authorization: `Bearer ${session.access_token}` };
  // On PostgreSQL every figure also counts the database's own CPU (harness `postgresMicros`).
  const db = store === 'postgres' ? { also: postgresMicros } : {};
  const baseline = await costOf(bare, () => autocannon({ connections: CONNECTIONS, duration: DURATION, url: bare.url }));
  // Every figure's run also gives what it cost the server in CPU time (harness `costOf`, which throws on any non-2xx).
  const bearer = await costOf(
    server,
    () => autocannon({ connections: CONNECTIONS, duration: DURATION, url: `${server.url}/v1/auth/me`, headers: bearerHeaders }),
    1,
    db,
  );
  // The least a check that answers from the store's truth must do, with the same token, right after.
  const bearerCeiling =
    readCeiling === null
      ? null
      : await costOf(
          readCeiling,
          () => autocannon({ connections: CONNECTIONS, duration: DURATION, url: readCeiling.url, headers: bearerHeaders }),
          1,
          db,
        );

  // Complete logins: a challenge, then the signed session, per connection in sequence.
  const logins = await costOf(
    server,
    () => autocannon({ connections: CONNECTIONS, duration: DURATION, url: server.url, requests: loginRequests(devices) }),
    2,
    db,
  );
  const verifyRate = ed25519VerifyRate(1000);
  // What the machine allows: the same requests from the same load generator, to a server that
  // stores nothing (the load generator signs each challenge, so it takes a core's share too).
  const floorLogins = await costOf(
    floor,
    () => autocannon({ connections: CONNECTIONS, duration: DURATION, url: floor.url, requests: loginRequests(devices) }),
    2,
  );
  // The least a login that keeps its challenge, session and audit row durably must cost.
  const storedFloorLogins =
    storedFloor === null
      ? null
      : await costOf(
          storedFloor,
          () => autocannon({ connections: CONNECTIONS, duration: DURATION, url: storedFloor.url, requests: loginRequests(devices) }),
          2,
          db,
        );

  // Refresh rotations: every connection rotates its own session's chain (harness `rotationRequest`).
  const chains: Chain[] = [];
  for (let i = 0; i < CONNECTIONS * 4; i++) {
    const d = devices[i % devices.length] as Device;
    chains.push({ token: (await login(server.url, d.key, d.pub)).refresh_token, key: d.key });
  }
  const rotation = rotationRequest(chains, `${server.url}/v1/auth/refresh`);
  const refresh = await costOf(
    server,
    () =>
      autocannon({
        connections: CONNECTIONS,
        duration: DURATION,
        url: `${server.url}/v1/auth/refresh`,
        requests: Array.from({ length: 20_000 }, () => rotation),
      }),
    1,
    db,
  );
  return {
    baseline: baseline.rps,
    bearer: bearer.rps,
    logins: logins.rps,
    refresh: refresh.rps,
    ed25519_verify: verifyRate,
    login_floor: floorLogins.rps,
    login_stored_floor: storedFloorLogins?.rps ?? null,
    bearer_ceiling: bearerCeiling?.rps ?? null,
    cpu_us: {
      baseline: baseline.all,
      bearer: bearer.all,
      login: logins.all,
      refresh: refresh.all,
      login_floor: floorLogins.all,
      login_stored_floor: storedFloorLogins?.all ?? null,
      bearer_ceiling: bearerCeiling?.all ?? null,
    },
    db_us:
      store === 'postgres'
        ? {
            bearer: bearer.also as number,
            login: logins.also as number,
            refresh: refresh.also as number,
            bearer_ceiling: bearerCeiling?.also as number,
            login_stored_floor: storedFloorLogins?.also ?? null,
          }
        : null,
    client_us: { login: logins.client, login_floor: floorLogins.client },
    p99: { baseline: baseline.p99 },
  };
}

/** `GET /v1/auth/me` (or the bare route, which ignores it) with the next token of `tokens` on every request. */
function cannonOver(url: string, path: string, tokens: readonly string[]) {
  return cannon(overTokens(url, path, tokens));
}

/** The autocannon options of {@link cannonOver}. */
function overTokens(url: string, path: string, tokens: readonly string[]): autocannon.Options {
  let i = 0;
  return {
    connections: CONNECTIONS,
    duration: DURATION,
    url,
    requests: [
      {
        method: 'GET',
        path,
        setupRequest: (req) => ({ ...req, headers: { ...req.headers, authorization: `Bearer ${tokens[i++ % tokens.length]}` } }),
      },
    ],
  };
}

/**
 * The cost of a DPoP-checked request (RFC 9449) beside a bearer one, on one SQLite server with
 * the default `:auth/sender-constraint :refresh` (which accepts a bound session's access token
 * either way): `GET /v1/auth/me` as `Authorization: Bearer`, then as `Authorization: DPoP` with
 * a fresh proof per request (signed by the load generator: its cost is reported apart). The
 * check is one Ed25519 verification and one replay-cache insert (a store write) per request.
 * What this machine allows it: the bare route behind the least a DPoP check must do (bench/
 * bare-server.ts `verify-dpop`: one Ed25519 verification), in the same rounds.
 */
async function measureDpop(bare: Proc, dir: string, report: (line: string) => void) {
  const { devices } = setupProject(dir, 'sqlite', '');
  const server = await start([svc, 'auth', 'serve', '--listen', '127.0.0.1:0', dir], /listening on (http:\/\/\S+)/);
  const ceiling = await start(['--import', 'tsx', join(root, 'bench/bare-server.ts'), 'verify-dpop'], /listening on (http:\/\/\S+)/);
  try {
    const device = devices[0] as Device;
    const session = await login(server.url, device.key, device.pub);
    const me = `${server.url}/v1/auth/me`;
    const bearerRun = () =>
      autocannon({ connections: CONNECTIONS, duration: DURATION, url: me, headers: { authorization: `Bearer ${session.access_token}` } });
    const dpopRun = () =>
      autocannon({
        connections: CONNECTIONS,
        duration: DURATION,
        url: me,
        requests: [
          {
            method: 'GET',
            setupRequest: (req) => ({
              ...req,
              headers: {
                ...req.headers,
                authorization: `DPoP ${session.access_token}`,
                dpop: dpopProof(device.key, 'GET', me, session.access_token),
              },
            }),
          },
        ],
      });
    const ceilingRun = () =>
      autocannon({
        connections: CONNECTIONS,
        duration: DURATION,
        url: ceiling.url,
        requests: [
          {
            method: 'GET',
            setupRequest: (req) => ({
              ...req,
              headers: { ...req.headers, dpop: dpopProof(device.key, 'GET', ceiling.url, session.access_token) },
            }),
          },
        ],
      });
    await bearerRun();
    await dpopRun();
    await ceilingRun();
    const rounds: { baseline: Cost; bearer: Cost; dpop: Cost; ceiling: Cost }[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const baseline = await costOf(bare, () => autocannon({ connections: CONNECTIONS, duration: DURATION, url: bare.url }));
      rounds.push({
        baseline,
        bearer: await costOf(server, bearerRun),
        dpop: await costOf(server, dpopRun),
        ceiling: await costOf(ceiling, ceilingRun),
      });
    }
    const m = (pick: (r: (typeof rounds)[number]) => number) => median(rounds.map(pick));
    const figures = {
      rounds: ROUNDS,
      baseline_rps: m((r) => r.baseline.rps),
      bearer_rps: m((r) => r.bearer.rps),
      dpop_rps: m((r) => r.dpop.rps),
      bearer_ratio: m((r) => r.bearer.rps / r.baseline.rps),
      dpop_ratio: m((r) => r.dpop.rps / r.baseline.rps),
      dpop_vs_bearer: m((r) => r.dpop.rps / r.bearer.rps),
      ceiling_rps: m((r) => r.ceiling.rps),
      ceiling_ratio: m((r) => r.ceiling.rps / r.baseline.rps),
      server_cpu_us: {
        baseline: m((r) => r.baseline.all),
        bearer: m((r) => r.bearer.all),
        dpop: m((r) => r.dpop.all),
        ceiling: m((r) => r.ceiling.all),
      },
      client_cpu_us: { bearer: m((r) => r.bearer.client), dpop: m((r) => r.dpop.client) },
      ed25519_verify_per_s: ed25519VerifyRate(1000),
    };
    const cpu = (us: number) => `${us.toFixed(0)} µs server CPU`;
    report('');
    report('DPoP (RFC 9449): GET /v1/auth/me on SQLite, bearer vs DPoP-checked (one Ed25519 verification + one replay-cache insert)');
    report(
      `  baseline  bare Fastify route          ${fmt(figures.baseline_rps).padStart(8)} req/s   1.00x   ${cpu(figures.server_cpu_us.baseline)}`,
    );
    report(
      `  bearer    Authorization: Bearer       ${fmt(figures.bearer_rps).padStart(8)} req/s   ${figures.bearer_ratio.toFixed(2)}x   ${cpu(figures.server_cpu_us.bearer)}`,
    );
    report(
      `  dpop      Authorization: DPoP + proof ${fmt(figures.dpop_rps).padStart(8)} req/s   ${figures.dpop_ratio.toFixed(2)}x   ${cpu(figures.server_cpu_us.dpop)}   ${figures.dpop_vs_bearer.toFixed(2)}x of bearer`,
    );
    report(
      `  ceiling   bare route + 1 verification ${fmt(figures.ceiling_rps).padStart(8)} req/s   ${figures.ceiling_ratio.toFixed(2)}x   ${cpu(figures.server_cpu_us.ceiling)}   what this machine allows a DPoP-checked request`,
    );
    report(
      `            the check costs ${(figures.server_cpu_us.dpop - figures.server_cpu_us.bearer).toFixed(0)} µs server CPU per request; the load generator signs each proof on the same cores (${figures.client_cpu_us.dpop.toFixed(0)} µs per request vs ${figures.client_cpu_us.bearer.toFixed(0)}); raw Ed25519 verifications: ${fmt(figures.ed25519_verify_per_s)}/s on one core`,
    );
    return figures;
  } finally {
    await stop(server);
    await stop(ceiling);
  }
}

const SMALL_STORE = 1_000;
// More distinct sessions than the SQLite store's bearer-check cache holds (10,000), checked in
// turn: every check misses the cache and reads the table.
const COLD_TOKENS = 20_000;

/** Sets (or, with null, removes) the SQLite addon's `:store/bearer-cache-sessions` in a project's `project.edn`. */
function setBearerCache(dir: string, sessions: number | null): void {
  const file = join(dir, 'project.edn');
  const plain = ':store {:package "svc-store-sqlite" :activate [:svc/store]';
  const edn = readFileSync(file, 'utf8').replace(/ :config \{:store\/bearer-cache-sessions \d+\}/, '');
  if (!edn.includes(plain)) throw new Error(`bench: ${file} has no plain SQLite store module`);
  writeFileSync(file, sessions === null ? edn : edn.replace(plain, `${plain} :config {:store/bearer-cache-sessions ${sessions}}`));
}

/**
 * Bearer validation with 1,000 sessions in the store and then with SEED (1,000,000), on a fresh
 * project. With the bearer-check cache (the default): the same 1,000 tokens in turn in both
 * stores. Without it (`:store/bearer-cache-sessions 0`, every check a store read): the 1,000
 * tokens of the small store against 20,000 tokens spread evenly over the big one. And the big
 * store with the cache and those 20,000 tokens, more than it keeps: the worst case, every check
 * a miss. Each figure is a ratio to the bare route driven the same way just before it.
 */
async function measureScale(bare: Proc, dir: string, report: (line: string) => void) {
  const { controlDb } = setupProject(dir, 'sqlite', '');
  const serve = () => start([svc, 'auth', 'serve', '--listen', '127.0.0.1:0', dir], /listening on (http:\/\/\S+)/);
  // Like the main figures: ROUNDS rounds, each right after its own baseline; medians.
  const ratio = async (server: Proc, tokens: readonly string[]) => {
    await cannonOver(server.url, '/v1/auth/me', tokens.slice(0, 100));
    const rps: number[] = [];
    const ratios: number[] = [];
    const cpu: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const base = await cannonOver(bare.url, '/', tokens);
      // costOf throws on any error or non-2xx answer.
      const run = await costOf(server, () => autocannon(overTokens(server.url, '/v1/auth/me', tokens)));
      cpu.push(run.all);
      rps.push(run.rps);
      ratios.push(run.rps / base.rps);
    }
    return { rps: median(rps), ratio: median(ratios), cpuUs: median(cpu) };
  };
  const hot = seedSessions(controlDb, { from: 0, to: SMALL_STORE }, SMALL_STORE);
  let server = await serve();
  const smallCached = await ratio(server, hot);
  const rssSmall = rssMiB(server);
  const anonSmall = anonMiB(server);
  await stop(server);
  setBearerCache(dir, 0);
  server = await serve();
  const smallUncached = await ratio(server, hot);
  await stop(server);

  const t0 = Date.now();
  const cold = seedSessions(controlDb, { from: SMALL_STORE, to: SEED }, COLD_TOKENS);
  const seedS = (Date.now() - t0) / 1000;
  // The control database on disk after the seed (checkpointed: the WAL is empty).
  const onDisk = (f: string) => (existsSync(f) ? statSync(f).size : 0);
  const diskMiB = Math.round((onDisk(controlDb) + onDisk(`${controlDb}-wal`)) / 2 ** 20);
  server = await serve();
  const bigUncached = await ratio(server, cold);
  await stop(server);
  setBearerCache(dir, null);
  server = await serve();
  const bigCached = await ratio(server, hot);
  const rssBig = rssMiB(server);
  const anonBig = anonMiB(server);
  const bigMisses = await ratio(server, cold);
  const anonMisses = anonMiB(server);
  // A second pass over the same 20,000: the caches are full, so memory must stay where it is.
  await ratio(server, cold);
  const anonMisses2 = anonMiB(server);
  await stop(server);

  const line = (label: string, f: { rps: number; ratio: number; cpuUs: number }, vs?: { ratio: number }) =>
    report(
      `  ${label.padEnd(62)} ${fmt(f.rps).padStart(8)} req/s   ${f.ratio.toFixed(2)}x   ${f.cpuUs.toFixed(0).padStart(3)} µs CPU${vs ? `   (${(f.ratio / vs.ratio).toFixed(2)} of the small store)` : ''}`,
    );
  report('');
  report(
    `scale: sqlite, a fresh project; every request checks the next of many tokens (seeded ${fmt(SEED)} in ${seedS.toFixed(0)}s; control database ${fmt(diskMiB)} MiB on disk)`,
  );
  line(`cache on:  ${fmt(SMALL_STORE)} sessions, their ${fmt(SMALL_STORE)} tokens`, smallCached);
  line(`cache on:  ${fmt(SEED)} sessions, the same ${fmt(SMALL_STORE)} tokens`, bigCached, smallCached);
  line(`cache off: ${fmt(SMALL_STORE)} sessions, their ${fmt(SMALL_STORE)} tokens`, smallUncached);
  line(`cache off: ${fmt(SEED)} sessions, ${fmt(COLD_TOKENS)} tokens spread over them`, bigUncached, smallUncached);
  line(`cache on:  ${fmt(SEED)} sessions, ${fmt(COLD_TOKENS)} tokens (every check a miss)`, bigMisses, smallCached);
  report(
    `  memory    server RSS ${rssSmall} MiB (${anonSmall} MiB anonymous) with ${fmt(SMALL_STORE)} sessions, ${rssBig} MiB (${anonBig} MiB) with ${fmt(SEED)}`,
  );
  report(
    `  memory    anonymous ${anonMisses} MiB after the ${fmt(COLD_TOKENS)}-token pass, ${anonMisses2} MiB after a second one (caches full)`,
  );
  return {
    sessions: { small: SMALL_STORE, big: SEED },
    seed_s: seedS,
    disk_mib: diskMiB,
    cached: { small: smallCached, big_same_tokens: bigCached, big_vs_small: bigCached.ratio / smallCached.ratio },
    uncached: {
      small: smallUncached,
      big_spread_tokens: bigUncached,
      tokens: COLD_TOKENS,
      big_vs_small: bigUncached.ratio / smallUncached.ratio,
    },
    cached_all_misses: { ...bigMisses, vs_small_cached: bigMisses.ratio / smallCached.ratio },
    rss_mib: { small: rssSmall, big: rssBig },
    rss_anon_mib: { small: anonSmall, big: anonBig, after_miss_pass: anonMisses, after_second_miss_pass: anonMisses2 },
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
  const targets: TargetFigure[] = [];
  try {
    const bare = await start(['--import', 'tsx', join(root, 'bench/bare-server.ts')], /listening on (http:\/\/\S+)/);
    report(
      `svc auth benchmark: ${DURATION}s per figure, ${CONNECTIONS} connections, server and load generator on one ${cpus().length}-core machine, server log level error`,
    );
    report(
      `every figure is also a ratio to the bare Fastify route measured just before it; ${ROUNDS} rounds, medians shown (rates: median of each figure; ratios: median of the per-round ratios)`,
    );
    const configured = (process.env.BENCH_STORES ?? 'sqlite,postgres').split(',') as ('sqlite' | 'postgres')[];
    const stores = configured.filter(runs);
    const floor =
      stores.length > 0 ? await start(['--import', 'tsx', join(root, 'bench/login-floor-server.ts')], /listening on (http:\/\/\S+)/) : null;
    for (const store of stores) {
      const dir = join(work, store);
      const { devices, controlDb } = setupProject(dir, store, pgSchema);
      if (store === 'postgres') insertPostgresSessions(pgSchema, 'ses_SEED', PG_SEED_SESSIONS);
      // The storage-free login server keeping its logins in a SQLite file, or a PostgreSQL schema, of its own.
      const storedFloor =
        store === 'sqlite'
          ? await start(['--import', 'tsx', join(root, 'bench/login-floor-server.ts'), 'sqlite'], /listening on (http:\/\/\S+)/)
          : await start(
              ['--import', 'tsx', join(root, 'bench/login-floor-server.ts'), 'postgres', `${pgSchema}_floor`],
              /listening on (http:\/\/\S+)/,
              { FLOOR_PG_URL: PG_URL },
            );
      const rounds: StoreFigures[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        // Each round starts svc, the bare route and the read ceiling anew: how V8 compiles a
        // process's hot paths is drawn once per process and moves its CPU per request by up to a
        // fifth, so the median of the rounds is over three draws of each, not one (docs/performance.md,
        // 2026-11-29 at 07:00).
        const server = await start([svc, 'auth', 'serve', '--listen', '127.0.0.1:0', dir], /listening on (http:\/\/\S+)/);
        const roundBare = await start(['--import', 'tsx', join(root, 'bench/bare-server.ts')], /listening on (http:\/\/\S+)/);
        // The read-only ceiling of a bearer check, on the same store: the project's SQLite file, or its PostgreSQL schema.
        const readCeiling =
          store === 'postgres'
            ? await start(['--import', 'tsx', join(root, 'bench/pg-read-server.ts'), pgSchema], /listening on (http:\/\/\S+)/, {
                PG_READ_URL: PG_URL,
              })
            : await start(['--import', 'tsx', join(root, 'bench/sqlite-read-server.ts'), controlDb], /listening on (http:\/\/\S+)/);
        // Warm-up: every server's hot paths compiled before anything is measured.
        const warm = await login(server.url, (devices[0] as Device).key, (devices[0] as Device).pub);
        const bearer = { authorization: `Bearer ${warm.access_token}` };
        await cannon({ url: roundBare.url, duration: 1 });
        await cannon({ url: `${server.url}/v1/auth/me`, headers: bearer, duration: 1 });
        await cannon({ url: readCeiling.url, headers: bearer, duration: 1 });
        // As autovacuum would have by then in service (harness analyzePostgresSchema).
        if (store === 'postgres') analyzePostgresSchema(pgSchema);
        rounds.push(await measure(server, roundBare, floor as Proc, devices, store, readCeiling, storedFloor));
        for (const p of [server, roundBare, readCeiling]) await stop(p);
      }
      const summary = summarize(rounds);
      const f = { ...summary.rates, p99: (rounds[0] as StoreFigures).p99 };
      const durability =
        store === 'sqlite'
          ? 'WAL, synchronous=NORMAL; enrollments, revocations, removals, reuse, bootstrap and pairing commits fsynced'
          : `PostgreSQL ${shownPgUrl()}, synchronous_commit=on; seeded with ${fmt(PG_SEED_SESSIONS)} sessions, analyzed before each round`;
      report('');
      report(`store: ${store} (${durability})`);
      const spread = (pick: (r: StoreFigures) => number) => (ROUNDS > 1 ? `   rounds ${rounds.map((r) => fmt(pick(r))).join(' / ')}` : '');
      const dbUs = summary.db;
      // On PostgreSQL, the database's own CPU per operation beside the server's.
      const cpu = (us: number, pg?: number) => `${us.toFixed(0)} µs CPU${pg === undefined ? '' : ` + ${pg.toFixed(0)} µs PostgreSQL`}`;
      report(
        `  baseline  bare Fastify route          ${fmt(f.baseline).padStart(8)} req/s   1.00x   ${cpu(summary.cpu.baseline)}${spread((r) => r.baseline)}`,
      );
      report(
        `  bearer    GET /v1/auth/me             ${fmt(f.bearer).padStart(8)} req/s   ${summary.ratios.bearer.toFixed(2)}x   ${cpu(summary.cpu.bearer, dbUs?.bearer)}${spread((r) => r.bearer)}`,
      );
      if (summary.ratios.bearer_ceiling !== null) {
        report(
          `  ceiling   bare route + 1 database read ${fmt(median(rounds.map((r) => r.bearer_ceiling as number))).padStart(7)} req/s   ${summary.ratios.bearer_ceiling.toFixed(2)}x   ${cpu(summary.cpu.bearer_ceiling as number, dbUs?.bearer_ceiling)}   ${store === 'sqlite' ? 'what this machine allows a check against SQLite: rows kept, one freshness read per turn (bench/sqlite-read-server.ts)' : 'what this machine allows a check that reads PostgreSQL per request (bench/pg-read-server.ts)'}${spread((r) => r.bearer_ceiling as number)}`,
        );
      }
      report(
        `  login     challenge + signed session  ${fmt(f.logins).padStart(8)} /s      ${summary.ratios.logins.toFixed(3)}x   ${cpu(summary.cpu.login, dbUs?.login)}   ${summary.ratios.logins_vs_ed25519.toFixed(3)}x of ${fmt(median(rounds.map((r) => r.ed25519_verify)))} raw Ed25519 verifications/s${spread((r) => r.logins)}`,
      );
      report(
        `            server CPU per login ${(1 / summary.floorCpuRatio).toFixed(2)}x the storage-free server's${summary.floorCpuRatioWithDb === null ? '' : ` (${(1 / summary.floorCpuRatioWithDb).toFixed(2)}x with PostgreSQL's)`}${ROUNDS > 1 ? `   rounds ${rounds.map((r) => (r.cpu_us.login / r.cpu_us.login_floor).toFixed(2)).join(' / ')}` : ''}`,
      );
      report(
        `  ceiling   the same logins, no storage ${fmt(median(rounds.map((r) => r.login_floor))).padStart(8)} /s              ${cpu(summary.cpu.login_floor)}   ${summary.ratios.floor_vs_ed25519.toFixed(3)}x of raw Ed25519 (bench/login-floor-server.ts)${spread((r) => r.login_floor)}`,
      );
      if (summary.storedFloorCpuRatio !== null && summary.cpu.login_stored_floor !== null) {
        const stored = summary.cpu.login_stored_floor;
        report(
          `  ceiling   the same logins, kept in ${store === 'sqlite' ? 'SQLite' : 'PostgreSQL'} ${fmt(median(rounds.map((r) => r.login_stored_floor as number))).padStart(store === 'sqlite' ? 4 : 0)} /s              ${cpu(stored, dbUs?.login_stored_floor ?? undefined)}   ${(1 / summary.storedFloorCpuRatio).toFixed(2)}x the storage-free server's CPU; svc's ${(summary.cpu.login / stored).toFixed(2)}x it (login-floor-server.ts ${store})${spread((r) => r.login_stored_floor as number)}`,
        );
      }
      report(
        `            load generator per login: ${summary.cpu.client_login.toFixed(0)} µs CPU (${summary.cpu.client_login_floor.toFixed(0)} against the storage-free server): it signs every challenge on the same cores`,
      );
      report(
        `  refresh   rotation                    ${fmt(f.refresh).padStart(8)} /s      ${summary.ratios.refresh.toFixed(3)}x   ${cpu(summary.cpu.refresh, dbUs?.refresh)}${spread((r) => r.refresh)}`,
      );
      // Issue #31 goals 1 and 3. The login goal is on CPU per login, not on logins/s: the load
      // generator signs every challenge on the same two cores, so a rate mostly measures it.
      // "At most 1.3x (2x) the floor's CPU" is the ratio floor/svc at least 1/1.3 (1/2), so that
      // every figure of the table reads `ratio >= goal`.
      const loginMaxX = store === 'sqlite' ? 1.3 : 2;
      const pgBeside = (us: number | undefined) => (us === undefined ? '' : `; PostgreSQL's own ${us.toFixed(0)} µs beside it`);
      targets.push(
        {
          id: `${store}.bearer`,
          what: `bearer checks (GET /v1/auth/me) / bare Fastify route (${summary.cpu.baseline.toFixed(0)} µs CPU)${pgBeside(dbUs?.bearer)}`,
          ratio: summary.ratios.bearer,
          goal: store === 'sqlite' ? 0.9 : 0.6,
          cpuUs: summary.cpu.bearer,
        },
        {
          id: `${store}.logins.cpu-vs-floor`,
          what: `storage-free login server's CPU per login (${summary.cpu.login_floor.toFixed(0)} µs) / svc's: goal svc at most ${loginMaxX}x it${pgBeside(dbUs?.login)}`,
          ratio: summary.floorCpuRatio,
          goal: Math.round((1 / loginMaxX) * 1000) / 1000,
          cpuUs: summary.cpu.login,
        },
        ...(summary.floorCpuRatioWithDb === null
          ? []
          : [
              {
                id: `${store}.logins.cpu-with-db-vs-floor`,
                what: "the same, svc's CPU with PostgreSQL's added (reported, no goal)",
                ratio: summary.floorCpuRatioWithDb,
                goal: null,
                cpuUs: summary.cpu.login + (dbUs?.login ?? 0),
              },
            ]),
        ...(summary.ratios.bearer_ceiling === null
          ? []
          : [
              {
                id: `${store}.bearer.ceiling`,
                what:
                  store === 'sqlite'
                    ? "a bare Fastify route that checks the token against its session's row in SQLite (rows kept, one `PRAGMA data_version` per turn, as svc's store) / bare Fastify route: what this machine allows a bearer check against SQLite, with no principal, hooks or headers"
                    : `a bare Fastify route that reads the token's session from PostgreSQL per request (batched per turn, as svc's store) / bare Fastify route: what this machine allows a bearer check without a cache${pgBeside(dbUs?.bearer_ceiling)}`,
                ratio: summary.ratios.bearer_ceiling,
                goal: null,
                cpuUs: summary.cpu.bearer_ceiling as number,
              },
            ]),
        {
          id: `${store}.logins`,
          what: 'complete logins / raw Ed25519 verifications (one core)',
          ratio: summary.ratios.logins_vs_ed25519,
          goal: null,
          cpuUs: summary.cpu.login,
        },
        {
          id: `${store}.logins.ceiling`,
          what: 'the same logins to a storage-free Fastify server / raw Ed25519: what this machine allows',
          ratio: summary.ratios.floor_vs_ed25519,
          goal: null,
          cpuUs: summary.cpu.login_floor,
        },
        ...(summary.storedFloorCpuRatio === null
          ? []
          : [
              {
                id: `${store}.logins.storage-ceiling`,
                what: `storage-free login server's CPU per login / the same server's keeping each login's challenge, session and audit row in ${store === 'sqlite' ? 'SQLite' : `PostgreSQL, in the fewest statements, each shared by a turn's logins`} (${(summary.cpu.login_stored_floor as number).toFixed(0)} µs): what this machine allows the cpu-vs-floor goal with durable storage${store === 'postgres' ? pgBeside(summary.db?.login_stored_floor ?? undefined) : ''}`,
                ratio: summary.storedFloorCpuRatio,
                goal: null,
                cpuUs: summary.cpu.login_stored_floor as number,
              },
            ]),
        {
          id: `${store}.refresh`,
          what: 'rotations / bare Fastify route',
          ratio: summary.ratios.refresh,
          goal: null,
          cpuUs: summary.cpu.refresh,
        },
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
        logins_vs_ed25519: summary.ratios.logins_vs_ed25519,
        storage_free_logins_vs_ed25519: summary.ratios.floor_vs_ed25519,
        cpu_us: summary.cpu,
        p99_ms: f.p99,
        per_round: rounds,
      };
      results[store] = figures;
      await stop(storedFloor);
    }
    if (floor !== null) await stop(floor);
    if (runs('scale') && configured.includes('sqlite') && SEED > SMALL_STORE) {
      const scale = await measureScale(bare, join(work, 'scale'), report);
      results.scale = scale;
      targets.push(
        {
          id: 'scale.cached',
          what: `bearer checks with ${fmt(SEED)} sessions / with ${fmt(SMALL_STORE)} (cache on)`,
          ratio: scale.cached.big_vs_small,
          goal: 0.9,
          cpuUs: scale.cached.big_same_tokens.cpuUs,
        },
        {
          id: 'scale.uncached',
          what: `bearer checks with ${fmt(SEED)} sessions / with ${fmt(SMALL_STORE)} (cache off)`,
          ratio: scale.uncached.big_vs_small,
          goal: null,
          cpuUs: scale.uncached.big_spread_tokens.cpuUs,
        },
        {
          id: 'scale.all-misses',
          what: `every check a cache miss, ${fmt(SEED)} sessions / cached, ${fmt(SMALL_STORE)}`,
          ratio: scale.cached_all_misses.vs_small_cached,
          goal: null,
          cpuUs: scale.cached_all_misses.cpuUs,
        },
      );
    }
    if (runs('postgres-nodes') && configured.includes('postgres')) {
      const nodes = await measurePostgresNodes({ seconds: DURATION, connections: CONNECTIONS, rounds: ROUNDS }, report);
      results.postgres_nodes = nodes;
      // Issue #31: each rate against what PostgreSQL alone allows the same operation in the
      // same run (pgbench with its least writes): at least 0.4x. Without pgbench there is no
      // ceiling and so no figure (the report says it was not measured).
      const ceiling = nodes.ceiling;
      if (ceiling !== null) {
        targets.push(
          {
            id: 'postgres.nodes.logins',
            what: `logins/s of two PostgreSQL nodes at once (${fmt(nodes.logins_per_s)}) / pgbench's least-writes logins/s (${fmt(ceiling.login.per_s)}); PostgreSQL's own ${nodes.db_cpu_us.login.toFixed(0)} µs per login beside`,
            ratio: nodes.logins_per_s / ceiling.login.per_s,
            goal: 0.4,
            cpuUs: nodes.cpu_us.login,
          },
          {
            id: 'postgres.nodes.refresh',
            what: `rotations/s of two PostgreSQL nodes at once (${fmt(nodes.rotations_per_s)}) / pgbench's least-writes rotations/s (${fmt(ceiling.rotation.per_s)}); PostgreSQL's own ${nodes.db_cpu_us.rotation.toFixed(0)} µs per rotation beside`,
            ratio: nodes.rotations_per_s / ceiling.rotation.per_s,
            goal: 0.4,
            cpuUs: nodes.cpu_us.rotation,
          },
        );
      }
    }
    if (runs('dpop')) {
      const dpop = await measureDpop(bare, join(work, 'dpop'), report);
      results.dpop = dpop;
      targets.push(
        {
          id: 'dpop.me',
          what: `DPoP-checked GET /v1/auth/me (SQLite) / bare Fastify route (${dpop.server_cpu_us.baseline.toFixed(0)} µs CPU)`,
          ratio: dpop.dpop_ratio,
          goal: 0.7,
          cpuUs: dpop.server_cpu_us.dpop,
        },
        {
          id: 'dpop.me-vs-bearer',
          what: `the same / bearer GET /v1/auth/me on the same server (${dpop.server_cpu_us.bearer.toFixed(0)} µs CPU)`,
          ratio: dpop.dpop_vs_bearer,
          goal: null,
          cpuUs: dpop.server_cpu_us.dpop,
        },
        {
          id: 'dpop.ceiling',
          what: 'the bare route after one Ed25519 verification of the proof (bare-server.ts verify-dpop) / bare route: what this machine allows dpop.me',
          ratio: dpop.ceiling_ratio,
          goal: null,
          cpuUs: dpop.server_cpu_us.ceiling,
        },
      );
    }
    if (runs('gateway-upstream')) {
      const up = await measureGatewayUpstream(bare, report);
      results.gateway_upstream = up;
      targets.push(
        {
          id: 'gateway.upstream',
          what: 'authenticated proxied request / bare @fastify/http-proxy',
          ratio: up.gateway_ratio,
          goal: 0.9,
          cpuUs: up.cpu_us_per_request.gateway,
        },
        {
          id: 'gateway.upstream-signed',
          what: 'the same with Svc-Assertion / bare @fastify/http-proxy',
          ratio: up.signed_ratio,
          goal: 0.75,
          cpuUs: up.cpu_us_per_request.signed,
        },
        {
          id: 'gateway.signing-ceiling',
          what: 'a bare proxy that only signs once per request (Ed25519) / bare proxy: what this machine allows',
          ratio: up.signing_ceiling_ratio,
          goal: null,
          cpuUs: up.cpu_us_per_request.bare_signing,
        },
      );
    }
    if (runs('gateway-routes')) {
      const routes = await measureGatewayRoutes(bare, report);
      results.gateway_routes = routes;
      targets.push({
        id: 'gateway.routes',
        // The cost per proxied request is the gateway's CPU per request (the throughput of this
        // shared machine drifts far more between seconds than 5%): 1 route's over 100 routes'.
        what: `gateway CPU per proxied request, 1 route / ${routes.routes} routes`,
        ratio: routes.cpu_one_vs_many,
        goal: 0.95,
        cpuUs: routes.cpu_us_per_request.many,
      });
    }
    if (runs('gateway-modules')) {
      const modules = await measureGatewayModules(bare, report);
      results.gateway_modules = modules;
      targets.push({
        id: 'gateway.modules',
        what: 'authenticated module route / bare Fastify route',
        ratio: modules.gateway_ratio,
        goal: 0.6,
        cpuUs: modules.cpu_us_per_request.gateway,
      });
      targets.push({
        id: 'gateway.modules.ceiling',
        what: 'the bare route behind a bare proxy (one HTTP hop) / bare route: what this machine allows out of process',
        ratio: modules.hop_ceiling_ratio,
        goal: null,
        cpuUs: modules.cpu_us_per_request.bare_behind_proxy,
      });
    }
    if (runs('peers')) {
      const peers = await measurePeers(bare, report);
      results.peers = peers;
      targets.push(...peerTargets(peers));
    }
    if (runs('people')) {
      const people = await measurePeople(bare, report);
      results.people = people.figures;
      targets.push(...people.targets);
    }
    await stop(bare);
    results.regressions = reportTargets(targets, report, {
      save: process.env.BENCH_SAVE_REFERENCE === '1',
      startedAt: results.started_at as string,
    });
  } finally {
    for (const child of started) if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
    try {
      execFileSync('psql', ['-qc', `DROP SCHEMA IF EXISTS ${pgSchema}, ${pgSchema}_floor CASCADE`], { stdio: 'ignore', env: libpqEnv() });
    } catch {
      // No psql or no server: nothing was created there either.
    }
  }
  const dir = join(root, 'bench/results');
  mkdirSync(dir, { recursive: true });
  const name = ONLY === null ? 'latest' : `latest-${ONLY.join('+')}`;
  writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(join(dir, `${name}.txt`), `${lines.join('\n')}\n`);
  console.log(`figures written to bench/results/${name}.json and ${name}.txt`);
}

await main();

// What the benchmarks share: starting and stopping the real `svc` (a separate process, as a
// user runs it), the sign-in requests, and a project with enrolled devices.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { publicKeyHexOf } from '@svc/core';
import type autocannon from 'autocannon';

export const root = new URL('../', import.meta.url).pathname;
/** The installed `svc` bin, the user's door. */
export const svc = join(root, 'node_modules/.bin/svc');
export const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * The bench's server (the local one of scripts/ensure-postgres.sh) trusts local connections,
 * which the store refuses unless the project accepts it; harmless on a server that asks for a
 * password (the store then neither needs nor warns about it).
 */
const PG_ALLOW_UNAUTHENTICATED = ' :store/allow-unauthenticated true';

/**
 * The environment psql and pgbench connect with: PG_URL as libpq's variables, so that a
 * password in it never appears in a process's arguments.
 */
export function libpqEnv(): NodeJS.ProcessEnv {
  const url = new URL(PG_URL);
  return {
    ...process.env,
    PGHOST: url.hostname,
    PGPORT: url.port === '' ? '5432' : url.port,
    PGUSER: decodeURIComponent(url.username),
    PGDATABASE: decodeURIComponent(url.pathname.slice(1)),
    ...(url.password === '' ? {} : { PGPASSWORD: decodeURIComponent(url.password) }),
  };
}

/** How many sessions the bench puts in a PostgreSQL store before it measures it (see {@link insertPostgresSessions}). */
export const PG_SEED_SESSIONS = Number(process.env.BENCH_PG_SESSIONS ?? 100_000);

/**
 * Inserts `count` live sessions with ids `<prefix>1` to `<prefix><count>`, owned by the first
 * live device of `schema`, straight through SQL: bench rows that are never used (the schema is
 * dropped with the run). The bench seeds a store with them before measuring it, so that it looks
 * like one in service ({@link PG_SEED_SESSIONS}), and the rotation ceiling rotates them.
 *
 * @example
 * insertPostgresSessions(schema, 'ses_SEED', PG_SEED_SESSIONS);
 */
export function insertPostgresSessions(schema: string, prefix: string, count: number): void {
  execFileSync(
    'psql',
    [
      '-Atqc',
      `INSERT INTO ${schema}.sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at, refresh_digest, refresh_expires_at)
    SELECT '${prefix}' || i, 'management', d.subject, d.id, 1, 9999999999999, md5('a' || i) || md5('b' || i), 9999999999999,
           md5('c' || i) || md5('d' || i), 9999999999999
    FROM generate_series(1, ${count}) AS i, (SELECT id, subject FROM ${schema}.devices WHERE removed_at IS NULL ORDER BY id LIMIT 1) AS d`,
    ],
    { env: libpqEnv() },
  );
}

/**
 * ANALYZE of every table of `schema`: what autovacuum does in service within about a minute of
 * a table's first changes, and then as it grows. Each pool connection plans its named
 * statements on their first executions and keeps the plans until the statistics of a table they
 * read change; on a new schema that is while the tables are empty, and a bench run is over
 * before autovacuum's first pass, so without it a run measured a sequential scan of the whole
 * table in the bearer check, the DPoP proof's prune and the audit trail's guard, longer with
 * every round (docs/performance.md, 2026-11-28 night). The bench calls it before each round of a
 * PostgreSQL store it seeded with {@link insertPostgresSessions}.
 *
 * @example
 * analyzePostgresSchema(schema);
 */
export function analyzePostgresSchema(schema: string): void {
  execFileSync(
    'psql',
    [
      '-Atqc',
      `DO $$ DECLARE t text; BEGIN
    FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = '${schema}' LOOP EXECUTE format('ANALYZE %I.%I', '${schema}', t); END LOOP;
  END $$`,
    ],
    { env: libpqEnv() },
  );
}

/** PG_URL as a report shows it: without its password. */
export function shownPgUrl(): string {
  const url = new URL(PG_URL);
  if (url.password !== '') url.password = '***';
  return url.toString();
}

export interface Device {
  key: KeyObject;
  pub: string;
}

export interface Proc {
  child: ChildProcess;
  url: string;
  /** What the ready pattern matched in the process's output (`url` is its first group). */
  match: RegExpExecArray;
}

// Every process this run starts, so that a failing run still stops them all: also when it dies
// of an exception no `finally` sees (one thrown inside autocannon's request builder ends the
// process at once) or is stopped by a signal (Ctrl-C, `timeout`), since servers left running
// would take CPU from every later measurement. Only a SIGKILL of the bench leaves them.
export const started: ChildProcess[] = [];
process.on('exit', () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
  ['SIGHUP', 129],
] as const) {
  // Exiting runs the 'exit' hook above; without a listener Node would end without it.
  process.once(signal, () => process.exit(code));
}

export async function start(args: string[], pattern: RegExp, env: NodeJS.ProcessEnv = {}): Promise<Proc> {
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
        resolve({ child, url: m[1], match: m });
      }
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}: ${err}`)));
  });
}

export async function stop(p: Proc): Promise<void> {
  // Ended already, by itself or by a signal (its 'exit' has fired: nothing to wait for).
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  const done = new Promise((r) => p.child.once('exit', r));
  p.child.kill('SIGTERM');
  await done;
}

export function rssMiB(p: Proc): number {
  const status = readFileSync(`/proc/${p.child.pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return Math.round(kb / 1024);
}

/** The server's resident memory that is its own (heap, SQLite's page cache), not mapped files. */
export function anonMiB(p: Proc): number {
  const status = readFileSync(`/proc/${p.child.pid}/status`, 'utf8');
  return Math.round(Number(/RssAnon:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
}

export async function post(url: string, path: string, body: unknown, token?: string): Promise<Record<string, unknown>> {
  const res = await fetch(url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

export async function login(url: string, key: KeyObject, pub: string): Promise<{ access_token: string; refresh_token: string }> {
  const c = await post(url, '/v1/auth/challenges', { public_key: pub });
  const sig = sign(null, Buffer.from(c.challenge as string), key).toString('hex');
  return (await post(url, '/v1/auth/sessions', { challenge_id: c.challenge_id, signature: sig })) as {
    access_token: string;
    refresh_token: string;
  };
}

/**
 * The autocannon request list of one complete login per pass: a challenge for the next of
 * `devices`, then the session with its signature (the load generator signs, as a device would).
 */
export function loginRequests(devices: readonly Device[]): autocannon.Request[] {
  let n = 0;
  return [
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
        } else {
          // Never the previous pass's challenge: the next request says what was refused.
          context.challenge_id = undefined;
          context.challenge = undefined;
          context.refused = `${status} ${body.slice(0, 200)}`;
        }
      },
    },
    {
      method: 'POST',
      path: '/v1/auth/sessions',
      headers: { 'content-type': 'application/json' },
      setupRequest: (req, ctx: object) => {
        const context = ctx as Record<string, unknown>;
        if (typeof context.challenge !== 'string') {
          // The server's budget is 100 unanswered challenges per source per 60 s, and a load cut
          // short by an `amount` or a duration leaves up to one per connection unanswered.
          throw new Error(`bench: POST /v1/auth/challenges answered ${String(context.refused)}: this login cannot go on`);
        }
        return {
          ...req,
          body: JSON.stringify({
            challenge_id: context.challenge_id,
            signature: sign(null, Buffer.from(context.challenge as string), context.key as KeyObject).toString('hex'),
          }),
        };
      },
    },
  ];
}

/**
 * One refresh rotation of a connection's own chain: the connection takes the next refresh
 * token of `chains` and follows its rotations. autocannon resets a connection's context when
 * it starts its request list over, so a list is this one request repeated many times: a chain
 * lives as long as the list, and a fresh one starts after.
 */
export function rotationRequest(chains: Chain[], url: string): autocannon.Request {
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    setupRequest: (req, ctx: object) => {
      const context = ctx as Record<string, unknown>;
      context.chain ??= chains.pop();
      const chain = context.chain as Chain;
      // Sessions are bound to their device key by default (DPoP): each rotation carries a fresh proof by it.
      return {
        ...req,
        headers: { ...req.headers, dpop: dpopProof(chain.key, 'POST', url) },
        body: JSON.stringify({ refresh_token: context.rt ?? chain.token }),
      };
    },
    onResponse: (status, body, ctx: object) => {
      const context = ctx as Record<string, unknown>;
      if (status === 200) context.rt = (JSON.parse(body) as { refresh_token: string }).refresh_token;
    },
  };
}

/** A session's refresh chain: its first refresh token and the device key it is bound to. */
export interface Chain {
  readonly token: string;
  readonly key: KeyObject;
}

/**
 * A DPoP proof (RFC 9449) by `key` for one request: what every client of a bound session sends.
 *
 * @example
 * headers.dpop = dpopProof(device.key, 'POST', `${url}/v1/auth/refresh`);
 */
export function dpopProof(key: KeyObject, htm: string, htu: string, accessToken?: string): string {
  const b64 = (v: object) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const x = (key.export({ format: 'jwk' }) as { x: string }).x;
  const header = b64({ typ: 'dpop+jwt', alg: 'EdDSA', jwk: { kty: 'OKP', crv: 'Ed25519', x } });
  const claims = b64({
    htm,
    htu,
    iat: Math.floor(Date.now() / 1000),
    jti: randomBytes(16).toString('base64url'),
    ...(accessToken === undefined ? {} : { ath: createHash('sha256').update(accessToken).digest('base64url') }),
  });
  return `${header}.${claims}.${sign(null, Buffer.from(`${header}.${claims}`), key).toString('base64url')}`;
}

/** A project on `store` with 8 enrolled admin devices, made by the `svc` at `bin` (default: this checkout's installed one). */
export function setupProject(
  dir: string,
  store: 'sqlite' | 'postgres',
  pgSchema: string,
  bin: string = svc,
): { devices: Device[]; controlDb: string } {
  const cli = (args: string[]) => execFileSync(process.execPath, [bin, ...args], { encoding: 'utf8' });
  if (store === 'postgres') {
    // An existing project directory with the PostgreSQL addon pinned and selected.
    cli(['auth', 'init', '--json', dir]);
    // The digest of the archive that svc bundles: another checkout's bin has its own build.
    const tree = join(dirname(bin), '../..');
    // Where the build bundles them: the runtime since issue #25, the CLI in older checkouts an A/B run compares with.
    const bundled = ['packages/runtime/addons/SHA256SUMS', 'packages/cli/addons/SHA256SUMS'].map((p) => join(tree, p));
    const sums = readFileSync(bundled.find((p) => existsSync(p)) ?? (bundled[0] as string), 'utf8');
    const digest = /^([0-9a-f]{64}) {2}svc-store-postgres-/m.exec(sums)?.[1] as string;
    cli(['package', 'install', 'svc-store-postgres', '--sha256', digest, dir]);
    const edn = readFileSync(join(dir, 'project.edn'), 'utf8')
      .replace(
        ':store {:package "svc-store-sqlite" :activate [:svc/store]}',
        `:store {:package "svc-store-sqlite" :activate [:svc/store]}\n                :pg {:package "svc-store-postgres" :activate [:svc/store] :config {:store/url "${PG_URL}" :store/schema "${pgSchema}"${PG_ALLOW_UNAUTHENTICATED}}}`,
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

const TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

/** utime + stime of a /proc stat line, in microseconds (fields 14 and 15; the name in field 2 may hold spaces). */
export function cpuMicros(statFile: string): number {
  const text = readFileSync(statFile, 'utf8');
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_US;
}

/** cutime + cstime of a /proc stat line (fields 16 and 17): the CPU of its children that ended and were waited for, in microseconds. */
export function childrenCpuMicros(statFile: string): number {
  const text = readFileSync(statFile, 'utf8');
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) * TICK_US;
}

/** CPU microseconds the whole machine has spent busy so far (every process, every core: /proc/stat less idle and iowait). */
export function machineBusyMicros(): number {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] as string).trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((sum, n) => sum + n, 0);
  return (total - (fields[3] ?? 0) - (fields[4] ?? 0)) * TICK_US;
}

/** What a load cost a server process, per request (or per `perUnit` requests). */
export interface Cost {
  /** Server CPU microseconds per request, every thread. */
  all: number;
  /** Server CPU microseconds per request, the main (event-loop) thread only. */
  main: number;
  /** This process's CPU microseconds per request: the load generator's share of the machine. */
  client: number;
  /** What `opts.also` counted meanwhile, per request (PostgreSQL's own CPU: {@link postgresMicros}), or undefined without it. */
  also?: number;
  rps: number;
  /** The 99th-percentile latency, ms. */
  p99: number;
}

/**
 * Runs `load` against `server` and divides the server process's CPU time (from /proc, before
 * and after) by the requests it answered: what a request costs the server, a figure that moves
 * far less with the machine's load than throughput does; and this process's own CPU time the
 * same way (the load generator runs here, on the same cores). Throws on any error or non-2xx.
 *
 * @example
 * const cost = await costOf(server, () => autocannon({ url: server.url, amount: 20_000 }));
 */
export async function costOf(
  server: Proc,
  load: () => Promise<autocannon.Result>,
  perUnit = 1,
  opts: { readonly also?: () => number } = {},
): Promise<Cost> {
  const pid = server.child.pid as number;
  const also0 = opts.also?.();
  const all0 = cpuMicros(`/proc/${pid}/stat`);
  const main0 = cpuMicros(`/proc/${pid}/task/${pid}/stat`);
  const client0 = process.cpuUsage();
  const result = await load();
  const client1 = process.cpuUsage(client0);
  const all1 = cpuMicros(`/proc/${pid}/stat`);
  const main1 = cpuMicros(`/proc/${pid}/task/${pid}/stat`);
  const also1 = opts.also?.();
  if (result.errors > 0 || result.non2xx > 0) throw new Error(`${result.errors} errors, ${result.non2xx} non-2xx`);
  const units = result.requests.total / perUnit;
  return {
    all: (all1 - all0) / units,
    main: (main1 - main0) / units,
    client: (client1.user + client1.system) / units,
    ...(also0 === undefined || also1 === undefined ? {} : { also: (also1 - also0) / units }),
    rps: result.requests.average / perUnit,
    p99: result.latency.p99,
  };
}

/**
 * CPU microseconds spent so far by every `postgres` process of this machine (the server and
 * its backends): PostgreSQL's own share of a figure, beside the server's. A backend that ends
 * during a run takes its time with it, so this counts long-lived connections (a store's pool)
 * exactly and short ones (pgbench's, ended with the run) not at all.
 *
 * @example
 * const cost = await costOf(server, load, 1, { also: postgresMicros });
 */
export function postgresMicros(): number {
  let sum = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== 'postgres') continue;
      // Its own CPU and its reaped children's (cutime + cstime): a backend that ends between two
      // readings moves its CPU into the postmaster's children time instead of vanishing from the
      // sum (which made the difference negative when a pool closed idle connections meanwhile).
      sum += cpuMicros(`/proc/${entry}/stat`) + childrenCpuMicros(`/proc/${entry}/stat`);
    } catch {
      // Gone meanwhile: a backend that ended.
    }
  }
  return sum;
}

/**
 * The median of `xs` (the mean of the middle two for an even count).
 *
 * @example
 * median([3, 1, 2]); // 2
 */
export function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/**
 * A rate or a count for the report, rounded, with thousands separators.
 *
 * @example
 * fmt(12345.6); // '12,346'
 */
export const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

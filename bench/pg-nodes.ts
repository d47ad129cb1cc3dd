// Two nodes writing at once on one PostgreSQL schema (issue #14 item 2): two `svc auth serve`
// processes on one project, the load split evenly between them, complete logins and refresh
// rotations counted together, and what they cost both servers in CPU. `npm run bench` runs it
// as the `postgres-nodes` scenario; run alone it can measure another build of svc, for a
// before/after on one machine in one sitting:
//
//   node --import tsx bench/pg-nodes.ts [--bin /path/to/other/checkout/node_modules/.bin/svc]
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import {
  analyzePostgresSchema,
  type Chain,
  cpuMicros,
  type Device,
  fmt,
  insertPostgresSessions,
  libpqEnv,
  login,
  loginRequests,
  machineBusyMicros,
  median,
  PG_SEED_SESSIONS,
  type Proc,
  postgresMicros,
  rotationRequest,
  setupProject,
  shownPgUrl,
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
  /**
   * PostgreSQL alone doing a login's and a rotation's least writes (pgbench, no server; see
   * `postgresCeilings`), or null without pgbench.
   */
  readonly ceiling: { readonly login: Ceiling; readonly rotation: Ceiling } | null;
}

/** What PostgreSQL alone allows one kind of operation: pgbench's rate and the machine's CPU per operation meanwhile. */
export interface Ceiling {
  readonly per_s: number;
  /** The machine's CPU µs per operation (PostgreSQL and pgbench: its backends end with the run, so they cannot be counted apart). */
  readonly machine_cpu_us: number;
}

/** Runs one pgbench script (one statement per line) for `seconds` on `connections`: null when pgbench is not installed. */
function pgbench(statements: readonly string[], name: string, seconds: number, connections: number, dir: string): Ceiling | null {
  try {
    execFileSync('pgbench', ['--version'], { stdio: 'ignore' });
  } catch {
    return null;
  }
  const script = join(dir, `${name}.pgbench`);
  writeFileSync(script, `${statements.map((st) => st.replace(/\s*\n\s*/g, ' ')).join('\n')}\n`);
  const busy0 = machineBusyMicros();
  const out = execFileSync('pgbench', ['-n', '-M', 'prepared', '-c', String(connections), '-j', '2', '-T', String(seconds), '-f', script], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: libpqEnv(),
  });
  const busy = machineBusyMicros() - busy0;
  const tps = Number(/tps = ([\d.]+)/.exec(out)?.[1]);
  const done = Number(/number of transactions actually processed: (\d+)/.exec(out)?.[1]);
  if (!(tps > 0) || !(done > 0)) throw new Error(`pgbench printed no rate: ${out}`);
  return { per_s: tps, machine_cpu_us: busy / done };
}

const psql = (sql: string): string => execFileSync('psql', ['-Atqc', sql], { encoding: 'utf8', env: libpqEnv() }).trim();

/**
 * The ceilings of the two-node figures: PostgreSQL alone, driven by pgbench (a C client, far
 * cheaper than any Node server) with the least each operation must write, on the bench's own
 * schema and device. No HTTP, no signature, no attempt budget, no sealing: no server on this
 * machine can do more of them per second than this. Null when pgbench is not installed.
 *
 * - A login: the challenge (one commit), then one statement that uses it up, checks the device
 *   and inserts the session and its pending audit event (a second commit).
 * - A rotation: one statement that records the DPoP proof (every rotation of a bound session
 *   carries one) and writes the session's new token pair and its pending audit event, one commit
 *   (store contract 12 made svc's the same; it was the proof's commit, then the rotation's), on
 *   one of 10,000 sessions made for it beforehand.
 */
function postgresCeilings(
  schema: string,
  seconds: number,
  connections: number,
  dir: string,
): { readonly login: Ceiling; readonly rotation: Ceiling } | null {
  const [deviceId, subject] = psql(`SELECT id || '|' || subject FROM ${schema}.devices WHERE removed_at IS NULL ORDER BY id LIMIT 1`).split(
    '|',
  );
  const id = (kind: string) => `'${kind}_' || :client_id || '_' || :n`;
  const login = pgbench(
    [
      '\\set n random(1, 2000000000)',
      `INSERT INTO ${schema}.challenges (id, public_key, realm, challenge, created_at, expires_at)
     VALUES (${id('chl')}, '${'0'.repeat(64)}', 'management', 'svc-auth-v1 challenge prj_ceiling management ' || ${id('chl')} || ' ${'0'.repeat(32)} 9999999999', 1, 9999999999999)
     ON CONFLICT DO NOTHING;`,
      `WITH used AS (
       DELETE FROM ${schema}.challenges WHERE id = ${id('chl')} AND used_at IS NULL RETURNING id
     ), live AS (
       SELECT d.id FROM ${schema}.devices d, used WHERE d.id = '${deviceId}' AND d.removed_at IS NULL FOR SHARE OF d
     ), created AS (
       INSERT INTO ${schema}.sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at, refresh_digest, refresh_expires_at)
       SELECT ${id('ses')}, 'management', '${subject}', live.id, 1, 9999999999999, md5(${id('a')}) || md5(${id('b')}), 9999999999999, md5(${id('c')}) || md5(${id('d')}), 9999999999999 FROM live
       ON CONFLICT DO NOTHING RETURNING id
     )
     INSERT INTO ${schema}.audit_pending (id, at, type, realm, subject, device_id, session_id, data)
     SELECT 'evt_' || created.id, 1, 'session.created', 'management', '${subject}', '${deviceId}', created.id, '{"amr":"ed25519"}' FROM created;`,
    ],
    'login',
    seconds,
    connections,
    dir,
  );
  if (login === null) return null;
  insertPostgresSessions(schema, 'ses_rot_', 10_000);
  const rotation = pgbench(
    [
      '\\set n random(1, 2000000000)',
      '\\set s random(1, 10000)',
      `WITH proof AS (
       INSERT INTO ${schema}.dpop_proofs (proof_key, expires_at) VALUES (${id('jti')}, 9999999999999) ON CONFLICT DO NOTHING RETURNING 1
     ), rotated AS (
       UPDATE ${schema}.sessions SET access_digest = md5(${id('a')}) || md5(${id('b')}), access_expires_at = 9999999999999,
         refresh_digest = md5(${id('c')}) || md5(${id('d')}), refresh_expires_at = 9999999999999, prev_refresh_digest = refresh_digest,
         prev_rotated_at = 2, generation = generation + 1, last_rotated_at = 2
       WHERE id = 'ses_rot_' || :s AND EXISTS (SELECT 1 FROM proof) RETURNING id, generation
     )
     INSERT INTO ${schema}.audit_pending (id, at, type, realm, subject, device_id, session_id, data)
     SELECT ${id('evt_rot')}, 2, 'session.refreshed', 'management', '${subject}', '${deviceId}', rotated.id, '{"generation":' || rotated.generation || '}' FROM rotated
     ON CONFLICT DO NOTHING;`,
    ],
    'rotation',
    seconds,
    connections,
    dir,
  );
  return rotation === null ? null : { login, rotation };
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
 * once, `rounds` times, medians reported; then PostgreSQL alone with a login's least writes
 * (`postgresCeiling`), what this machine allows any server on it.
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
    insertPostgresSessions(schema, 'ses_SEED', PG_SEED_SESSIONS);
    for (let i = 0; i < 2; i++) {
      nodes.push(await start([bin, 'auth', 'serve', '--listen', '127.0.0.1:0', join(dir, 'project')], /listening on (http:\/\/\S+)/));
    }
    const seconds = opts.seconds;
    const logins = (node: Proc, connections: number) =>
      autocannon({ connections, duration: seconds, url: node.url, requests: loginRequests(devices) });
    const rotations = async (node: Proc, connections: number) => {
      // Each connection rotates its own chain, begun on this node.
      const chains: Chain[] = [];
      for (let i = 0; i < connections * 4; i++) {
        const d = devices[i % devices.length] as Device;
        chains.push({ token: (await login(node.url, d.key, d.pub)).refresh_token, key: d.key });
      }
      const rotation = rotationRequest(chains, `${node.url}/v1/auth/refresh`);
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
      // As autovacuum would have by then in service (harness analyzePostgresSchema).
      analyzePostgresSchema(schema);
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
      ceiling: postgresCeilings(schema, seconds, opts.connections, dir),
    };
    const spread = (pick: (r: (typeof rounds)[number]) => number) => rounds.map((r) => fmt(pick(r))).join(' / ');
    report('');
    report(
      `two nodes on one PostgreSQL schema (${shownPgUrl()}, synchronous_commit=on; seeded with ${fmt(PG_SEED_SESSIONS)} sessions, analyzed before each round), the load split between them, at once`,
    );
    report(
      `  login     challenge + signed session  ${fmt(figures.logins_per_s).padStart(8)} /s   ${figures.cpu_us.login.toFixed(0)} µs CPU (both servers) + ${figures.db_cpu_us.login.toFixed(0)} µs (PostgreSQL)   rounds ${spread((r) => r.logins.rate)}`,
    );
    report(
      `  refresh   rotation                    ${fmt(figures.rotations_per_s).padStart(8)} /s   ${figures.cpu_us.rotation.toFixed(0)} µs CPU (both servers) + ${figures.db_cpu_us.rotation.toFixed(0)} µs (PostgreSQL)   rounds ${spread((r) => r.rotations.rate)}`,
    );
    const ceiling = figures.ceiling;
    if (ceiling === null) report('  ceiling   PostgreSQL alone: not measured (pgbench is not installed)');
    else {
      report(
        `  ceiling   PostgreSQL alone, a login's least writes (pgbench: 2 statements, 2 commits, no server)     ${fmt(ceiling.login.per_s)} /s   ${ceiling.login.machine_cpu_us.toFixed(0)} µs CPU (the machine: PostgreSQL and pgbench)   nodes ${(figures.logins_per_s / ceiling.login.per_s).toFixed(2)}x of it`,
      );
      report(
        `  ceiling   PostgreSQL alone, a rotation's least writes (pgbench: 1 statement, 1 commit, no server)    ${fmt(ceiling.rotation.per_s)} /s   ${ceiling.rotation.machine_cpu_us.toFixed(0)} µs CPU (the machine: PostgreSQL and pgbench)   nodes ${(figures.rotations_per_s / ceiling.rotation.per_s).toFixed(2)}x of it`,
      );
    }
    return figures;
  } finally {
    for (const n of nodes) await stop(n).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    try {
      execFileSync('psql', ['-qc', `DROP SCHEMA IF EXISTS ${schema} CASCADE`], { stdio: 'ignore', env: libpqEnv() });
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

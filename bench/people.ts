// People at scale in `npm run bench` (scenario `people`, issue #31 goal 4): a SQLite project
// seeded with 1,000,000 users in 10,000 groups against a project with ten users.
//
// 1. A group policy decision per request: the same gateway request (`:svc/app-routes`, one route
//    that requires the group `ops`, in front of the bare Fastify route; bench/people-server.ts)
//    with each project's 1,000 sessions in turn, as the gateway's CPU microseconds per request in
//    both; target people.group-policy = CPU(ten users) / CPU(1M users), goal >= 0.95.
// 2. `svc auth users` paging: the management API's `GET /v1/auth/users` on the 1M-user store (the
//    first page, a page deep in the listing through its cursor, a page of one group's members,
//    the user with one email, one realm's users), each as the median server time of the request
//    (its Server-Timing, from its arrival to its answer; the client's wait is shown beside it)
//    and its server CPU; target 100 ms / that, goal >= 1.
// 3. With BENCH_PG_URL's server reachable: the same listings on PostgreSQL (a fresh schema,
//    1,000,000 users seeded with one INSERT ... SELECT, dropped after), timed in this process
//    through core's listUsers on the PostgreSQL store (the route's work without its HTTP).
//
// The seeds go straight into the control database (one transaction per 100,000 rows, like
// bench/seed.ts): a throwaway database that is deleted with the run. Not for real databases.
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  type AuthDeps,
  authenticate,
  completePairing,
  createChallenge,
  createSession,
  digestToken,
  enrollWithBootstrapToken,
  issueBootstrapToken,
  listUsers,
  pairingProofString,
  preparePairing,
  publicKeyHexOf,
  silentLogger,
} from '@svc/core';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import { openSqliteStore } from 'svc-store-sqlite';
import { CPU_REQUESTS } from './gateway-modules.js';
import { costOf, fmt, libpqEnv, median, PG_URL, type Proc, root, start, stop } from './harness.js';
import { PEOPLE_HOST, PEOPLE_PROJECT_ID, REQUIRED_GROUP } from './people-server.js';
import type { TargetFigure } from './targets.js';

const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
/** Users and groups of the big project (BENCH_PEOPLE_USERS to try another size). */
export const MANY_USERS = Number(process.env.BENCH_PEOPLE_USERS ?? 1_000_000);
export const MANY_GROUPS = 10_000;
const FEW_USERS = 10;
/** Sessions the gateway requests cycle through, in both projects (fewer than the bearer cache keeps). */
const SESSIONS = 1_000;
/** Timed requests per listing (after one warm-up); the median is reported. */
const LISTING_RUNS = 5;
/** The goal for a page of `svc auth users`, in server milliseconds. */
const PAGE_GOAL_MS = 100;

/** The subject of seeded user `i` (a valid ULID body: "SEEDP" and 21 digits, in the order of `i`). */
const subjectOf = (i: number) => `sub_SEEDP${i.toString().padStart(21, '0')}`;
const groupName = (g: number) => `team-${g.toString().padStart(5, '0')}`;
const emailOf = (i: number) => `person${i}@example.com`;
/** The groups of seeded user `i`: three of `groups`, spread so that each group has users all over the subject order. */
const groupsOf = (i: number, groups: number) => [...new Set([i % groups, (i * 7919 + 13) % groups, (i * 104_729 + 7) % groups])];

/** What a project's preparation leaves: the application device its sessions belong to, and an administrator's access token. */
interface Prepared {
  readonly deviceId: string;
  readonly managementToken: string;
}

/**
 * A fresh project in `file` through core's use cases (as bench/gateway-project.ts makes one): an
 * administrator, signed in to the management realm, who pairs one application device. The store
 * is closed after: the seed and the server open the file next.
 */
async function prepareProject(file: string): Promise<Prepared> {
  const store = await openSqliteStore({ file });
  try {
    const deps: AuthDeps = {
      store,
      clock: { now: () => Date.now(), monotonic: () => performance.now() },
      random: (n) => randomBytes(n),
      log: silentLogger,
      projectId: PEOPLE_PROJECT_ID,
      settings: Object.freeze({ ...DEFAULT_AUTH_SETTINGS }),
    };
    await store.initProject({ projectId: deps.projectId, createdAt: deps.clock.now() });
    const signHex = (key: KeyObject, message: string) => sign(null, Buffer.from(message, 'utf8'), key).toString('hex');
    const admin = generateKeyPairSync('ed25519');
    const bootstrap = await issueBootstrapToken(deps, { recovery: false });
    await enrollWithBootstrapToken(deps, { bootstrapToken: bootstrap.token, publicKey: publicKeyHexOf(admin.publicKey) });
    const chl = await createChallenge(deps, { publicKey: publicKeyHexOf(admin.publicKey), realm: 'management' });
    const pair = await createSession(deps, {
      challengeId: chl.id,
      signature: signHex(admin.privateKey, chl.challenge),
      realm: 'management',
    });
    const principal = await authenticate(deps, { token: pair.access_token, realm: 'management' });
    const appKey = generateKeyPairSync('ed25519');
    const appPub = publicKeyHexOf(appKey.publicKey);
    const intent = await preparePairing(deps, { principal, realm: 'application', publicKey: appPub });
    const nodeId = 'bench-node';
    await completePairing(deps, {
      nodeId,
      intentId: intent.intent_id,
      code: intent.code,
      publicKey: appPub,
      signature: signHex(appKey.privateKey, pairingProofString({ nodeId, intentId: intent.intent_id, publicKey: appPub })),
    });
    const device = await store.findDeviceByPublicKey(appPub);
    if (device === null) throw new Error('the paired application device is not in the store');
    return { deviceId: device.id, managementToken: pair.access_token };
  } finally {
    await store.close();
  }
}

/**
 * Seeds `users` application users in `groups` groups (group records too), each in three groups
 * and with a name, a verified email and a user name; `holders` of them, spread evenly over the
 * subject order, are also in the group `ops` and hold {@link SESSIONS} live sessions between
 * them (on `deviceId`). Returns those sessions' access tokens.
 */
export function seedPeople(file: string, opts: { users: number; groups: number; holders: number; deviceId: string }): string[] {
  const db = new Database(file);
  const tokens: string[] = [];
  try {
    db.pragma('journal_mode = WAL');
    const now = Date.now();
    const insertGroup = db.prepare(
      `INSERT INTO groups (id, realm, name, external_id, created_at, updated_at) VALUES (?, 'application', ?, NULL, ?, ?)`,
    );
    const insertUser = db.prepare(
      `INSERT INTO users (subject, realm, user_name, external_id, name, name_source, email, email_verified, email_source,
         groups, groups_source, status, created_at, updated_at, last_sign_in_at, disabled_at)
       VALUES (?, 'application', ?, NULL, ?, 'scim', ?, 1, 'scim', ?, 'scim', 'active', ?, ?, NULL, NULL)`,
    );
    const insertSession = db.prepare(
      `INSERT INTO sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at,
         refresh_digest, refresh_expires_at, generation)
       VALUES (?, 'application', ?, ?, ?, ?, ?, ?, ?, ?, 0)`,
    );
    const every = Math.max(1, Math.floor(opts.users / opts.holders));
    const perHolder = Math.ceil(SESSIONS / opts.holders);
    let sessions = 0;
    const batch = db.transaction((from: number, to: number) => {
      if (from === 0) {
        for (let g = 0; g < opts.groups; g++) insertGroup.run(`grp_SEEDG${g.toString().padStart(21, '0')}`, groupName(g), now, now);
      }
      for (let i = from; i < to; i++) {
        const holder = i % every === 0 && i / every < opts.holders;
        const names = groupsOf(i, opts.groups).map(groupName);
        if (holder) names.push(REQUIRED_GROUP);
        insertUser.run(subjectOf(i), `person${i}`, `Person ${i}`, emailOf(i), JSON.stringify(names.sort()), now, now);
        if (!holder) continue;
        for (let k = 0; k < perHolder && sessions < SESSIONS; k++, sessions++) {
          const selector = `SEEDS${sessions.toString().padStart(21, '0')}`;
          const secrets = randomBytes(64);
          const access = `svca_${selector}${secrets.subarray(0, 32).toString('base64url')}`;
          const refresh = `svcr_${selector}${secrets.subarray(32).toString('base64url')}`;
          tokens.push(access);
          const expires = now + 86_400_000;
          insertSession.run(
            `ses_${selector}`,
            subjectOf(i),
            opts.deviceId,
            now,
            expires,
            digestToken(access),
            expires,
            digestToken(refresh),
            expires,
          );
        }
      }
    });
    for (let i = 0; i < opts.users; i += 100_000) batch(i, Math.min(opts.users, i + 100_000));
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
  return tokens;
}

/** One project of the scenario: its server (gateway and management API) and its tokens. */
interface PeopleProject {
  readonly server: Proc;
  readonly gateway: string;
  readonly management: string;
  readonly managementToken: string;
  readonly tokens: readonly string[];
  readonly seedS: number;
}

async function openProject(work: string, name: string, upstream: Proc, users: number, groups: number): Promise<PeopleProject> {
  const file = join(work, `${name}.db`);
  const prepared = await prepareProject(file);
  const t0 = performance.now();
  const tokens = seedPeople(file, { users, groups, holders: Math.min(users, SESSIONS), deviceId: prepared.deviceId });
  const seedS = (performance.now() - t0) / 1000;
  const server = await start(
    ['--import', 'tsx', join(root, 'bench/people-server.ts'), upstream.url, file, '10000'],
    /people listening on (http:\/\/\S+) management (http:\/\/\S+)/,
  );
  return { server, gateway: server.url, management: server.match[2] as string, managementToken: prepared.managementToken, tokens, seedS };
}

/** The gateway request with the next of `tokens` each time, for `amount` requests (or `duration` seconds). */
function gatewayLoad(url: string, tokens: readonly string[], load: { amount?: number; duration?: number }) {
  let i = 0;
  return autocannon({
    url,
    connections: CONNECTIONS,
    ...load,
    headers: { host: PEOPLE_HOST },
    requests: [
      {
        method: 'GET',
        path: '/',
        setupRequest: (req) => ({ ...req, headers: { ...req.headers, authorization: `Bearer ${tokens[i++ % tokens.length]}` } }),
      },
    ],
  });
}

/** One listing of the management API: what it asks, and what it took (medians of {@link LISTING_RUNS}). */
interface Listing {
  readonly label: string;
  readonly query: string;
  /** The server's CPU time for the page (its `Server-Timing` cpu): the figure the target uses. */
  readonly cpuMs: number;
  /** The server's elapsed time for the page (its `Server-Timing` app), waits for a core included. */
  readonly serverMs: number;
  /** The client's wait for the whole answer. */
  readonly wallMs: number;
  readonly users: number;
}

/**
 * `GET /v1/auth/users?<query>` once to warm up (and to check the page with `expect`), then
 * {@link LISTING_RUNS} times, one at a time.
 */
async function timeListing(
  p: PeopleProject,
  label: string,
  query: string,
  expect: (users: readonly { subject: string }[]) => void,
): Promise<Listing> {
  const get = async () => {
    const t0 = performance.now();
    const res = await fetch(`${p.management}/v1/auth/users?${query}`, { headers: { authorization: `Bearer ${p.managementToken}` } });
    const body = (await res.json()) as { users: { subject: string }[]; next: string | null };
    const wall = performance.now() - t0;
    if (res.status !== 200) throw new Error(`GET /v1/auth/users?${query}: ${res.status} ${JSON.stringify(body)}`);
    const timing = res.headers.get('server-timing') ?? '';
    const dur = (name: string) => Number(new RegExp(`${name};dur=([0-9.]+)`).exec(timing)?.[1] ?? Number.NaN);
    return { server: dur('app'), cpu: dur('cpu'), wall, body };
  };
  expect((await get()).body.users);
  const runs: Awaited<ReturnType<typeof get>>[] = [];
  for (let r = 0; r < LISTING_RUNS; r++) runs.push(await get());
  const m = (pick: (r: (typeof runs)[number]) => number) => median(runs.map(pick));
  return {
    label,
    query,
    cpuMs: m((r) => r.cpu),
    serverMs: m((r) => r.server),
    wallMs: m((r) => r.wall),
    users: runs.at(-1)?.body.users.length ?? 0,
  };
}

/** The listings the scenario times on a store of `users` seeded users (core's listUsers on PostgreSQL, the API on SQLite). */
function listingCases(users: number) {
  const deep = Math.floor(users * 0.9);
  const group = groupName(4242 % MANY_GROUPS);
  const person = Math.floor(users * 0.777);
  return [
    { label: 'first page (100)', query: 'limit=100', expect: (u: readonly { subject: string }[]) => u.length === 100 },
    {
      label: 'deep page (100 after the 90% cursor)',
      query: `limit=100&after=${subjectOf(deep)}`,
      expect: (u: readonly { subject: string }[]) => u[0]?.subject === subjectOf(deep + 1),
    },
    { label: `--group ${group} (100)`, query: `limit=100&group=${group}`, expect: (u: readonly { subject: string }[]) => u.length > 0 },
    {
      label: '--email (one user)',
      query: `email=${encodeURIComponent(emailOf(person))}`,
      expect: (u: readonly { subject: string }[]) => u[0]?.subject === subjectOf(person),
    },
    {
      label: '--realm application (100)',
      query: 'limit=100&realm=application',
      expect: (u: readonly { subject: string }[]) => u.length === 100,
    },
  ] as const;
}

/**
 * Runs the scenario against `upstream` (a running bare Fastify route): reports its lines and
 * returns its figures and targets.
 *
 * @example
 * const people = await measurePeople(bare, report);
 */
export async function measurePeople(upstream: Proc, report: (line: string) => void) {
  const work = mkdtempSync(join(tmpdir(), 'svc-bench-people-'));
  const procs: Proc[] = [];
  try {
    const few = await openProject(work, 'few', upstream, FEW_USERS, 3);
    procs.push(few.server);
    const many = await openProject(work, 'many', upstream, MANY_USERS, MANY_GROUPS);
    procs.push(many.server);

    // Warm-up: every session read once (the bearer cache then holds them all) and the hot paths compiled.
    for (const p of [few, many]) {
      const r = await gatewayLoad(p.gateway, p.tokens, { amount: SESSIONS * 3 });
      if (r.errors > 0 || r.non2xx > 0) throw new Error(`people warm-up: ${r.non2xx} non-2xx, ${r.errors} errors`);
    }
    const rounds: { few: number; many: number }[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // Alternate which goes first, so drift in the machine's speed does not favour one.
      const order = r % 2 === 0 ? [few, many] : [many, few];
      const cost = new Map<PeopleProject, number>();
      for (const p of order) cost.set(p, (await costOf(p.server, () => gatewayLoad(p.gateway, p.tokens, { amount: CPU_REQUESTS }))).all);
      rounds.push({ few: cost.get(few) as number, many: cost.get(many) as number });
    }
    const cpuFew = median(rounds.map((r) => r.few));
    const cpuMany = median(rounds.map((r) => r.many));
    const ratio = median(rounds.map((r) => r.few / r.many));

    const listings: Listing[] = [];
    for (const c of listingCases(MANY_USERS)) {
      listings.push(
        await timeListing(many, c.label, c.query, (u) => {
          if (!c.expect(u)) throw new Error(`people: ${c.label} answered an unexpected page`);
        }),
      );
    }
    const postgres = await postgresListings();

    report('');
    report(
      `people: ${fmt(MANY_USERS)} users in ${fmt(MANY_GROUPS)} groups (sqlite, seeded in ${many.seedS.toFixed(0)} s) against ${FEW_USERS} users; ${fmt(SESSIONS)} sessions in turn`,
    );
    report(
      `  policy    GET / on a route that requires ${REQUIRED_GROUP}: gateway CPU per request (${fmt(CPU_REQUESTS)} requests): ${FEW_USERS} users ${cpuFew.toFixed(0)} µs, ${fmt(MANY_USERS)} users ${cpuMany.toFixed(0)} µs (${ratio.toFixed(2)}x, target >= 0.95x)   rounds ${rounds.map((r) => `${r.few.toFixed(0)}/${r.many.toFixed(0)}`).join(' ')}`,
    );
    for (const l of listings) {
      report(
        `  users     GET /v1/auth/users ${l.label.padEnd(38)} ${l.cpuMs.toFixed(1).padStart(6)} ms server CPU   ${l.serverMs.toFixed(1).padStart(6)} ms elapsed in the server, ${l.wallMs.toFixed(1)} ms waited by the client   ${l.users} users`,
      );
    }
    if (postgres === null) report('  postgres  not reachable: the PostgreSQL listings were skipped');
    else {
      report(`  postgres  ${fmt(MANY_USERS)} users seeded in ${postgres.seedS.toFixed(0)} s; core listUsers on the PostgreSQL store:`);
      for (const l of postgres.listings) report(`  users     ${l.label.padEnd(58)} ${l.ms.toFixed(1).padStart(7)} ms   ${l.users} users`);
    }
    const slug = (label: string) => label.split(' ')[0]?.replace(/^--/, '') as string;
    const targets: TargetFigure[] = [
      {
        id: 'people.group-policy',
        what: `gateway CPU per group-required request, ${FEW_USERS} users / ${fmt(MANY_USERS)} users in ${fmt(MANY_GROUPS)} groups`,
        ratio,
        goal: 0.95,
        cpuUs: cpuMany,
      },
      ...listings.map((l) => ({
        id: `people.users.${slug(l.label)}`,
        what: `${PAGE_GOAL_MS} ms / server CPU of GET /v1/auth/users ${l.label}, ${fmt(MANY_USERS)} users (sqlite): ${l.cpuMs.toFixed(1)} ms (${l.serverMs.toFixed(1)} ms elapsed)`,
        ratio: PAGE_GOAL_MS / l.cpuMs,
        goal: 1,
        cpuUs: l.cpuMs * 1000,
      })),
      ...(postgres?.listings ?? []).map((l) => ({
        id: `people.users-pg.${slug(l.label)}`,
        what: `${PAGE_GOAL_MS} ms / listUsers ${l.label}, ${fmt(MANY_USERS)} users (postgres): ${l.ms.toFixed(1)} ms`,
        ratio: PAGE_GOAL_MS / l.ms,
        goal: 1,
      })),
    ];
    return {
      figures: {
        users: MANY_USERS,
        groups: MANY_GROUPS,
        few_users: FEW_USERS,
        sessions: SESSIONS,
        seed_s: many.seedS,
        cpu_us_per_request: { few: cpuFew, many: cpuMany },
        cpu_few_vs_many: ratio,
        per_round: rounds,
        listings,
        postgres,
      },
      targets,
    };
  } finally {
    for (const p of procs) await stop(p);
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * The listings on PostgreSQL: a fresh schema migrated by the store, {@link MANY_USERS} users
 * seeded by one `INSERT ... SELECT generate_series` (psql), core's listUsers timed on the store;
 * the schema is dropped after. Null when the server or psql is not there.
 */
async function postgresListings(): Promise<{ seedS: number; listings: { label: string; ms: number; users: number }[] } | null> {
  const schema = `svc_bench_people_${randomBytes(4).toString('hex')}`;
  const psql = (sql: string) =>
    execFileSync('psql', ['-v', 'ON_ERROR_STOP=1', '-qc', sql], { stdio: ['ignore', 'ignore', 'pipe'], env: libpqEnv() });
  let openPostgresStore: typeof import('svc-store-postgres').openPostgresStore;
  try {
    psql('SELECT 1');
    ({ openPostgresStore } = await import('svc-store-postgres'));
  } catch {
    return null;
  }
  const store = await openPostgresStore({ connectionString: PG_URL, schema, allowUnauthenticated: true, warn: () => {} });
  try {
    const now = Date.now();
    const t0 = performance.now();
    // The same users as the SQLite seed: subjects, names, emails and three groups each by the same rules.
    psql(
      `SET search_path TO ${schema};
       INSERT INTO groups (id, realm, name, external_id, created_at, updated_at)
         SELECT 'grp_SEEDG' || lpad(g::text, 21, '0'), 'application', 'team-' || lpad(g::text, 5, '0'), NULL, ${now}, ${now}
         FROM generate_series(0, ${MANY_GROUPS - 1}) g;
       INSERT INTO users (subject, realm, user_name, name, name_source, email, email_verified, email_source, groups, groups_source, status, created_at, updated_at)
         SELECT 'sub_SEEDP' || lpad(i::text, 21, '0'), 'application', 'person' || i, 'Person ' || i, 'scim', 'person' || i || '@example.com', TRUE, 'scim',
                (SELECT json_agg(n ORDER BY n)::text FROM (SELECT DISTINCT 'team-' || lpad(x::text, 5, '0') AS n
                   FROM unnest(ARRAY[i % ${MANY_GROUPS}, (i::bigint * 7919 + 13) % ${MANY_GROUPS}, (i::bigint * 104729 + 7) % ${MANY_GROUPS}]) x) t),
                'scim', 'active', ${now}, ${now}
         FROM generate_series(0, ${MANY_USERS - 1}) i;
       ANALYZE users;`,
    );
    const seedS = (performance.now() - t0) / 1000;
    const deps = { store };
    const listings: { label: string; ms: number; users: number }[] = [];
    for (const c of listingCases(MANY_USERS)) {
      const q = new URLSearchParams(c.query);
      const input = {
        ...(q.has('limit') ? { limit: Number(q.get('limit')) } : {}),
        ...(q.has('after') ? { after: q.get('after') } : {}),
        ...(q.has('group') ? { group: q.get('group') } : {}),
        ...(q.has('email') ? { email: q.get('email') } : {}),
        ...(q.has('realm') ? { realm: q.get('realm') } : {}),
      };
      const first = await listUsers(deps, input);
      if (!c.expect(first.users)) throw new Error(`people (postgres): ${c.label} answered an unexpected page`);
      const times: number[] = [];
      let users = 0;
      for (let r = 0; r < LISTING_RUNS; r++) {
        const t = performance.now();
        users = (await listUsers(deps, input)).users.length;
        times.push(performance.now() - t);
      }
      listings.push({ label: c.label, ms: median(times), users });
    }
    return { seedS, listings };
  } finally {
    await store.close();
    psql(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  }
}

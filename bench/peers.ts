// svc's bearer check side by side with two peers in `npm run bench` (scenario `peers`, issue
// #31 goal 5): each server in its own process on 127.0.0.1 port 0, started from the root's
// devDependencies (the peers' documented standard setup, nothing tuned either way), autocannon
// in this process with the same connections and duration as the other scenarios.
//
// - oidc-provider (panva's certified OpenID Provider, its default in-memory adapter): a client
//   `bench-app` gets an opaque access token by the client credentials grant; a resource server
//   `bench-rs` introspects it (RFC 7662): `POST /token/introspection` with `token=...` and HTTP
//   Basic client authentication. Per request: the form body parsed, the client looked up and
//   its secret compared (client_secret_basic), the token looked up in the adapter and checked
//   (expiry, kind, the default allowedPolicy), the JSON answer `{"active": true, ...}`. (It
//   warns that it supports Node 22 and later; the bench runs on the repo's Node.)
// - better-auth (better-sqlite3 database, migrations run programmatically, email and password
//   sign-in, no cookie cache: its default), served by node:http through its own node handler
//   (`toNodeHandler` from better-auth/node): `GET /api/auth/get-session` with the session
//   cookie of a user signed in over HTTP. Per request: its router and endpoints built for the
//   request (better-auth 1.7's handler does so on every call), the signed cookie's HMAC
//   verified (Web Crypto), the session looked up by its token in SQLite and its user, the JSON
//   answer `{session, user}`. Rate limiting stays off, its default unless NODE_ENV=production
//   (on, it answers 429 past 100 requests per 10 s from one address: this check would throw).
// - svc: `GET /v1/auth/me` with `Authorization: Bearer` on `svc auth serve` with SQLite (the
//   project of bench/harness.ts setupProject): the token's digest looked up (its bearer-check
//   cache in front of the store), the session's and device's state checked, the principal.
//
// Before any figure, each answer is checked to be a real success (introspection `active: true`
// for the token, get-session's user the one signed in, svc's principal); during every run each
// 2xx body is checked the same way (a cheap substring test, the same for all three), and any
// error, non-2xx or failed check throws: a peer answering errors fast would be a fake win.
// ROUNDS rounds; in each, every peer is measured and svc right after it; medians. Reported per
// server: req/s and server CPU microseconds per request (harness costOf, from /proc), and the
// ratios svc/peer of both (throughput: svc over the peer, higher is better for svc; CPU: the
// peer's over svc's, the steadier figure on a shared machine). Targets `peers.oidc-provider`
// (goal 8x) and `peers.better-auth` (goal 50x) are the throughput ratios. Each round also runs
// the bare Fastify route (a constant answer, no check at all): `peers.<name>.ceiling` is its
// req/s over the peer's, the most any check served by Fastify could reach on this machine.
//
// The peer servers are bench/peer-servers.mjs, run by plain node as svc's built server is.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { type Cost, costOf, type Device, fmt, login, median, type Proc, root, setupProject, start, stop, svc } from './harness.js';
import type { TargetFigure } from './targets.js';

const DURATION = Number(process.env.BENCH_SECONDS ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));

/** The issue's goals: svc's bearer checks per second over each peer's. */
export const PEER_GOALS = { 'oidc-provider': 8, 'better-auth': 50 } as const;
type PeerName = keyof typeof PEER_GOALS;

const OIDC_APP = 'bench-app';
const OIDC_RS = 'bench-rs';
const BA_EMAIL = 'bench@example.com';

/** A load on one server: DURATION seconds unless told (harness costOf runs it without). */
type Load = (seconds?: number) => Promise<autocannon.Result>;

/**
 * A load of `request` on CONNECTIONS connections for DURATION seconds, each 2xx body checked
 * to contain `expect`; throws after the run if any did not (costOf throws on errors and non-2xx).
 */
function checkedLoad(url: string, request: autocannon.Request, expect: string): Load {
  return async (seconds = DURATION) => {
    let failed = 0;
    let sample = '';
    const result = await autocannon({
      url,
      connections: CONNECTIONS,
      duration: seconds,
      requests: [
        {
          ...request,
          onResponse: (status, body) => {
            if (status >= 200 && status < 300 && !body.includes(expect)) {
              failed++;
              sample ||= body.slice(0, 200);
            }
          },
        },
      ],
    });
    if (result.errors > 0 || result.non2xx > 0) throw new Error(`${url}: ${result.errors} errors, ${result.non2xx} non-2xx`);
    if (failed > 0) throw new Error(`${url}: ${failed} 2xx answers without ${expect}, e.g. ${sample}`);
    return result;
  };
}

async function expectOk(res: Response, what: string): Promise<unknown> {
  const text = await res.text();
  if (!res.ok) throw new Error(`${what}: ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as unknown;
}

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

/** A fresh access token from oidc-provider and the introspection load on it, checked to answer active: true first. */
async function oidcLoad(peer: Proc, appSecret: string, rsSecret: string): Promise<Load> {
  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  const issued = (await expectOk(
    await fetch(`${peer.url}/token`, {
      method: 'POST',
      headers: { ...form, authorization: basic(OIDC_APP, appSecret) },
      body: 'grant_type=client_credentials',
    }),
    'oidc-provider client credentials grant',
  )) as { access_token?: string };
  if (typeof issued.access_token !== 'string' || issued.access_token.split('.').length === 3) {
    throw new Error('oidc-provider: expected an opaque access token from the client credentials grant');
  }
  const headers = { ...form, authorization: basic(OIDC_RS, rsSecret) };
  const body = `token=${encodeURIComponent(issued.access_token)}`;
  const request: autocannon.Request = { method: 'POST', path: '/token/introspection', headers, body };
  const answer = (await expectOk(
    await fetch(`${peer.url}/token/introspection`, { method: 'POST', headers, body }),
    'oidc-provider introspection',
  )) as { active?: boolean; client_id?: string };
  if (answer.active !== true || answer.client_id !== OIDC_APP) {
    throw new Error(`oidc-provider introspection did not find the token active: ${JSON.stringify(answer)}`);
  }
  return checkedLoad(peer.url, request, '"active":true');
}

/** better-auth's session cookie for the user, by its email sign-in over HTTP, and the get-session load with it. */
async function betterAuthLoad(peer: Proc, password: string): Promise<Load> {
  const signIn = await fetch(`${peer.url}/api/auth/sign-in/email`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: peer.url },
    body: JSON.stringify({ email: BA_EMAIL, password }),
  });
  await expectOk(signIn, 'better-auth email sign-in');
  const cookie = signIn.headers
    .getSetCookie()
    .map((c) => c.split(';')[0] as string)
    .join('; ');
  if (!cookie.includes('session_token=')) throw new Error(`better-auth sign-in set no session cookie: ${cookie}`);
  const request: autocannon.Request = { method: 'GET', path: '/api/auth/get-session', headers: { cookie } };
  const answer = (await expectOk(await fetch(`${peer.url}/api/auth/get-session`, { headers: { cookie } }), 'better-auth get-session')) as {
    user?: { email?: string };
    session?: { token?: string };
  } | null;
  if (answer?.user?.email !== BA_EMAIL || typeof answer.session?.token !== 'string') {
    throw new Error(`better-auth get-session did not answer the signed-in user's session: ${JSON.stringify(answer)}`);
  }
  return checkedLoad(peer.url, request, `"email":"${BA_EMAIL}"`);
}

/** svc's bearer check: `GET /v1/auth/me` with a fresh session's access token, checked to answer the principal first. */
async function svcLoad(server: Proc, device: Device): Promise<Load> {
  const session = await login(server.url, device.key, device.pub);
  const headers = { authorization: `Bearer ${session.access_token}` };
  const me = (await expectOk(await fetch(`${server.url}/v1/auth/me`, { headers }), 'svc GET /v1/auth/me')) as { subject?: string };
  if (typeof me.subject !== 'string' || me.subject === '') throw new Error(`svc /v1/auth/me answered no principal: ${JSON.stringify(me)}`);
  return checkedLoad(server.url, { method: 'GET', path: '/v1/auth/me', headers }, `"subject":"${me.subject}"`);
}

/** One round's figures for one peer: the peer, then svc right after it. */
interface PeerRound {
  peer: Cost;
  svc: Cost;
  /** The bare Fastify route (bench/bare-server.ts), once per round, for both peers. */
  bare: Cost;
}

/**
 * Runs the scenario and reports its lines; returns its figures (for bench/results) with each
 * peer's median ratios.
 *
 * @example
 * const peers = await measurePeers(bare, report);
 */
export async function measurePeers(bare: Proc, report: (line: string) => void) {
  const work = mkdtempSync(join(tmpdir(), 'svc-bench-peers-'));
  const procs: Proc[] = [];
  try {
    const secrets = { app: randomBytes(24).toString('base64url'), rs: randomBytes(24).toString('base64url') };
    const password = randomBytes(18).toString('base64url');
    const peerServers = join(root, 'bench/peer-servers.mjs');
    const ready = /listening on (http:\/\/\S+)/;
    const oidc = await start([peerServers, 'oidc-provider'], ready, {
      PEER_APP_ID: OIDC_APP,
      PEER_APP_SECRET: secrets.app,
      PEER_RS_ID: OIDC_RS,
      PEER_RS_SECRET: secrets.rs,
    });
    procs.push(oidc);
    const ba = await start([peerServers, 'better-auth'], ready, { PEER_EMAIL: BA_EMAIL, PEER_PASSWORD: password });
    procs.push(ba);
    const dir = join(work, 'svc');
    const { devices } = setupProject(dir, 'sqlite', '');
    const server = await start([svc, 'auth', 'serve', '--listen', '127.0.0.1:0', dir], ready);
    procs.push(server);
    const device = devices[0] as Device;

    // Warm-up, a full run of each unmeasured: every server's hot path compiled, and every check
    // run, before any figure (with 1 s, the first round's oidc-provider and svc figures came out
    // two to three times the CPU per request of the later rounds').
    await (await oidcLoad(oidc, secrets.app, secrets.rs))();
    await (await betterAuthLoad(ba, password))();
    await (await svcLoad(server, device))();

    const rounds: Record<PeerName, PeerRound[]> = { 'oidc-provider': [], 'better-auth': [] };
    // What this machine allows any check served by Fastify: the bare route (a constant answer,
    // no check at all) in the same round, against each peer.
    const bareLoad = checkedLoad(bare.url, { method: 'GET', path: '/' }, 'sub_baseline');
    for (let r = 0; r < ROUNDS; r++) {
      const oidcRun = await costOf(oidc, await oidcLoad(oidc, secrets.app, secrets.rs));
      const oidcSvc = await costOf(server, await svcLoad(server, device));
      const baRun = await costOf(ba, await betterAuthLoad(ba, password));
      const baSvc = await costOf(server, await svcLoad(server, device));
      const bareRun = await costOf(bare, bareLoad);
      rounds['oidc-provider'].push({ peer: oidcRun, svc: oidcSvc, bare: bareRun });
      rounds['better-auth'].push({ peer: baRun, svc: baSvc, bare: bareRun });
    }

    const summary = (name: PeerName) => {
      const rs = rounds[name];
      const m = (pick: (r: PeerRound) => number) => median(rs.map(pick));
      return {
        rounds: rs,
        peer_rps: m((r) => r.peer.rps),
        svc_rps: m((r) => r.svc.rps),
        peer_cpu_us: m((r) => r.peer.all),
        svc_cpu_us: m((r) => r.svc.all),
        /** svc's req/s over the peer's, the goal's figure. */
        ratio: m((r) => r.svc.rps / r.peer.rps),
        /** The peer's server CPU per request over svc's: how many of svc's checks one of the peer's costs. */
        cpu_ratio: m((r) => r.peer.all / r.svc.all),
        /** The bare route's req/s over the peer's: the most any check served by Fastify reaches here. */
        ceiling: m((r) => r.bare.rps / r.peer.rps),
        ceiling_cpu: m((r) => r.peer.all / r.bare.all),
        bare_cpu_us: m((r) => r.bare.all),
        goal: PEER_GOALS[name],
      };
    };
    const figures = { rounds: ROUNDS, 'oidc-provider': summary('oidc-provider'), 'better-auth': summary('better-auth') };

    const line = (label: string, rps: number, cpuUs: number, extra = '') =>
      report(`  ${label.padEnd(58)} ${fmt(rps).padStart(8)} req/s   ${cpuUs.toFixed(0).padStart(5)} µs server CPU${extra}`);
    const versus = (f: ReturnType<typeof summary>) =>
      `   svc/peer ${f.ratio.toFixed(2)}x req/s (goal ${f.goal}x), ${f.cpu_ratio.toFixed(2)}x in CPU per request; the bare Fastify route (${f.bare_cpu_us.toFixed(0)} µs): ${f.ceiling.toFixed(2)}x, ${f.ceiling_cpu.toFixed(2)}x in CPU`;
    report('');
    report(`peers: svc's bearer check beside two peers' session checks, each peer then svc right after, ${ROUNDS} rounds, medians`);
    const o = figures['oidc-provider'];
    const b = figures['better-auth'];
    line('oidc-provider POST /token/introspection (RFC 7662, Basic)', o.peer_rps, o.peer_cpu_us);
    line('svc GET /v1/auth/me (bearer, SQLite), right after', o.svc_rps, o.svc_cpu_us, versus(o));
    line('better-auth GET /api/auth/get-session (cookie, SQLite)', b.peer_rps, b.peer_cpu_us);
    line('svc GET /v1/auth/me (bearer, SQLite), right after', b.svc_rps, b.svc_cpu_us, versus(b));
    return figures;
  } finally {
    for (const p of procs) await stop(p);
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * The scenario's targets for the table of bench/targets.ts: svc's req/s over each peer's,
 * svc's server CPU per request beside it, the CPU ratio in the description.
 *
 * @example
 * targets.push(...peerTargets(await measurePeers(report)));
 */
export function peerTargets(figures: Awaited<ReturnType<typeof measurePeers>>): TargetFigure[] {
  return (Object.keys(PEER_GOALS) as PeerName[]).flatMap((name) => {
    const f = figures[name];
    const endpoint = name === 'oidc-provider' ? 'token introspection' : 'get-session';
    return [
      {
        id: `peers.${name}`,
        what: `svc bearer checks / ${name} ${endpoint}, req/s (server CPU per request: ${f.cpu_ratio.toFixed(2)}x)`,
        ratio: f.ratio,
        goal: f.goal,
        cpuUs: f.svc_cpu_us,
      },
      {
        id: `peers.${name}.ceiling`,
        what: `the bare Fastify route (no check) / ${name} ${endpoint}, same rounds: what this machine allows (CPU: ${f.ceiling_cpu.toFixed(2)}x)`,
        ratio: f.ceiling,
        goal: null,
        cpuUs: f.bare_cpu_us,
      },
    ];
  });
}

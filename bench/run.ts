// `npm run bench`: starts the real server (`svc auth serve`, a separate process) and a bare
// Fastify route (the baseline, also a separate process), drives both with autocannon from
// this process on the same 2-core machine, and reports every figure as a ratio to the
// baseline measured in this same run. Figures are written to bench/results/.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { publicKeyHexOf } from '@svc/core';
import autocannon from 'autocannon';
import { seedSessions } from './seed.js';

const root = new URL('../', import.meta.url).pathname;
const svc = join(root, 'packages/cli/dist/bin.js');
const DURATION = Number(process.env.BENCH_SECONDS ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const SEED = Number(process.env.BENCH_SESSIONS ?? 1_000_000);

interface Proc {
  child: ChildProcess;
  url: string;
}

async function start(args: string[], pattern: RegExp, env: NodeJS.ProcessEnv = {}): Promise<Proc> {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, SVC_LOG_LEVEL: 'error', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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
        resolve({ child, url: m[1] });
      }
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}: ${err}`)));
  });
}

async function stop(p: Proc): Promise<void> {
  if (p.child.exitCode !== null) return;
  const done = new Promise((r) => p.child.once('exit', r));
  p.child.kill('SIGTERM');
  await done;
}

function rssMiB(p: Proc): number {
  const status = readFileSync(`/proc/${p.child.pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return Math.round(kb / 1024);
}

async function cannon(opts: autocannon.Options): Promise<{ rps: number; errors: number; non2xx: number; p99: number }> {
  const result = await autocannon({ connections: CONNECTIONS, duration: DURATION, ...opts });
  return { rps: result.requests.average, errors: result.errors, non2xx: result.non2xx, p99: result.latency.p99 };
}

async function post(url: string, path: string, body: unknown, token?: string): Promise<Record<string, unknown>> {
  const res = await fetch(url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function login(url: string, key: KeyObject, pub: string): Promise<{ access_token: string; refresh_token: string }> {
  const c = await post(url, '/v1/auth/challenges', { public_key: pub });
  const sig = sign(null, Buffer.from(c.challenge as string), key).toString('hex');
  return (await post(url, '/v1/auth/sessions', { challenge_id: c.challenge_id, signature: sig })) as {
    access_token: string;
    refresh_token: string;
  };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  const project = join(work, 'bench');
  const results: Record<string, unknown> = { started_at: new Date().toISOString(), duration_s: DURATION, connections: CONNECTIONS };
  const lines: string[] = [];
  const report = (line: string) => {
    lines.push(line);
    console.log(line);
  };
  try {
    const init = JSON.parse(execFileSync(process.execPath, [svc, 'auth', 'init', '--json', project], { encoding: 'utf8' })) as {
      bootstrap_token: string;
      control_db: string;
    };
    // Several admin devices, so logins spread over keys like real fleets do.
    const keys = Array.from({ length: 8 }, () => generateKeyPairSync('ed25519'));
    const first = keys[0] as { publicKey: KeyObject; privateKey: KeyObject };
    execFileSync(process.execPath, [svc, 'auth', 'enroll', init.bootstrap_token, publicKeyHexOf(first.publicKey), project]);

    const bare = await start(['--import', 'tsx', join(root, 'bench/bare-server.ts')], /listening on (http:\/\/\S+)/);
    let server = await start([svc, 'auth', 'serve', '--listen', '127.0.0.1:0', project], /listening on (http:\/\/\S+)/);
    const firstSession = await login(server.url, first.privateKey, publicKeyHexOf(first.publicKey));
    const devices = [{ key: first.privateKey, pub: publicKeyHexOf(first.publicKey) }];
    for (const k of keys.slice(1)) {
      // More devices via recovery bootstrap tokens (each use audited), enrolled over the API.
      const again = JSON.parse(
        execFileSync(process.execPath, [svc, 'auth', 'init', '--json', '--recover', project], { encoding: 'utf8' }),
      ) as {
        bootstrap_token: string;
      };
      await post(server.url, '/v1/auth/enroll', { bootstrap_token: again.bootstrap_token, public_key: publicKeyHexOf(k.publicKey) });
      devices.push({ key: k.privateKey, pub: publicKeyHexOf(k.publicKey) });
    }

    // Warm both up, then measure the baseline and the bearer route back to back.
    await cannon({ url: bare.url, duration: 1 });
    const bearerHeaders = { authorization: `Bearer ${firstSession.access_token}` };
    await cannon({ url: `${server.url}/v1/auth/me`, headers: bearerHeaders, duration: 1 });
    const baseline = await cannon({ url: bare.url });
    const bearer = await cannon({ url: `${server.url}/v1/auth/me`, headers: bearerHeaders });
    if (bearer.non2xx > 0 || bearer.errors > 0) throw new Error(`bearer run had ${bearer.non2xx} non-2xx, ${bearer.errors} errors`);

    // Complete logins: challenge, then the signed session, per connection in sequence.
    let n = 0;
    const login2 = await cannon({
      url: server.url,
      requests: [
        {
          method: 'POST',
          path: '/v1/auth/challenges',
          headers: { 'content-type': 'application/json' },
          setupRequest: (req, ctx: object) => {
            const context = ctx as Record<string, unknown>;
            const d = devices[n++ % devices.length] as { key: KeyObject; pub: string };
            context.key = d.key;
            return { ...req, body: JSON.stringify({ public_key: d.pub }) };
          },
          onResponse: (status, body, ctx: object) => {
            const context = ctx as Record<string, unknown>;
            if (status === 201) {
              const c = JSON.parse(body) as { challenge_id: string; challenge: string };
              context.challenge_id = c.challenge_id;
              context.challenge = c.challenge;
            }
          },
        },
        {
          method: 'POST',
          path: '/v1/auth/sessions',
          headers: { 'content-type': 'application/json' },
          setupRequest: (req, ctx: object) => {
            const context = ctx as Record<string, unknown>;
            return {
              ...req,
              body: JSON.stringify({
                challenge_id: context.challenge_id,
                signature: sign(null, Buffer.from(context.challenge as string), context.key as KeyObject).toString('hex'),
              }),
            };
          },
        },
      ],
    });
    if (login2.non2xx > 0 || login2.errors > 0) throw new Error(`login run had ${login2.non2xx} non-2xx, ${login2.errors} errors`);
    const logins = login2.rps / 2;

    // Refresh rotations: every connection rotates its own session's chain. autocannon resets a
    // connection's context when it starts its request list over, so the list is one refresh
    // repeated many times: a chain lives as long as the list, and a fresh one starts after.
    const chains: string[] = [];
    for (let i = 0; i < CONNECTIONS * 4; i++) {
      const d = devices[i % devices.length] as { key: KeyObject; pub: string };
      chains.push((await login(server.url, d.key, d.pub)).refresh_token);
    }
    const rotation: autocannon.Request = {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      setupRequest: (req, ctx: object) => {
        const context = ctx as Record<string, unknown>;
        context.rt ??= chains.pop();
        return { ...req, body: JSON.stringify({ refresh_token: context.rt }) };
      },
      onResponse: (status, body, ctx: object) => {
        const context = ctx as Record<string, unknown>;
        if (status === 200) context.rt = (JSON.parse(body) as { refresh_token: string }).refresh_token;
      },
    };
    const refresh = await cannon({ url: `${server.url}/v1/auth/refresh`, requests: Array.from({ length: 20_000 }, () => rotation) });
    if (refresh.non2xx > 0 || refresh.errors > 0) throw new Error(`refresh run had ${refresh.non2xx} non-2xx, ${refresh.errors} errors`);

    const rssSmall = rssMiB(server);
    report(`svc auth benchmark — ${DURATION}s per figure, ${CONNECTIONS} connections, server and load generator on one 2-core machine`);
    report(`store: SQLite (WAL, synchronous=NORMAL)`);
    report(`baseline  bare Fastify route          ${fmt(baseline.rps).padStart(8)} req/s   1.00x`);
    report(
      `bearer    GET /v1/auth/me             ${fmt(bearer.rps).padStart(8)} req/s   ${(bearer.rps / baseline.rps).toFixed(2)}x   (target >= 0.50x)`,
    );
    report(
      `login     challenge + signed session  ${fmt(logins).padStart(8)} /s      ${(logins / baseline.rps).toFixed(2)}x   (target >= 2,000/s)`,
    );
    report(
      `refresh   rotation                    ${fmt(refresh.rps).padStart(8)} /s      ${(refresh.rps / baseline.rps).toFixed(2)}x   (target >= 4,000/s)`,
    );
    Object.assign(results, {
      store: 'sqlite',
      synchronous: 'NORMAL',
      baseline_rps: baseline.rps,
      bearer_rps: bearer.rps,
      bearer_ratio: bearer.rps / baseline.rps,
      logins_per_s: logins,
      logins_ratio: logins / baseline.rps,
      refresh_per_s: refresh.rps,
      refresh_ratio: refresh.rps / baseline.rps,
      p99_ms: { baseline: baseline.p99, bearer: bearer.p99, login_pair: login2.p99, refresh: refresh.p99 },
    });

    // Bearer validation with 1,000,000 sessions in the store, against the same run's figure.
    if (SEED > 0) {
      await stop(server);
      const t0 = Date.now();
      seedSessions(init.control_db, SEED);
      const seedS = (Date.now() - t0) / 1000;
      server = await start([svc, 'auth', 'serve', '--listen', '127.0.0.1:0', project], /listening on (http:\/\/\S+)/);
      const fresh = await login(server.url, first.privateKey, publicKeyHexOf(first.publicKey));
      const headers = { authorization: `Bearer ${fresh.access_token}` };
      await cannon({ url: `${server.url}/v1/auth/me`, headers, duration: 1 });
      const base2 = await cannon({ url: bare.url });
      const big = await cannon({ url: `${server.url}/v1/auth/me`, headers });
      const rssBig = rssMiB(server);
      report(
        `bearer    with ${fmt(SEED)} sessions     ${fmt(big.rps).padStart(8)} req/s   ${(big.rps / base2.rps).toFixed(2)}x   (${(big.rps / base2.rps / (bearer.rps / baseline.rps)).toFixed(2)}x of the small-store ratio; seeded in ${seedS.toFixed(1)}s)`,
      );
      report(`memory    server RSS ${rssSmall} MiB with a small store, ${rssBig} MiB with ${fmt(SEED)} sessions`);
      Object.assign(results, {
        seeded_sessions: SEED,
        bearer_big_rps: big.rps,
        bearer_big_ratio: big.rps / base2.rps,
        bearer_big_vs_small: big.rps / base2.rps / (bearer.rps / baseline.rps),
        rss_mib: { small: rssSmall, big: rssBig },
      });
    }
    await stop(server);
    await stop(bare);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const dir = join(root, 'bench/results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(join(dir, 'latest.txt'), `${lines.join('\n')}\n`);
  console.log(`figures written to bench/results/latest.json`);
}

await main();

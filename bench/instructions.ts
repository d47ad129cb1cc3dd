// `node --import tsx bench/instructions.ts <me|ceiling|bare|gateway|login|login-ceiling> [TREE]`:
// user-space instructions per request (or per login) of one server, counted by valgrind's
// callgrind, for a change too small for this VM's CPU time to show (docs/performance.md,
// 2026-11-29 at 16:00 and at 19:30).
// A slow VM does not move the count of code once compiled, but a process's draw (2026-11-29 at
// 13:00) can, and so can a busy machine (it moves what V8 compiles when): count a few processes
// of each build, on an otherwise idle machine.
//
//   me       `svc auth serve` of TREE (default: this checkout), `GET /v1/auth/me` on SQLite
//   ceiling  bench/sqlite-read-server.ts on a store TREE's CLI made
//   bare     bench/bare-server.ts
//   gateway  TREE's bench/gateway-server.ts (`plain`) in front of the bare route
//   login    `svc auth serve` of TREE, complete logins on SQLite (a challenge, then the signed
//            session; the load generator signs): per login, every thread (the signature is
//            checked on libuv's pool, the WAL checkpointed on the store's own thread) and the
//            main thread alone. CONNECTIONS (default 8) sets how many logins are under way
//            at once, and so how many share a commit: compare builds at the same value.
//   login-ceiling  the same logins to bench/login-floor-server.ts `sqlite` (the storage
//            ceiling; it checks the signature on its main thread)
//
// The server runs under `valgrind --tool=callgrind --instr-atstart=no`: WARMUP requests
// uninstrumented (default 10,000: the compiler threads are idle by then), then COUNT requests
// (default 2,000) instrumented, 8 connections (the login modes: 2,000 and 400 logins).
// VALGRIND_FLAGS adds options (`--cache-sim=yes --branch-sim=yes` for simulated cache misses
// and mispredicted branches). Needs Debian's `valgrind`.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import autocannon from 'autocannon';
import { type Device, login, loginRequests, type Proc, root, setupProject, start, stop } from './harness.js';

const MODES = ['me', 'ceiling', 'bare', 'gateway', 'login', 'login-ceiling'] as const;
const [mode, treeArg] = process.argv.slice(2);
if (!MODES.includes(mode as (typeof MODES)[number])) {
  process.stderr.write(`usage: bench/instructions.ts <${MODES.join('|')}> [TREE]\n`);
  process.exit(2);
}
const tree = resolve(treeArg ?? root);
const svc = join(tree, 'node_modules/.bin/svc');
const logins = mode === 'login' || mode === 'login-ceiling';
const WARMUP = Number(process.env.WARMUP ?? (logins ? 2_000 : 10_000));
const COUNT = Number(process.env.COUNT ?? (logins ? 400 : 2_000));
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 8);
// autocannon shares `amount` out evenly over the connections: a connection with an odd share would
// end on a challenge without its session, a request counted as no login.
if (logins && (WARMUP % CONNECTIONS !== 0 || COUNT % CONNECTIONS !== 0)) {
  process.stderr.write(
    `bench/instructions.ts: WARMUP (${WARMUP}) and COUNT (${COUNT}) must be multiples of CONNECTIONS (${CONNECTIONS})\n`,
  );
  process.exit(2);
}
const READY = /listening on (http:\/\/\S+)/;
const work = mkdtempSync(join(tmpdir(), 'svc-instructions-'));
const helpers: Proc[] = [];

/** What to run under callgrind, the path to request and the headers to send. */
async function target(): Promise<{
  args: string[];
  path: string;
  headers: (url: string) => Promise<Record<string, string>>;
  requests?: autocannon.Request[];
}> {
  const none = async () => ({});
  if (mode === 'bare') return { args: ['--import', 'tsx', join(root, 'bench/bare-server.ts')], path: '/', headers: none };
  if (mode === 'gateway') {
    const upstream = await start(['--import', 'tsx', join(root, 'bench/bare-server.ts')], READY);
    helpers.push(upstream);
    const tokenFile = join(work, 'token');
    return {
      args: ['--import', 'tsx', join(tree, 'bench/gateway-server.ts'), upstream.url, 'plain', tokenFile],
      path: '/',
      headers: async () => ({ authorization: `Bearer ${readFileSync(tokenFile, 'utf8')}` }),
    };
  }
  const project = join(work, 'project');
  const { devices, controlDb } = setupProject(project, 'sqlite', '', svc);
  const device = devices[0] as Device;
  if (mode === 'login-ceiling') {
    return {
      args: ['--import', 'tsx', join(root, 'bench/login-floor-server.ts'), 'sqlite'],
      path: '',
      headers: none,
      requests: loginRequests(devices),
    };
  }
  if (logins) {
    return { args: [svc, 'auth', 'serve', '--listen', '127.0.0.1:0', project], path: '', headers: none, requests: loginRequests(devices) };
  }
  if (mode === 'me') {
    return {
      args: [svc, 'auth', 'serve', '--listen', '127.0.0.1:0', project],
      path: '/v1/auth/me',
      headers: async (url) => ({ authorization: `Bearer ${(await login(url, device.key, device.pub)).access_token}` }),
    };
  }
  // The ceiling reads the store file: a session signed in through svc first.
  const server = await start([svc, 'auth', 'serve', '--listen', '127.0.0.1:0', project], READY);
  const token = (await login(server.url, device.key, device.pub)).access_token;
  await stop(server);
  return {
    args: ['--import', 'tsx', join(root, 'bench/sqlite-read-server.ts'), controlDb],
    path: '/',
    headers: async () => ({ authorization: `Bearer ${token}` }),
  };
}

try {
  const { args, path, headers, requests } = await target();
  const out = join(work, 'callgrind.out');
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      '--smc-check=all-non-file',
      '--separate-threads=yes',
      ...(process.env.VALGRIND_FLAGS ?? '').split(' ').filter(Boolean),
      `--callgrind-out-file=${out}`,
      process.execPath,
      ...args,
    ],
    // valgrind's own messages (and the server's errors) to this terminal: a piped stderr nobody read could fill and stall it.
    { env: { ...process.env, SVC_LOG_LEVEL: 'error' }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise((r) => child.once('exit', r));
  const url = await new Promise<string>((ok, fail) => {
    let seen = '';
    const timer = setTimeout(() => fail(new Error('the server under valgrind did not print its address within 300 s')), 300_000);
    child.stdout.on('data', (d: Buffer) => {
      seen += d.toString();
      const m = READY.exec(seen);
      if (m?.[1]) {
        clearTimeout(timer);
        ok(m[1]);
      }
    });
    child.once('exit', (code) => fail(new Error(`the server under valgrind exited ${code} before listening`)));
  });
  const sent = await headers(url);
  // A login is two requests.
  const perUnit = logins ? 2 : 1;
  const load = async (amount: number) => {
    const r = await autocannon({
      url: `${url}${path}`,
      connections: CONNECTIONS,
      amount: amount * perUnit,
      headers: sent,
      timeout: 60,
      ...(requests === undefined ? {} : { requests }),
    });
    if (r.non2xx > 0 || r.errors > 0) throw new Error(`${r.non2xx} non-2xx answers, ${r.errors} errors`);
  };
  await load(WARMUP);
  execFileSync('callgrind_control', ['--instr=on', String(child.pid)], { stdio: 'ignore' });
  await load(COUNT);
  execFileSync('callgrind_control', ['--instr=off', String(child.pid)], { stdio: 'ignore' });
  child.kill('SIGTERM');
  await exited;
  // `--separate-threads=yes`: a file per thread, the main thread's ending in -01.
  const files = readdirSync(work).filter((f) => /^callgrind\.out-\d+$/.test(f));
  if (!files.includes('callgrind.out-01')) throw new Error('callgrind wrote no file for the main thread');
  let events: string[] = [];
  const sum = (names: readonly string[]) => {
    const totals: number[] = [];
    for (const name of names) {
      const text = readFileSync(join(work, name), 'utf8');
      events = /^events: (.*)$/m.exec(text)?.[1]?.split(' ') ?? events;
      for (const [i, n] of (/^totals: (.*)$/m.exec(text)?.[1]?.split(' ').map(Number) ?? []).entries()) totals[i] = (totals[i] ?? 0) + n;
    }
    return events.map((e, i) => `${e} ${Math.round((totals[i] ?? 0) / COUNT).toLocaleString('en-US')}`).join(', ');
  };
  const unit = logins ? `per login (${CONNECTIONS} connections)` : 'per request';
  console.log(`${mode} (${tree}): ${unit}, main thread: ${sum(['callgrind.out-01'])}`);
  if (logins) console.log(`${mode} (${tree}): ${unit}, every thread: ${sum(files)}`);
} finally {
  for (const p of helpers) await stop(p).catch(() => undefined);
  rmSync(work, { recursive: true, force: true });
}
process.exit(0);

import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Where Debian puts the server binaries; `SVC_TEST_PG_BIN` overrides it. */
export const PG_BIN = process.env.SVC_TEST_PG_BIN ?? '/usr/lib/postgresql/15/bin';

/**
 * A PostgreSQL cluster of its own for fault tests (restart, freeze), never the shared test
 * server: `initdb` in a temporary directory owned by the `postgres` user, `pg_ctl` on a free
 * loopback port. Call `dispose()` in `after` (it thaws, stops and deletes the cluster whatever
 * state a failed test left it in).
 */
export interface PrivatePostgres {
  readonly url: string;
  readonly port: number;
  /** `pg_ctl restart -m fast`: every backend is terminated (57P01), then the server comes back. */
  restart(): Promise<void>;
  /** `pg_ctl stop -m fast`. */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** SIGSTOP to the postmaster and every backend: the server stops answering, connections stay open. */
  freeze(): void;
  /** SIGCONT to the same processes. */
  thaw(): void;
  dispose(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** The postmaster's pid and its children's (the backends and auxiliary processes). */
export function clusterPids(dataDir: string): number[] {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return [];
  const postmaster = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isSafeInteger(postmaster) || postmaster <= 0) return [];
  const pids = [postmaster];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces, so parse after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === postmaster) pids.push(Number(entry));
    } catch {
      // The process ended meanwhile.
    }
  }
  return pids;
}

export function asPostgres(file: string, args: readonly string[]): Promise<unknown> {
  return run('runuser', ['-u', 'postgres', '--', file, ...args], { timeout: 120_000 });
}

/**
 * Creates and starts a private cluster (on 127.0.0.1 only, fsync off: it is thrown away): with
 * trust authentication, or, given `password`, with scram-sha-256 for every connection and that
 * password for the `postgres` role (`url` then holds no password). Needs root (it runs the server
 * as `postgres` with runuser).
 */
export async function startPrivatePostgres(opts: { readonly password?: string } = {}): Promise<PrivatePostgres> {
  const root = mkdtempSync(join(tmpdir(), 'svc-private-pg-'));
  const { uid, gid } = await run('id', ['-u', 'postgres']).then(async (u) => ({
    uid: Number(u.stdout.trim()),
    gid: Number((await run('id', ['-g', 'postgres'])).stdout.trim()),
  }));
  chownSync(root, uid, gid);
  const data = join(root, 'data');
  const port = await freePort();
  const pgCtl = join(PG_BIN, 'pg_ctl');
  const options = `-h 127.0.0.1 -p ${port} -k ${root} -c fsync=off -c full_page_writes=off -c max_connections=50`;
  const start = () => asPostgres(pgCtl, ['-D', data, '-o', options, '-l', join(root, 'log'), '-w', '-t', '60', 'start']);
  let frozen: number[] = [];
  let disposed = false;
  try {
    const auth = ['-A', 'trust'];
    if (opts.password !== undefined) {
      const pwfile = join(root, 'pwfile');
      writeFileSync(pwfile, `${opts.password}\n`, { mode: 0o600 });
      chownSync(pwfile, uid, gid);
      auth.splice(0, 2, '-A', 'scram-sha-256', `--pwfile=${pwfile}`);
    }
    await asPostgres(join(PG_BIN, 'initdb'), ['-D', data, ...auth, '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
    await start();
  } catch (err) {
    rmSync(root, { recursive: true, force: true });
    throw err;
  }
  const thaw = () => {
    for (const pid of frozen) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // Gone already.
      }
    }
    frozen = [];
  };
  // Last resort when the test process ends without running `dispose` (a runner timeout, an
  // uncaught error): never leave a frozen or running cluster behind.
  const onExit = () => {
    thaw();
    if (existsSync(join(data, 'postmaster.pid'))) {
      try {
        execFileSync('runuser', ['-u', 'postgres', '--', pgCtl, '-D', data, '-m', 'immediate', '-w', 'stop'], { stdio: 'ignore' });
      } catch {
        // Best effort.
      }
    }
    rmSync(root, { recursive: true, force: true });
  };
  process.once('exit', onExit);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      onExit();
      process.exit(1);
    });
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    restart: async () => {
      await asPostgres(pgCtl, ['-D', data, '-o', options, '-l', join(root, 'log'), '-m', 'fast', '-w', '-t', '60', 'restart']);
    },
    stop: async () => {
      await asPostgres(pgCtl, ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop']);
    },
    start: async () => {
      await start();
    },
    freeze: () => {
      // Listed again until nothing new appears: a backend the postmaster forked between the
      // listing and its own stop (a pool opening a connection just then) is stopped too.
      const stopped = new Set<number>();
      for (;;) {
        const fresh = clusterPids(data).filter((pid) => !stopped.has(pid));
        if (fresh.length === 0) break;
        for (const pid of fresh) {
          process.kill(pid, 'SIGSTOP');
          stopped.add(pid);
        }
      }
      frozen = [...stopped];
      if (frozen.length === 0) throw new Error('no PostgreSQL processes to freeze');
    },
    thaw,
    dispose: async () => {
      if (disposed) return;
      disposed = true;
      process.removeListener('exit', onExit);
      thaw();
      try {
        if (existsSync(join(data, 'postmaster.pid'))) await asPostgres(pgCtl, ['-D', data, '-m', 'immediate', '-w', '-t', '60', 'stop']);
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    },
  };
}

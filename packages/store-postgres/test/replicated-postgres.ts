import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { asPostgres, clusterPids, freePort, PG_BIN } from './private-postgres.js';

const run = promisify(execFile);

/**
 * A PostgreSQL primary and a streaming standby of their own (never the shared test server), as
 * docs/deployment.md sets them up: `initdb`, the primary started with `synchronous_standby_names
 * '*'` (every commit waits until the standby has flushed it), `pg_basebackup -R` for the standby.
 * Both run as the `postgres` OS user on free loopback ports with trust authentication (tests
 * only). Call `dispose()` in `after`.
 */
export interface ReplicatedPostgres {
  readonly primaryPort: number;
  readonly standbyPort: number;
  /** Both hosts, libpq style, with `target_session_attrs=read-write`: what the nodes are given. */
  readonly url: string;
  /** The standby alone (to inspect it). */
  readonly standbyUrl: string;
  /** The primary host dies: SIGKILL to its postmaster and every backend at once. */
  killPrimary(): void;
  /** `pg_ctl promote -w` on the standby: it leaves recovery and takes writes. */
  promote(): Promise<void>;
  /** `pg_ctl stop -m fast` on the standby: the primary's commits wait for it. */
  stopStandby(): Promise<void>;
  /** Starts the standby again; resolves once it streams synchronously again. */
  startStandby(): Promise<void>;
  dispose(): Promise<void>;
}

/** Polls `check` every 100 ms for at most `ms`; fails naming `what`. */
async function waitFor(what: string, check: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check().catch(() => false))) {
    if (Date.now() > until) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function queryOne<T>(url: string, sql: string): Promise<T | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query(sql)).rows[0] as T | undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Starts the primary, clones the standby from it and waits until the standby streams synchronously. Needs root. */
export async function startReplicatedPostgres(): Promise<ReplicatedPostgres> {
  const root = mkdtempSync(join(tmpdir(), 'svc-replicated-pg-'));
  const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
  chownSync(root, uid, gid);
  const primary = join(root, 'primary');
  const standby = join(root, 'standby');
  const primaryPort = await freePort();
  const standbyPort = await freePort();
  const pgCtl = join(PG_BIN, 'pg_ctl');
  const common = `-h 127.0.0.1 -k ${root} -c fsync=off -c max_connections=60 -c wal_level=replica -c max_wal_senders=5`;
  // synchronous_standby_names only on the primary's command line: the standby's copy of the
  // configuration does not carry it, so once promoted it commits alone instead of waiting for a
  // standby that is not there.
  const primaryOptions = `${common} -p ${primaryPort} -c synchronous_standby_names='*' -c synchronous_commit=on`;
  const standbyOptions = `${common} -p ${standbyPort} -c hot_standby=on`;
  const stopAll = () => {
    for (const data of [primary, standby]) {
      if (!existsSync(join(data, 'postmaster.pid'))) continue;
      try {
        execFileSync('runuser', ['-u', 'postgres', '--', pgCtl, '-D', data, '-m', 'immediate', '-w', 'stop'], { stdio: 'ignore' });
      } catch {
        // Best effort (a killed primary has no server to stop).
      }
    }
  };
  const onExit = () => {
    stopAll();
    rmSync(root, { recursive: true, force: true });
  };
  process.once('exit', onExit);
  const primaryUrl = `postgres://postgres@127.0.0.1:${primaryPort}/postgres`;
  const standbyUrl = `postgres://postgres@127.0.0.1:${standbyPort}/postgres`;
  const startStandby = async () => {
    await asPostgres(pgCtl, ['-D', standby, '-o', standbyOptions, '-l', join(root, 'standby.log'), '-w', '-t', '60', 'start']);
    await waitFor('the standby to stream synchronously from the primary (pg_stat_replication sync_state = sync)', async () => {
      const row = await queryOne<{ sync_state: string }>(primaryUrl, 'SELECT sync_state FROM pg_stat_replication');
      return row?.sync_state === 'sync';
    });
  };
  try {
    await asPostgres(join(PG_BIN, 'initdb'), ['-D', primary, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
    await asPostgres(pgCtl, ['-D', primary, '-o', primaryOptions, '-l', join(root, 'primary.log'), '-w', '-t', '60', 'start']);
    await asPostgres(join(PG_BIN, 'pg_basebackup'), [
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-D',
      standby,
      '-R',
      '-X',
      'stream',
      '--no-sync',
    ]);
    await startStandby();
  } catch (err) {
    process.removeListener('exit', onExit);
    onExit();
    throw err;
  }
  let disposed = false;
  return {
    primaryPort,
    standbyPort,
    url: `postgres://postgres@127.0.0.1:${primaryPort},127.0.0.1:${standbyPort}/postgres?target_session_attrs=read-write`,
    standbyUrl,
    killPrimary() {
      const pids = clusterPids(primary);
      if (pids.length === 0) throw new Error('the primary is not running');
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Ended meanwhile.
        }
      }
    },
    async promote() {
      await asPostgres(pgCtl, ['-D', standby, '-w', '-t', '60', 'promote']);
    },
    async stopStandby() {
      await asPostgres(pgCtl, ['-D', standby, '-m', 'fast', '-w', '-t', '60', 'stop']);
    },
    startStandby,
    async dispose() {
      if (disposed) return;
      disposed = true;
      process.removeListener('exit', onExit);
      onExit();
    },
  };
}

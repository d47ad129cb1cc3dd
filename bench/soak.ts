// `node --import tsx bench/soak.ts`: a short soak of the store and the domain (no HTTP), to find
// costs that grow with the database. One real SQLite control store in a temp dir, core's use
// cases on it with the real clock, and windows of the same mixed work: sign in (challenge,
// signature, session), refresh, two bearer checks, and every 50th iteration the diagnostics
// counters. Prints, per window, the database size and the time each kind of work took, and
// at the end the last window's costs as ratios to the first's. Figures are ratios within one
// run on this machine, not absolute speeds.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { type AuthDeps, authenticate, createChallenge, createSession, rotateRefreshToken, silentLogger } from '@svc/core';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import type { Store } from '@svc/core/store';
import { newDeviceKey } from '@svc/store-testkit';
import Database from 'better-sqlite3';
import { openSqliteStore } from 'svc-store-sqlite';

const WINDOWS = Number(process.env.SOAK_WINDOWS ?? 12);
const PER_WINDOW = Number(process.env.SOAK_ITERATIONS ?? 2000);

type Kind = 'challenge' | 'sign_in' | 'refresh' | 'bearer' | 'stats';

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-soak-'));
  const file = join(dir, 'control.db');
  const store: Store = await openSqliteStore({ file });
  const { randomBytes } = await import('node:crypto');
  const deps: AuthDeps = {
    store,
    clock: { now: Date.now },
    random: (n) => randomBytes(n),
    log: silentLogger,
    projectId: 'prj_01KAQ0000000S0AKTESTPR0JCT',
    settings: DEFAULT_AUTH_SETTINGS,
  };
  await store.initProject({ projectId: deps.projectId, createdAt: Date.now() });
  const key = newDeviceKey();
  const { deviceRecord, enrolledEvent } = await import('../packages/store-testkit/src/fixtures.js');
  const device = deviceRecord(deps, 'management', key);
  await store.enrollDevice(device, enrolledEvent(deps, device));
  const raw = new Database(file, { readonly: true });
  const groupBy = raw.prepare('SELECT type, COUNT(*) AS n FROM audit_events GROUP BY type');
  const liveSessions = raw.prepare(
    'SELECT realm, COUNT(*) AS n FROM sessions WHERE revoked_at IS NULL AND expires_at > @now AND refresh_expires_at > @now GROUP BY realm',
  );
  const rows: Record<string, number>[] = [];
  try {
    for (let w = 0; w < WINDOWS; w++) {
      const spent: Record<Kind, number> = { challenge: 0, sign_in: 0, refresh: 0, bearer: 0, stats: 0 };
      const loop = monitorEventLoopDelay({ resolution: 1 });
      loop.enable();
      const t0 = performance.now();
      for (let i = 0; i < PER_WINDOW; i++) {
        let t = performance.now();
        const chl = await createChallenge(deps, { publicKey: key.publicKey, realm: 'management' });
        spent.challenge += performance.now() - t;
        t = performance.now();
        const pair = await createSession(deps, { challengeId: chl.id, signature: key.sign(chl.challenge), realm: 'management' });
        spent.sign_in += performance.now() - t;
        t = performance.now();
        const next = await rotateRefreshToken(deps, { refreshToken: pair.refresh_token, realm: 'management' });
        spent.refresh += performance.now() - t;
        t = performance.now();
        await authenticate(deps, { token: next.access_token, realm: 'management' });
        await authenticate(deps, { token: next.access_token, realm: 'management' });
        spent.bearer += performance.now() - t;
        if (i % 50 === 0) {
          t = performance.now();
          await store.stats(Date.now());
          spent.stats += performance.now() - t;
        }
      }
      const total = performance.now() - t0;
      loop.disable();
      // What the diagnostics query cost before migration 006, on the same trail, for comparison.
      const g0 = performance.now();
      for (let k = 0; k < 5; k++) groupBy.all();
      const groupByMs = (performance.now() - g0) / 5;
      const l0 = performance.now();
      for (let k = 0; k < 5; k++) liveSessions.all({ now: Date.now() });
      const liveMs = (performance.now() - l0) / 5;
      const size = statSync(file).size + (statSync(`${file}-wal`, { throwIfNoEntry: false })?.size ?? 0);
      const row = {
        window: w + 1,
        db_mib: Math.round((size / 2 ** 20) * 10) / 10,
        iter_per_s: Math.round((PER_WINDOW / total) * 1000),
        challenge_ms: Math.round(spent.challenge),
        sign_in_ms: Math.round(spent.sign_in),
        refresh_ms: Math.round(spent.refresh),
        bearer_ms: Math.round(spent.bearer),
        stats_ms_each: Math.round((spent.stats / Math.ceil(PER_WINDOW / 50)) * 1000) / 1000,
        group_by_ms_each: Math.round(groupByMs * 1000) / 1000,
        live_sessions_count_ms: Math.round(liveMs * 1000) / 1000,
        // How long the event loop was held up: the longest synchronous stretches of the work.
        loop_p99_ms: Math.round(loop.percentile(99) / 1e4) / 100,
        loop_max_ms: Math.round(loop.max / 1e4) / 100,
      };
      rows.push(row);
      console.log(JSON.stringify(row));
    }
    const first = rows[0] as Record<string, number>;
    const last = rows.at(-1) as Record<string, number>;
    const ratio = (k: string) => Math.round(((last[k] as number) / (first[k] as number)) * 100) / 100;
    console.log(
      JSON.stringify({
        last_over_first: {
          iter_per_s: ratio('iter_per_s'),
          challenge_ms: ratio('challenge_ms'),
          sign_in_ms: ratio('sign_in_ms'),
          refresh_ms: ratio('refresh_ms'),
          bearer_ms: ratio('bearer_ms'),
          stats_ms_each: ratio('stats_ms_each'),
          group_by_ms_each: ratio('group_by_ms_each'),
          live_sessions_count_ms: ratio('live_sessions_count_ms'),
          loop_p99_ms: ratio('loop_p99_ms'),
          loop_max_ms: ratio('loop_max_ms'),
        },
        group_by_over_kept_counts_last_window: Math.round(((last.group_by_ms_each as number) / (last.stats_ms_each as number)) * 10) / 10,
      }),
    );
  } finally {
    raw.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();

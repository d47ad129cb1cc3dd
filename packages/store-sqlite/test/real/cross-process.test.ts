import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import {
  type AuthDeps,
  auditDraft,
  authenticate,
  createChallenge,
  createSession,
  enrollWithBootstrapToken,
  issueBootstrapToken,
  newId,
  type TokenPairJson,
  verifyAuditChain,
} from '@svc/core';
import { createFakeClock, makeDeps, newDeviceKey } from '@svc/store-testkit';
import { openSqliteStore, type SqliteStore } from 'svc-store-sqlite';
import { ownerOnlyTempDir } from '../temp-dir.js';
import type { RacerMessage, RacerResult, RaceTask } from '../workers/race-task.js';

/** Several threads, each with its own connections: real lock contention on one file. */
const WORKERS = 5;
const ATTEMPTS_PER_WORKER = 10;
const RACERS = WORKERS * ATTEMPTS_PER_WORKER;

const temp = await ownerOnlyTempDir();
let n = 0;

/** Waits for the next message of a worker; a worker that errors or exits fails the wait. */
function nextMessage(worker: Worker): Promise<RacerMessage> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
    };
    const onMessage = (m: RacerMessage) => {
      cleanup();
      resolve(m);
    };
    const onError = (e: Error) => {
      cleanup();
      reject(e);
    };
    const onExit = (code: number) => {
      cleanup();
      reject(new Error(`a racer exited with code ${code}`));
    };
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
  });
}

let pool: Worker[] = [];

before(async () => {
  const entry = new URL('../workers/racer.ts', import.meta.url).href;
  pool = Array.from({ length: WORKERS }, () => new Worker(new URL('../workers/boot.mjs', import.meta.url), { workerData: { entry } }));
  await Promise.all(pool.map(nextMessage));
});

after(async () => {
  await Promise.all(pool.map((w) => w.terminate()));
  await temp.remove();
});

/**
 * One round on the pool: every worker opens its connections and waits at a SharedArrayBuffer
 * barrier; once all are there they are released together, and every attempt's result is collected.
 */
async function race(file: string, now: number, scenario: RaceTask['scenario']): Promise<RacerResult[]> {
  const barrier = new SharedArrayBuffer(8);
  const slots = new Int32Array(barrier);
  const release = () => {
    Atomics.store(slots, 1, 1);
    Atomics.notify(slots, 1);
  };
  const replies = pool.map((worker) => {
    const reply = nextMessage(worker);
    worker.postMessage({ file, attempts: ATTEMPTS_PER_WORKER, now, barrier, scenario } satisfies RaceTask);
    // A round that fails in one worker must not leave the others waiting at the barrier.
    reply.then((m) => 'error' in m && release(), release);
    return reply;
  });
  // Polling is enough here: the race starts when the workers are released, not when we notice they are ready.
  const deadline = Date.now() + 60_000;
  while (Atomics.load(slots, 0) < WORKERS && Atomics.load(slots, 1) === 0) {
    if (Date.now() > deadline) {
      release();
      assert.fail(`waited 60 s for ${WORKERS} racers to reach the barrier (${Atomics.load(slots, 0)} did)`);
    }
    await sleep(5);
  }
  release();
  const results: RacerResult[] = [];
  for (const m of await Promise.all(replies)) {
    if ('error' in m) assert.fail(`a racer failed: ${m.error}`);
    if ('results' in m) results.push(...m.results);
  }
  return results;
}

function tally(results: readonly RacerResult[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of results) counts[r.outcome] = (counts[r.outcome] ?? 0) + 1;
  return counts;
}

/** Enrolls an application device straight through the store and signs it in. */
async function signInApplicationDevice(deps: AuthDeps): Promise<TokenPairJson> {
  const key = newDeviceKey();
  const device = {
    id: newId('device', deps.clock, deps.random),
    publicKey: key.publicKey,
    realm: 'application' as const,
    subject: newId('subject', deps.clock, deps.random),
    name: 'app',
    createdAt: deps.clock.now(),
    removedAt: null,
  };
  await deps.store.enrollDevice(device, auditDraft(deps, 'device.enrolled', { realm: 'application', deviceId: device.id }));
  const challenge = await createChallenge(deps, { publicKey: key.publicKey, realm: 'application' });
  return createSession(deps, { challengeId: challenge.id, signature: key.sign(challenge.challenge), realm: 'application' });
}

async function withStore(fn: (store: SqliteStore, file: string) => Promise<void>): Promise<void> {
  const file = `${temp.dir}/race-${++n}.db`;
  const store = await openSqliteStore({ file });
  try {
    await fn(store, file);
  } finally {
    await store.close();
  }
}

describe(`cross-thread races: ${RACERS} attempts on ${RACERS} connections in ${WORKERS} worker threads, released together`, () => {
  test('one bootstrap token enrolls exactly one device', () =>
    withStore(async (store, file) => {
      const clock = createFakeClock();
      const deps = makeDeps(store, clock);
      const { token } = await issueBootstrapToken(deps, { recovery: false });
      const results = await race(file, clock.now(), { kind: 'bootstrap', token });
      assert.equal(results.length, RACERS);
      assert.deepEqual(tally(results), { ok: 1, bootstrap_token_used: RACERS - 1 });
      assert.equal(await store.countDevices('management'), 1);
      const events = await store.listAuditEvents({ afterSeq: 0, limit: 1000 });
      assert.deepEqual(
        events.map((e) => e.type),
        ['bootstrap.issued', 'device.enrolled'],
      );
    }));

  test('one challenge signs in exactly once', () =>
    withStore(async (store, file) => {
      const clock = createFakeClock();
      const deps = makeDeps(store, clock);
      const key = newDeviceKey();
      const { token } = await issueBootstrapToken(deps, { recovery: false });
      await enrollWithBootstrapToken(deps, { bootstrapToken: token, publicKey: key.publicKey });
      const challenge = await createChallenge(deps, { publicKey: key.publicKey, realm: 'management' });
      const results = await race(file, clock.now(), {
        kind: 'challenge',
        challengeId: challenge.id,
        signature: key.sign(challenge.challenge),
      });
      assert.deepEqual(tally(results), { ok: 1, invalid_challenge: RACERS - 1 });
      assert.equal((await store.listActiveSessions({ now: clock.now() })).length, 1);
      const winner = results.find((r) => r.outcome === 'ok');
      assert.ok(winner?.accessToken !== undefined);
      await authenticate(deps, { token: winner.accessToken, realm: 'management' });
      const failed = (await store.listAuditEvents({ afterSeq: 0, limit: 1000 })).filter((e) => e.type === 'signin.failed');
      assert.equal(failed.length, RACERS - 1, 'every losing attempt is audited');
    }));

  test('one refresh token presented by racing processes is rotated exactly once; every racer within grace holds the one live pair', () =>
    withStore(async (store, file) => {
      const clock = createFakeClock();
      const deps = makeDeps(store, clock);
      const first = await signInApplicationDevice(deps);
      const results = await race(file, clock.now(), { kind: 'refresh', refreshToken: first.refresh_token, graceMs: 10_000 });
      const counts = tally(results);
      assert.equal(counts.rotated, 1);
      // All racers present within the grace interval: each loser is answered with the winner's pair.
      assert.equal(counts.rotated_in_grace, RACERS - 1);
      assert.equal(new Set(results.map((r) => r.accessToken)).size, 1, 'never two live pairs');
      for (const r of results) {
        if (r.accessToken === undefined) continue;
        await authenticate(deps, { token: r.accessToken, realm: 'application' });
      }
      assert.equal((await store.getSession(first.session_id))?.generation, 1);
      assert.equal(verifyAuditChain(await store.listAuditEvents({ afterSeq: 0, limit: 1000 })).ok, true);
    }));
});

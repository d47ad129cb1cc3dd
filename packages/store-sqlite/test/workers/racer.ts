import { parentPort } from 'node:worker_threads';
import {
  type AuthDeps,
  auditDraft,
  createSession,
  digestToken,
  enrollWithBootstrapToken,
  mintSessionToken,
  parseSessionToken,
} from '@svc/core';
import { openSuccessor, sealSuccessor } from '@svc/core/store';
import { createFakeClock, makeDeps, newDeviceKey } from '@svc/store-testkit';
import { openSqliteStore, type SqliteStore } from 'svc-store-sqlite';
import type { RacerResult, RaceTask } from './race-task.js';

const BARRIER_READY = 0;
const BARRIER_GO = 1;

/** One attempt at the single-use credential; every refusal is reported by its code. */
async function attempt(task: RaceTask, deps: AuthDeps, store: SqliteStore): Promise<RacerResult> {
  try {
    switch (task.scenario.kind) {
      case 'bootstrap': {
        await enrollWithBootstrapToken(deps, { bootstrapToken: task.scenario.token, publicKey: newDeviceKey().publicKey });
        return { outcome: 'ok' };
      }
      case 'challenge': {
        const pair = await createSession(deps, {
          challengeId: task.scenario.challengeId,
          signature: task.scenario.signature,
          realm: 'management',
        });
        return { outcome: 'ok', accessToken: pair.access_token };
      }
      case 'refresh': {
        const now = deps.clock.now();
        const presented = parseSessionToken(task.scenario.refreshToken, 'refresh');
        if (presented === null) throw new TypeError('the race task carries no refresh token');
        const access = mintSessionToken('access', presented.sessionId, deps.random);
        const refresh = mintSessionToken('refresh', presented.sessionId, deps.random);
        const result = await store.rotateRefreshToken(
          {
            sessionId: presented.sessionId,
            presentedDigest: presented.digest,
            realm: 'application',
            now,
            graceMs: task.scenario.graceMs,
            next: {
              accessDigest: digestToken(access),
              refreshDigest: digestToken(refresh),
              accessExpiresAt: now + 900_000,
              refreshExpiresAt: now + 86_400_000,
            },
            sealedSuccessor: sealSuccessor(task.scenario.refreshToken, presented.sessionId, { access, refresh }, deps.random),
          },
          (o) =>
            auditDraft(
              deps,
              o.kind === 'rotated'
                ? 'session.rotated'
                : o.kind === 'rotated_in_grace'
                  ? 'session.rotated_in_grace'
                  : 'session.refresh_reused',
              {
                realm: o.session.realm,
                sessionId: o.session.id,
                data: { generation: o.session.generation },
              },
            ),
        );
        // Within grace the answer is the live pair, sealed for the presented token.
        const live =
          result.kind === 'rotated_in_grace'
            ? openSuccessor(task.scenario.refreshToken, presented.sessionId, result.sealedSuccessor)
            : null;
        return { outcome: result.kind, accessToken: live?.access ?? access };
      }
    }
  } catch (error) {
    return { outcome: String((error as { code?: unknown }).code ?? (error as Error).message) };
  }
}

/** One round: open a connection per attempt, meet the other workers at the barrier, race, report. */
async function round(task: RaceTask): Promise<RacerResult[]> {
  // Every attempt gets its own connection, opened before the barrier so the race is about the
  // credential, not about who opened the file first.
  const stores: SqliteStore[] = [];
  for (let i = 0; i < task.attempts; i++) stores.push(await openSqliteStore({ file: task.file, busyTimeoutMs: 60_000 }));
  try {
    const clock = createFakeClock(task.now);
    const barrier = new Int32Array(task.barrier);
    Atomics.add(barrier, BARRIER_READY, 1);
    Atomics.notify(barrier, BARRIER_READY);
    Atomics.wait(barrier, BARRIER_GO, 0);
    return await Promise.all(stores.map((store) => attempt(task, makeDeps(store, clock), store)));
  } finally {
    for (const store of stores) await store.close();
  }
}

// The worker serves rounds until the main thread terminates it: booting a worker costs far
// more than a round, so one pool serves every scenario.
parentPort?.on('message', (task: RaceTask) => {
  round(task).then(
    (results) => parentPort?.postMessage({ results }),
    (error: unknown) => parentPort?.postMessage({ error: String((error as Error).stack ?? error) }),
  );
});
parentPort?.postMessage({ booted: true });

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { AuditEventDraft } from '@svc/core';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import { storeFaultOf } from '@svc/core/store';
import { openPostgresStore } from '../../src/index.js';
import { type PrivatePostgres, startPrivatePostgres } from '../private-postgres.js';

const NOW = Date.UTC(2026, 10, 23, 12, 0, 0);

function draft(n: number): AuditEventDraft {
  return {
    id: `evt_${String(n).padStart(26, '0')}`,
    at: NOW,
    type: 'signin.failed',
    realm: 'management',
    subject: null,
    deviceId: null,
    sessionId: null,
    data: { reason: 'fault-test' },
  };
}

function challenge(n: number) {
  return {
    id: `chl_${String(n).padStart(26, '0')}`,
    publicKey: 'ab'.repeat(32),
    realm: 'management' as const,
    challenge: `fault test ${n}`,
    createdAt: NOW,
    expiresAt: NOW + DEFAULT_AUTH_SETTINGS.challengeTtlSeconds * 1000,
  };
}

/** Every failure must be a classified outage: anything else (a raw driver error, a 500) is recorded. */
function expectOutage(unexpected: unknown[]) {
  return (err: unknown) => {
    if (storeFaultOf(err) === null) unexpected.push(err);
  };
}

/** How long the store is given to recover, or the clients to make progress, before the test fails. */
const WAIT_MS = 60_000;

/** Retries `op` until it succeeds: the store must recover by itself once the fault ends (within {@link WAIT_MS}). */
async function eventually<T>(what: string, op: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    try {
      return await op();
    } catch (err) {
      if (storeFaultOf(err) === null) throw err;
      if (Date.now() > deadline) assert.fail(`waited ${WAIT_MS / 1000} s for ${what} after the fault ended; last: ${String(err)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Waits until `done()` holds, failing with `what` after {@link WAIT_MS}. */
async function waitUntil(what: string, done: () => boolean): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!done()) {
    if (Date.now() > deadline) assert.fail(`waited ${WAIT_MS / 1000} s for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('PostgreSQL faults (a private server, started and stopped by this file)', () => {
  let pg: PrivatePostgres;
  before(async () => {
    pg = await startPrivatePostgres();
  });
  after(async () => {
    await pg?.dispose();
  });

  test('a PostgreSQL restart under load does not crash the node: operations fail with store_unavailable, then recover', async () => {
    const store = await openPostgresStore({ connectionString: pg.url, schema: 'restart_test', max: 10, allowUnauthenticated: true });
    try {
      let seq = 0;
      let running = true;
      const unexpected: unknown[] = [];
      let failures = 0;
      let successes = 0;
      // 16 concurrent clients: transactions (audit appends), autocommit writes and reads.
      const client = async () => {
        while (running) {
          const n = ++seq;
          try {
            await store.appendAuditEvent(draft(n));
            await store.createChallenge(challenge(n));
            await store.consumeChallenge({ id: challenge(n).id, now: NOW });
            await store.stats(NOW);
            successes++;
          } catch (err) {
            failures++;
            expectOutage(unexpected)(err);
            await new Promise((r) => setTimeout(r, 20));
          }
        }
      };
      const clients = Array.from({ length: 16 }, client);
      try {
        await waitUntil('50 operations to succeed before the restart', () => successes >= 50);
        await pg.restart();
        // Under load, after the restart: the node is alive and its operations go through again.
        const before = successes;
        await waitUntil('50 operations to succeed after the restart', () => successes >= before + 50);
      } finally {
        // Also when a wait failed: the clients must stop, or the file never ends.
        running = false;
        await Promise.all(clients);
      }
      assert.deepEqual(
        unexpected.map((e) => String(e)),
        [],
        'every failure during the restart is a classified store_unavailable',
      );
      assert.ok(failures > 0, 'the restart was noticed by the clients');
      await store.ping();
    } finally {
      await store.close();
    }
  });

  test('a PostgreSQL server that stops answering (SIGSTOP) fails requests with store_unavailable instead of hanging, and they recover on SIGCONT', async () => {
    const store = await openPostgresStore({
      connectionString: pg.url,
      schema: 'freeze_test',
      max: 4,
      allowUnauthenticated: true,
      timeouts: { connectMs: 1000, statementMs: 1000, lockMs: 1000, queryMs: 1500 },
    });
    try {
      await store.appendAuditEvent(draft(1));
      pg.freeze();
      try {
        // More operations than pooled connections: the ones waiting for a connection are bounded too.
        const outcomes = await Promise.allSettled([
          store.ping(),
          store.getDevice('dev_none'),
          store.appendAuditEvent(draft(2)),
          store.createChallenge(challenge(3)),
          store.stats(NOW),
          store.auditHead(),
          store.listAuditEvents({ afterSeq: 0, limit: 10 }),
          store.ping(),
        ]);
        for (const o of outcomes) {
          assert.equal(o.status, 'rejected');
          assert.equal((o as PromiseRejectedResult).reason.code, 'store_unavailable');
          assert.equal((o as PromiseRejectedResult).reason.status, 503);
          assert.ok((o as PromiseRejectedResult).reason.headers['retry-after'] !== undefined, 'a 503 says when to retry');
          assert.ok(['timeout', 'connection'].includes(storeFaultOf((o as PromiseRejectedResult).reason) ?? ''));
        }
      } finally {
        pg.thaw();
      }
      await eventually('a ping after the thaw', () => store.ping());
      const event = await eventually('an audit append after the thaw', () => store.appendAuditEvent(draft(4)));
      assert.equal(event.seq, 2, 'the write that timed out during the freeze was not committed');
    } finally {
      await store.close();
    }
  });

  test('a stopped PostgreSQL server makes operations fail with store_unavailable (connection), and a restarted one serves again', async () => {
    const store = await openPostgresStore({ connectionString: pg.url, schema: 'stop_test', max: 4, allowUnauthenticated: true });
    try {
      await store.ping();
      await pg.stop();
      try {
        await assert.rejects(store.ping(), (err: unknown) => storeFaultOf(err) === 'connection');
        await assert.rejects(store.appendAuditEvent(draft(1)), (err: unknown) => storeFaultOf(err) === 'connection');
      } finally {
        await pg.start();
      }
      await eventually('a ping after the restart', () => store.ping());
      assert.equal((await store.appendAuditEvent(draft(2))).seq, 1);
    } finally {
      await store.close();
    }
  });
});

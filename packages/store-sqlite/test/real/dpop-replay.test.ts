import assert from 'node:assert/strict';
import { chmodSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { auditDraft, createChallenge, createSession, enrollWithBootstrapToken, issueBootstrapToken, rotateRefreshToken } from '@svc/core';
import { createFakeClock, dpopProof, makeDeps, newDeviceKey } from '@svc/store-testkit';
import Database from 'better-sqlite3';
import { openSqliteStore, type SqliteStore } from '../../src/index.js';
import { loadMigrations, migrate } from '../../src/migrations.js';
import { ownerOnlyTempDir } from '../temp-dir.js';

// The SQLite store's DPoP replay cache is an append-only log with the live keys in memory
// (src/dpop-replay.ts). Each attack below replays a proof's key where that memory could be
// wrong: after a restart, through another process on the same file, after an upgrade from the
// keyed table, after a write batch that rolled back and ran again, after a use whose own write
// failed beside committed ones, and after SQLite rolled a whole batch back under a savepoint.

const temp = await ownerOnlyTempDir();
after(() => temp.remove());
let n = 0;
const freshFile = (): string => `${temp.dir}/replay-${++n}.db`;
const key = (c: string) => c.repeat(64);
const MINUTE = 60_000;

/** Two connections to one file (two processes, as far as the replay log can tell), closed after `fn`. */
async function withTwoStores(file: string, fn: (a: SqliteStore, b: SqliteStore) => Promise<void>): Promise<void> {
  const a = await openSqliteStore({ file });
  const b = await openSqliteStore({ file });
  try {
    await fn(a, b);
  } finally {
    await a.close();
    await b.close();
  }
}

/** A challenge of the store's project, to store twice: a write that throws in a batch. */
async function storedChallenge(store: SqliteStore) {
  const deps = makeDeps(store, createFakeClock());
  await issueBootstrapToken(deps, { recovery: false });
  return { deps, challenge: await createChallenge(deps, { publicKey: newDeviceKey().publicKey, realm: 'management' }) };
}

const STORED_TWICE = /UNIQUE constraint failed: challenges\.id/;

function logRows(file: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT COUNT(*) AS n FROM dpop_replay_log').pluck().get() as number;
  } finally {
    db.close();
  }
}

describe('sqlite store: the DPoP replay log', () => {
  test('a-dpop-proof-replayed-after-a-restart', async () => {
    const file = freshFile();
    const now = Date.now();
    const first = await openSqliteStore({ file });
    assert.equal(await first.useDpopProof({ key: key('a'), expiresAt: now + MINUTE, now }), true);
    await first.close();
    const reopened = await openSqliteStore({ file });
    try {
      assert.equal(await reopened.useDpopProof({ key: key('a'), expiresAt: now + MINUTE, now }), false, 'refused after the restart');
      assert.equal(await reopened.hasDpopRecord({ key: key('a'), now }), true);
      assert.equal(await reopened.useDpopProof({ key: key('b'), expiresAt: now + MINUTE, now }), true);
    } finally {
      await reopened.close();
    }
  });

  test('a-dpop-proof-replayed-through-another-process-on-the-same-file', async () => {
    const now = Date.now();
    await withTwoStores(freshFile(), async (a, b) => {
      // Each connection has its own memory: it must read what the other appended, every time.
      for (let i = 0; i < 200; i++) {
        const [first, second] = i % 2 === 0 ? [a, b] : [b, a];
        const k = `${i}`.padStart(64, '0');
        assert.equal(await first.useDpopProof({ key: k, expiresAt: now + MINUTE, now }), true, `use ${i}`);
        assert.equal(await second.useDpopProof({ key: k, expiresAt: now + MINUTE, now }), false, `replay ${i} on the other connection`);
        assert.equal(await first.useDpopProof({ key: k, expiresAt: now + MINUTE, now }), false, `replay ${i} on the same connection`);
      }
      // Both at once, in one turn each: still exactly one use of each key wins.
      const racing = await Promise.all(
        Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).useDpopProof({ key: key('r'), expiresAt: now + MINUTE, now })),
      );
      assert.equal(racing.filter(Boolean).length, 1);
      assert.equal(await b.hasDpopRecord({ key: `${199}`.padStart(64, '0'), now }), true, 'a nonce another node recorded is seen');
    });
  });

  test('a-dpop-proof-used-before-the-upgrade-replayed-after-it', async () => {
    const file = freshFile();
    const now = Date.now();
    // A store at the schema before the log (migration 16), with a live record in its keyed table.
    const db = new Database(file);
    migrate(
      db,
      file,
      loadMigrations().filter((m) => m.version <= 16),
      now,
    );
    db.prepare('INSERT INTO dpop_proofs (proof_key, expires_at) VALUES (?, ?)').run(key('u'), now + MINUTE);
    db.close();
    chmodSync(file, 0o600);
    const store = await openSqliteStore({ file });
    try {
      assert.equal(await store.useDpopProof({ key: key('u'), expiresAt: now + MINUTE, now }), false, 'the record moved into the log');
      assert.equal(await store.useDpopProof({ key: key('v'), expiresAt: now + MINUTE, now }), true);
    } finally {
      await store.close();
    }
  });

  test('a-dpop-proof-whose-batch-rolled-back-is-not-taken-for-its-own-replay', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    try {
      const { deps, challenge: kept } = await storedChallenge(store);
      const now = deps.clock.now();
      // One turn, one batch: the challenge stored twice throws, the batch rolls back whole and
      // runs again with savepoints. The proof's use in the first run never committed: in the
      // second run it is a first use, not a replay of itself.
      const outcomes = await Promise.allSettled([
        store.useDpopProof({ key: key('s'), expiresAt: now + MINUTE, now }),
        store.createChallenge(kept),
        store.appendAuditEvent(auditDraft(deps, 'signin.failed', { realm: 'management', data: { reason: 'test' } })),
      ]);
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['fulfilled', 'rejected', 'fulfilled'],
      );
      assert.match(String((outcomes[1] as PromiseRejectedResult).reason), STORED_TWICE);
      assert.equal((outcomes[0] as PromiseFulfilledResult<boolean>).value, true, 'the use counts once');
      assert.equal(await store.useDpopProof({ key: key('s'), expiresAt: now + MINUTE, now }), false, 'and is refused after');
      // The batch's one write alone, refused: what it recorded is gone with it, and the key is free.
      await assert.rejects(store.createChallenge(kept), STORED_TWICE);
      assert.equal(await store.useDpopProof({ key: key('t'), expiresAt: now + MINUTE, now }), true);
    } finally {
      await store.close();
    }
  });

  test('a-dpop-proof-replayed-after-its-write-failed-beside-committed-ones', async () => {
    // A use whose own write fails (here its prune of expired rows, made to fail by a trigger, as
    // a full disk would) rolls back alone while uses of the same transaction commit. The number
    // its row had is handed out again: no connection may take it for one it already read.
    const file = freshFile();
    const now = Date.now();
    await withTwoStores(file, async (a, b) => {
      const raw = new Database(file);
      try {
        const { challenge: kept } = await storedChallenge(a);
        // An expired row for the prunes to find (written by another process).
        raw.prepare('INSERT INTO dpop_replay_log (proof_key, expires_at) VALUES (?, ?)').run(key('o'), now - 1);
        raw.exec("CREATE TRIGGER fail_prune BEFORE DELETE ON dpop_replay_log BEGIN SELECT RAISE(ABORT, 'disk full'); END");
        // 192 uses: the due prunes fail the 64th, 128th and 192nd of the run with savepoints, so
        // the transaction's last use is one that rolled back.
        const keys = Array.from({ length: 192 }, (_, i) => `k${i}`.padStart(64, '0'));
        const outcomes = await Promise.allSettled([
          ...keys.map((k) => a.useDpopProof({ key: k, expiresAt: now + MINUTE, now })),
          a.createChallenge(kept),
        ]);
        raw.exec('DROP TRIGGER fail_prune');
        const used = keys.filter((_, i) => outcomes[i]?.status === 'fulfilled');
        const failed = keys.filter((_, i) => outcomes[i]?.status === 'rejected');
        assert.ok(used.length > 0 && failed.length > 0, `some uses committed (${used.length}), some failed (${failed.length})`);
        for (const outcome of outcomes.slice(0, keys.length)) {
          if (outcome.status === 'fulfilled') assert.equal(outcome.value, true);
          else assert.match(String(outcome.reason), /disk full/);
        }
        assert.match(String((outcomes[keys.length] as PromiseRejectedResult).reason), STORED_TWICE);
        // New uses on the other connection take the numbers of the failed rows.
        const fresh = Array.from({ length: 20 }, (_, i) => `f${i}`.padStart(64, '0'));
        for (const k of fresh) assert.equal(await b.useDpopProof({ key: k, expiresAt: now + MINUTE, now }), true);
        for (const k of fresh) assert.equal(await a.useDpopProof({ key: k, expiresAt: now + MINUTE, now }), false, `replay of ${k} on a`);
        for (const k of used) assert.equal(await a.useDpopProof({ key: k, expiresAt: now + MINUTE, now }), false, `replay of ${k}`);
        for (const k of failed) assert.equal(await a.useDpopProof({ key: k, expiresAt: now + MINUTE, now }), true, `${k} never committed`);
        for (const k of [...used, ...failed]) assert.equal(await b.hasDpopRecord({ key: k, now }), true);
      } finally {
        raw.close();
      }
    });
  });

  test('a-batch-sqlite-rolled-back-whole-under-a-savepoint-leaves-no-use-behind', async () => {
    // Some errors (a full disk, an I/O error, no memory) make SQLite roll back the whole
    // transaction from inside a write's savepoint; a trigger's RAISE(ROLLBACK) does the same.
    // The writes after it must not run outside the transaction: a use committed there while its
    // caller is told it failed would refuse the caller's retry as a replay.
    const file = freshFile();
    const now = Date.now();
    const store = await openSqliteStore({ file });
    const raw = new Database(file);
    try {
      const { challenge: kept } = await storedChallenge(store);
      const poison = key('p');
      raw.exec(
        `CREATE TRIGGER roll_back_all BEFORE INSERT ON dpop_replay_log WHEN NEW.proof_key = '${poison}' BEGIN SELECT RAISE(ROLLBACK, 'disk I/O'); END`,
      );
      const keys = ['1', '2', '3'].map(key);
      const outcomes = await Promise.allSettled([
        store.useDpopProof({ key: keys[0] as string, expiresAt: now + MINUTE, now }),
        store.createChallenge(kept),
        store.useDpopProof({ key: poison, expiresAt: now + MINUTE, now }),
        store.useDpopProof({ key: keys[1] as string, expiresAt: now + MINUTE, now }),
        store.useDpopProof({ key: keys[2] as string, expiresAt: now + MINUTE, now }),
      ]);
      raw.exec('DROP TRIGGER roll_back_all');
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['rejected', 'rejected', 'rejected', 'rejected', 'rejected'],
        'nothing of the batch happened',
      );
      assert.equal(logRows(file), 0, 'no row of the batch committed');
      for (const k of keys) assert.equal(await store.useDpopProof({ key: k, expiresAt: now + MINUTE, now }), true, `${k} is free`);
    } finally {
      await store.close();
      raw.close();
    }
  });

  test('expired records behind live ones leave the log too (a clock stepped back)', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    try {
      const now = Date.now();
      for (let i = 0; i < 600; i++) await store.useDpopProof({ key: `live${i}`.padStart(64, '0'), expiresAt: now + 60 * MINUTE, now });
      for (let i = 0; i < 300; i++) await store.useDpopProof({ key: `soon${i}`.padStart(64, '0'), expiresAt: now + 1000, now });
      const later = now + 2000;
      for (let i = 0; i < 130; i++) await store.useDpopProof({ key: `next${i}`.padStart(64, '0'), expiresAt: later + MINUTE, now: later });
      assert.equal(logRows(file), 600 + 130);
      assert.equal(await store.useDpopProof({ key: `live${9}`.padStart(64, '0'), expiresAt: later + MINUTE, now: later }), false);
      assert.equal(await store.useDpopProof({ key: `soon${9}`.padStart(64, '0'), expiresAt: later + MINUTE, now: later }), true);
    } finally {
      await store.close();
    }
  });

  test('expired records leave the log, live ones stay', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    try {
      const start = Date.now();
      for (let i = 0; i < 300; i++) {
        assert.equal(await store.useDpopProof({ key: `old${i}`.padStart(64, '0'), expiresAt: start + MINUTE, now: start }), true);
      }
      assert.equal(logRows(file), 300);
      const later = start + MINUTE;
      for (let i = 0; i < 130; i++) {
        assert.equal(await store.useDpopProof({ key: `new${i}`.padStart(64, '0'), expiresAt: later + MINUTE, now: later }), true);
      }
      assert.equal(logRows(file), 130, 'the 300 expired rows went with the first prune of the new uses');
      // An expired key is used again; a live one is not.
      assert.equal(await store.useDpopProof({ key: `old${7}`.padStart(64, '0'), expiresAt: later + MINUTE, now: later }), true);
      assert.equal(await store.useDpopProof({ key: `new${7}`.padStart(64, '0'), expiresAt: later + MINUTE, now: later }), false);
    } finally {
      await store.close();
    }
  });

  test('copied-refresh-token-flood-takes-no-write-lock: a refresh without the session key, or with a used proof, is refused after a read', async () => {
    // A holder of a copied refresh token without the device key is refused before any write, so
    // a flood of such refreshes never queues for the write lock that sign-ins and rotations need.
    // Here another process holds that lock throughout: a refusal that needed it would wait for it
    // (5 s) and then fail as unavailable.
    const file = freshFile();
    const store = await openSqliteStore({ file });
    const deps = makeDeps(store, createFakeClock(), { settings: { senderConstraint: { management: 'refresh', application: 'refresh' } } });
    const device = newDeviceKey();
    const { token } = await issueBootstrapToken(deps, { recovery: false });
    await enrollWithBootstrapToken(deps, { bootstrapToken: token, publicKey: device.publicKey });
    const challenge = await createChallenge(deps, { publicKey: device.publicKey, realm: 'management' });
    const pair = await createSession(deps, { challengeId: challenge.id, signature: device.sign(challenge.challenge), realm: 'management' });
    const htu = 'http://127.0.0.1:9090/v1/auth/refresh';
    const proof = dpopProof(device, { htm: 'POST', htu, now: deps.clock.now() });
    const next = await rotateRefreshToken(deps, {
      refreshToken: pair.refresh_token,
      realm: 'management',
      dpop: { proof, htm: 'POST', htu },
    });
    const locker = new Database(file);
    try {
      locker.exec('BEGIN IMMEDIATE');
      const refresh = (dpop: { proof: unknown; htm: string; htu: string } | undefined) =>
        rotateRefreshToken(deps, { refreshToken: next.refresh_token, realm: 'management', ...(dpop === undefined ? {} : { dpop }) });
      await assert.rejects(refresh(undefined), { code: 'invalid_dpop_proof' });
      await assert.rejects(refresh({ proof: dpopProof(newDeviceKey(), { htm: 'POST', htu, now: deps.clock.now() }), htm: 'POST', htu }), {
        code: 'invalid_dpop_proof',
      });
      await assert.rejects(refresh({ proof, htm: 'POST', htu }), { code: 'invalid_dpop_proof' }, 'the used proof');
    } finally {
      locker.exec('ROLLBACK');
      locker.close();
    }
    assert.equal((await store.getSession(pair.session_id))?.generation, 1);
    await store.close();
  });
});

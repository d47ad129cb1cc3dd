import assert from 'node:assert/strict';
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import {
  auditDraft,
  authenticate,
  createChallenge,
  createSession,
  enrollWithBootstrapToken,
  issueBootstrapToken,
  newId,
  removeDevice,
  revokeSession,
  rotateRefreshToken,
  updateUser,
  verifyAuditChain,
} from '@svc/core';
import { ConfigError, type EdnValue } from '@svc/core/config';
import { STORE_OPERATIONS, type UserFilter } from '@svc/core/store';
import { createFakeClock, makeDeps, newDeviceKey } from '@svc/store-testkit';
import Database from 'better-sqlite3';
import {
  CONTROL_STORE_APPLICATION_ID,
  openSqliteStore,
  SQLITE_STORE_OPERATIONS,
  type SqliteStore,
  StoreOpenError,
  svcStore,
} from 'svc-store-sqlite';
import { loadMigrations } from '../../src/migrations.js';
import { CHALLENGE_TUPLE, challengeRowOf, inColumnOrder } from '../../src/rows.js';
import { userListingSql } from '../../src/users.js';
import { ownerOnlyTempDir } from '../temp-dir.js';

const temp = await ownerOnlyTempDir();
after(() => temp.remove());
let n = 0;
const freshFile = (): string => `${temp.dir}/store-${++n}.db`;

const modeOf = (path: string): number => statSync(path).mode & 0o777;

/** Asserts a StoreOpenError about `path` whose message says what to run. */
async function refusesToOpen(open: Promise<unknown>, path: string, advice: RegExp): Promise<void> {
  await assert.rejects(open, (error: unknown) => {
    assert.ok(error instanceof StoreOpenError, `expected a StoreOpenError, got ${String(error)}`);
    assert.equal(error.code, 'store_open_failed');
    assert.equal(error.target, path);
    assert.ok(error.message.includes(path), 'the message names the path');
    assert.match(error.message, advice);
    return true;
  });
}

/** Enrolls an admin, signs in, rotates, and returns every token the flow handled. */
async function flow(store: SqliteStore) {
  const clock = createFakeClock();
  const deps = makeDeps(store, clock);
  const key = newDeviceKey();
  const bootstrap = await issueBootstrapToken(deps, { recovery: false });
  await enrollWithBootstrapToken(deps, { bootstrapToken: bootstrap.token, publicKey: key.publicKey });
  const challenge = await createChallenge(deps, { publicKey: key.publicKey, realm: 'management' });
  const first = await createSession(deps, { challengeId: challenge.id, signature: key.sign(challenge.challenge), realm: 'management' });
  const second = await rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' });
  return {
    deps,
    clock,
    key,
    tokens: [bootstrap.token, first.access_token, first.refresh_token, second.access_token, second.refresh_token],
    second,
  };
}

describe('sqlite store: operation set', () => {
  test('SQLITE_STORE_OPERATIONS equals core STORE_OPERATIONS and each one is a method of the store', async () => {
    assert.deepEqual([...SQLITE_STORE_OPERATIONS].sort(), [...STORE_OPERATIONS].sort());
    assert.equal(new Set(SQLITE_STORE_OPERATIONS).size, SQLITE_STORE_OPERATIONS.length);
    const store = await openSqliteStore({ file: freshFile() });
    try {
      for (const op of SQLITE_STORE_OPERATIONS) assert.equal(typeof (store as unknown as Record<string, unknown>)[op], 'function', op);
    } finally {
      await store.close();
    }
  });
});

describe('sqlite store: files and permissions', () => {
  test('the database, -wal and -shm files are created 0600', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    try {
      await flow(store);
      for (const path of [file, `${file}-wal`, `${file}-shm`]) assert.equal(modeOf(path), 0o600, path);
    } finally {
      await store.close();
    }
  });

  test('the file is created 0600 even under a permissive umask', async () => {
    const file = freshFile();
    const previous = process.umask(0o000);
    try {
      const store = await openSqliteStore({ file });
      await store.close();
    } finally {
      process.umask(previous);
    }
    assert.equal(modeOf(file), 0o600);
  });

  test('a database file readable by others (0644) is refused with chmod 600 advice', async () => {
    const file = freshFile();
    await (await openSqliteStore({ file })).close();
    chmodSync(file, 0o644);
    await refusesToOpen(openSqliteStore({ file }), file, new RegExp(`0644.*chmod 600 ${file}`));
  });

  test('a directory open to others (0755) is refused with chmod 700 advice', async () => {
    const dir = await ownerOnlyTempDir();
    try {
      const file = `${dir.dir}/control.db`;
      chmodSync(dir.dir, 0o755);
      await refusesToOpen(openSqliteStore({ file }), dir.dir, new RegExp(`0755.*chmod 700 ${dir.dir}`));
      assert.equal(existsSync(file), false, 'a refusal creates nothing');
    } finally {
      await dir.remove();
    }
  });

  test('requireOwnerOnly: false opens a 0644 file', async () => {
    const file = freshFile();
    await (await openSqliteStore({ file })).close();
    chmodSync(file, 0o644);
    const store = await openSqliteStore({ file, requireOwnerOnly: false });
    await store.ping();
    await store.close();
  });

  test('a missing directory is refused, naming it', async () => {
    const dir = `${temp.dir}/missing-${++n}`;
    await refusesToOpen(openSqliteStore({ file: `${dir}/control.db` }), dir, /mkdir -m 700/);
  });
});

describe('sqlite store: what it refuses to open', () => {
  test('a file that is not a SQLite database is refused', async () => {
    const file = freshFile();
    writeFileSync(file, 'this is not a database, just some text that is long enough to have a header'.repeat(20), { mode: 0o600 });
    await refusesToOpen(openSqliteStore({ file }), file, /not a SQLite database/);
  });

  test("another application's SQLite database is refused and left unchanged", async () => {
    const file = freshFile();
    const other = new Database(file);
    other.exec('CREATE TABLE notes (body TEXT)');
    other.close();
    chmodSync(file, 0o600);
    const before = readFileSync(file);
    await refusesToOpen(openSqliteStore({ file }), file, /not a svc auth control store/);
    assert.deepEqual(readFileSync(file), before);
  });

  test('a control store with a newer schema version is refused', async () => {
    const file = freshFile();
    await (await openSqliteStore({ file })).close();
    const raw = new Database(file);
    raw.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, ?, 0)').run('from_the_future');
    raw.close();
    await refusesToOpen(openSqliteStore({ file }), file, /schema version 999.*upgrade svc-store-sqlite/);
  });
});

/** The ids of the challenges stored in `file`, in id order, read on a connection of its own. */
function challengeIds(file: string): string[] {
  const raw = new Database(file, { readonly: true });
  try {
    return raw
      .prepare<[], { id: string }>('SELECT id FROM challenges ORDER BY id')
      .all()
      .map((r) => r.id);
  } finally {
    raw.close();
  }
}

describe('sqlite store: challenges', () => {
  test('a used challenge leaves no row behind, and expired unanswered ones are pruned by a later challenge', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    try {
      const { deps, clock, key } = await flow(store);
      const rows = () => challengeIds(file);
      assert.deepEqual(rows(), [], 'the sign-in took its challenge away');
      const unanswered = await createChallenge(deps, { publicKey: key.publicKey, realm: 'management' });
      assert.deepEqual(rows(), [unanswered.id]);
      clock.advance(deps.settings.challengeTtlSeconds * 1000 + 1);
      // The store prunes with the first challenge a connection writes and every 64th after it.
      const later = [];
      for (let i = 0; i < 64; i++) later.push((await createChallenge(deps, { publicKey: key.publicKey, realm: 'management' })).id);
      assert.deepEqual(rows(), later.sort(), 'the expired challenge is gone, the live ones stay');
    } finally {
      await store.close();
    }
  });
});

describe('sqlite store: rows read as arrays', () => {
  const challenges = () => {
    const db = new Database(':memory:');
    db.exec('CREATE TABLE challenges (id TEXT, public_key TEXT, realm TEXT, challenge TEXT, created_at INTEGER, expires_at INTEGER)');
    db.prepare("INSERT INTO challenges VALUES ('chl_1', 'ab', 'management', 'text', 1, 2)").run();
    return db;
  };

  test("a statement whose columns are the reader's answers arrays, read into the row by name", () => {
    const db = challenges();
    const stmt = inColumnOrder(db.prepare(`SELECT ${CHALLENGE_TUPLE} FROM challenges`), CHALLENGE_TUPLE);
    const row = stmt.get() as Parameters<typeof challengeRowOf>[0];
    assert.deepEqual(row, ['chl_1', 'ab', 'management', 'text', 1, 2]);
    assert.deepEqual(challengeRowOf(row), {
      id: 'chl_1',
      public_key: 'ab',
      realm: 'management',
      challenge: 'text',
      created_at: 1,
      expires_at: 2,
    });
    db.close();
  });

  test('a statement whose columns come in another order is refused when prepared, naming both lists', () => {
    const db = challenges();
    const reordered = 'id, realm, public_key, challenge, created_at, expires_at';
    assert.throws(
      () => inColumnOrder(db.prepare(`SELECT ${reordered} FROM challenges`), CHALLENGE_TUPLE),
      (err: Error) => err.message.includes(reordered) && err.message.includes(CHALLENGE_TUPLE),
    );
    db.close();
  });
});

describe('sqlite store: write batches', () => {
  test('a write that throws in a batch rolls back alone: the others commit, and the audit chain holds', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    try {
      const { deps, key } = await flow(store);
      const kept = await createChallenge(deps, { publicKey: key.publicKey, realm: 'management' });
      const before = (await store.auditHead())?.seq ?? 0;
      const fresh = () => ({ ...kept, id: newId('challenge', deps.clock, deps.random) });
      const first = fresh();
      const last = fresh();
      // Issued in one turn of the event loop: one batch, run again with savepoints after the throw.
      const outcomes = await Promise.allSettled([
        store.appendAuditEvent(auditDraft(deps, 'signin.failed', { realm: 'management', data: { reason: 'test_one' } })),
        store.createChallenge(first),
        store.createChallenge(kept),
        store.appendAuditEvent(auditDraft(deps, 'signin.failed', { realm: 'management', data: { reason: 'test_two' } })),
        store.createChallenge(last),
      ]);
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled'],
      );
      assert.match(String((outcomes[2] as PromiseRejectedResult).reason), /UNIQUE constraint failed: challenges\.id/);
      assert.deepEqual(challengeIds(file), [kept.id, first.id, last.id].sort());
      const events = await store.listAuditEvents({ afterSeq: 0, limit: 1000 });
      assert.deepEqual(
        events.slice(before).map((e) => e.data.reason),
        ['test_one', 'test_two'],
      );
      assert.equal(verifyAuditChain(events).ok, true);
      // A batch of that one write alone: refused the same way, and the store writes on.
      await assert.rejects(store.createChallenge(kept), /UNIQUE constraint failed/);
      await store.createChallenge(fresh());
    } finally {
      await store.close();
    }
  });
});

describe('sqlite store: durability and migrations', () => {
  test('data survives close and reopen: sessions authenticate and the audit chain verifies', async () => {
    const file = freshFile();
    const first = await openSqliteStore({ file, synchronous: 'full' });
    const { clock, second } = await flow(first);
    const lengthBefore = (await first.auditHead())?.seq;
    await first.close();
    const reopened = await openSqliteStore({ file });
    try {
      const deps = makeDeps(reopened, clock);
      const principal = await authenticate(deps, { token: second.access_token, realm: 'management' });
      assert.equal(principal.session, second.session_id);
      const events = await reopened.listAuditEvents({ afterSeq: 0, limit: 1000 });
      assert.equal(events.length, lengthBefore);
      assert.equal(verifyAuditChain(events).ok, true);
      await revokeSession(deps, { principal });
      assert.equal((await reopened.getSession(second.session_id))?.revokedReason, 'logout');
    } finally {
      await reopened.close();
    }
  });

  test('migrations are applied once: reopening changes nothing and the file is marked as a control store', async () => {
    const file = freshFile();
    await (await openSqliteStore({ file })).close();
    const read = () => {
      const raw = new Database(file, { readonly: true });
      try {
        return {
          migrations: raw.prepare('SELECT version, name, applied_at FROM schema_migrations ORDER BY version').all(),
          applicationId: raw.pragma('application_id', { simple: true }),
          schema: raw.prepare('SELECT type, name, sql FROM sqlite_schema ORDER BY name').all(),
        };
      } finally {
        raw.close();
      }
    };
    const once = read();
    assert.ok(once.migrations.length >= 1);
    assert.equal(once.applicationId, CONTROL_STORE_APPLICATION_ID);
    for (let i = 0; i < 3; i++) await (await openSqliteStore({ file })).close();
    assert.deepEqual(read(), once);
  });

  test('several connections opening a fresh file at once migrate it exactly once', async () => {
    const file = freshFile();
    const stores = await Promise.all(Array.from({ length: 5 }, () => openSqliteStore({ file })));
    try {
      await Promise.all(stores.map((s) => s.ping()));
    } finally {
      for (const s of stores) await s.close();
    }
    const raw = new Database(file, { readonly: true });
    const versions = raw.prepare('SELECT version FROM schema_migrations').all();
    raw.close();
    assert.equal(versions.length, new Set(versions.map((v) => (v as { version: number }).version)).size);
  });
});

for (const bearerCacheSessions of [undefined, 1])
  describe(`sqlite store: the bearer-check cache (${bearerCacheSessions ?? 'default'} sessions) is never stale`, () => {
    /**
     * Runs `fn` with a session checked once (so this connection caches it) and a second
     * connection on the same file; closes both afterwards.
     */
    async function withCachedSession(fn: (w: Awaited<ReturnType<typeof cachedSession>>) => Promise<void>): Promise<void> {
      const w = await cachedSession();
      try {
        await fn(w);
      } finally {
        await w.other.close();
        await w.cacher.close();
      }
    }
    async function cachedSession() {
      const file = freshFile();
      const cacher = await openSqliteStore({ file, ...(bearerCacheSessions === undefined ? {} : { bearerCacheSessions }) });
      const { clock, key, second } = await flow(cacher);
      const deps = makeDeps(cacher, clock);
      const principal = await authenticate(deps, { token: second.access_token, realm: 'management' });
      const other = await openSqliteStore({ file });
      return { file, cacher, other, clock, deps, otherDeps: makeDeps(other, clock), key, second, principal };
    }
    const refused = (deps: ReturnType<typeof makeDeps>, token: string) =>
      assert.rejects(authenticate(deps, { token, realm: 'management' }), (e: unknown) => (e as { code?: string }).code === 'invalid_token');
    /** A second admin, so that the first one may be removed. */
    const secondAdmin = async (deps: ReturnType<typeof makeDeps>) => {
      const boot = await issueBootstrapToken(deps, { recovery: true });
      await enrollWithBootstrapToken(deps, { bootstrapToken: boot.token, publicKey: newDeviceKey().publicKey });
    };

    test("another connection's revocation is refused on the very next check", () =>
      withCachedSession(async (w) => {
        await revokeSession(w.otherDeps, { principal: w.principal });
        await refused(w.deps, w.second.access_token);
      }));

    test('checks that share one freshness read still see a revocation another process committed after they were asked for', () =>
      withCachedSession(async (w) => {
        // In one turn: a check asked before another process commits a revocation (here a raw
        // connection that commits synchronously), then one asked after it. Both wait for the
        // turn's one freshness read, taken after both were asked: the one asked after the commit
        // must not answer from the cache (the one before may go either way; here it cannot).
        const before = authenticate(w.deps, { token: w.second.access_token, realm: 'management' });
        const raw = new Database(w.file);
        try {
          raw.prepare("UPDATE sessions SET revoked_at = ?, revoked_reason = 'logout' WHERE id = ?").run(w.clock.now(), w.second.session_id);
        } finally {
          raw.close();
        }
        const after = authenticate(w.deps, { token: w.second.access_token, realm: 'management' });
        const invalid = (e: unknown) => (e as { code?: string }).code === 'invalid_token';
        await Promise.all([assert.rejects(before, invalid), assert.rejects(after, invalid)]);
      }));

    test("another connection's rotation retires the cached access token on the very next check", () =>
      withCachedSession(async (w) => {
        const next = await rotateRefreshToken(w.otherDeps, { refreshToken: w.second.refresh_token, realm: 'management' });
        await refused(w.deps, w.second.access_token);
        assert.equal((await authenticate(w.deps, { token: next.access_token, realm: 'management' })).session, w.second.session_id);
      }));

    test("another connection's device removal is refused on the very next check", () =>
      withCachedSession(async (w) => {
        await secondAdmin(w.otherDeps);
        await authenticate(w.deps, { token: w.second.access_token, realm: 'management' });
        await removeDevice(w.otherDeps, { principal: w.principal, deviceId: w.principal.device });
        await refused(w.deps, w.second.access_token);
      }));

    test("the caching connection's own rotation and reuse revocation take effect on the very next check", () =>
      withCachedSession(async (w) => {
        const next = await rotateRefreshToken(w.deps, { refreshToken: w.second.refresh_token, realm: 'management' });
        await refused(w.deps, w.second.access_token);
        const principal = await authenticate(w.deps, { token: next.access_token, realm: 'management' });
        w.clock.advance(60_000);
        await assert.rejects(
          rotateRefreshToken(w.deps, { refreshToken: w.second.refresh_token, realm: 'management' }),
          (e: unknown) => (e as { code?: string }).code === 'refresh_token_reused',
        );
        await refused(w.deps, next.access_token);
        assert.equal(principal.session, w.second.session_id);
      }));

    test("the caching connection's own logout and device removal take effect on the very next check", () =>
      withCachedSession(async (w) => {
        await revokeSession(w.deps, { principal: w.principal });
        await refused(w.deps, w.second.access_token);
        // A fresh session of the same device, checked (cached), then its device removed here.
        const c = await createChallenge(w.deps, { publicKey: w.key.publicKey, realm: 'management' });
        const pair = await createSession(w.deps, { challengeId: c.id, signature: w.key.sign(c.challenge), realm: 'management' });
        const principal = await authenticate(w.deps, { token: pair.access_token, realm: 'management' });
        await secondAdmin(w.deps);
        await removeDevice(w.deps, { principal, deviceId: principal.device });
        await refused(w.deps, pair.access_token);
      }));

    test("a user's attributes changed by this connection or by another show on the very next check", () =>
      withCachedSession(async (w) => {
        const actor = { via: 'cli', subject: null, session: null } as const;
        const claims = async () => (await authenticate(w.deps, { token: w.second.access_token, realm: 'management' })).claims;
        assert.equal((await claims()).email, undefined);
        await updateUser(w.deps, {
          subject: w.principal.subject,
          attributes: { email: 'ada@example.com', groups: ['ops'] },
          actor,
          source: 'operator',
        });
        assert.equal((await claims()).email, 'ada@example.com');
        await updateUser(w.otherDeps, { subject: w.principal.subject, attributes: { name: 'Ada' }, actor, source: 'operator' });
        assert.equal((await claims()).name, 'Ada');
        assert.deepEqual((await claims()).groups, ['ops']);
        // A group's deletion on this connection takes the name off the cached session's user.
        const group = {
          id: 'grp_01KAQ0000000000000000000G1',
          realm: 'management' as const,
          name: 'ops',
          externalId: null,
          createdAt: 0,
          updatedAt: 0,
        };
        await w.cacher.saveGroup(group, {
          id: 'evt_01KAQ0000000000000000000E1',
          at: 0,
          type: 'group.saved',
          realm: null,
          subject: null,
          deviceId: null,
          sessionId: null,
          data: {},
        });
        await w.cacher.deleteGroup(
          { id: group.id, now: w.clock.now() },
          {
            id: 'evt_01KAQ0000000000000000000E2',
            at: 0,
            type: 'group.removed',
            realm: null,
            subject: null,
            deviceId: null,
            sessionId: null,
            data: {},
          },
        );
        assert.equal((await claims()).groups, undefined);
      }));
  });

describe('sqlite store: the addon reads its :config', () => {
  const ctx = (controlDir: string) => ({
    controlDir,
    configFile: '/p/project.edn',
    configKey: ':svc/modules :store :config',
    resolveSecret: () => {
      throw new Error('no secrets here');
    },
  });

  test('a bearer cache size that is not a whole number >= 0 is refused, naming the file and the key', async () => {
    for (const bad of [-1, 1.5, 'big']) {
      await assert.rejects(
        svcStore.open(new Map<string, EdnValue>([[':store/bearer-cache-sessions', bad]]), ctx(temp.dir)),
        (e: unknown) => {
          assert.ok(e instanceof ConfigError, String(e));
          assert.match(e.message, /\/p\/project\.edn/);
          assert.match(e.message, /:store\/bearer-cache-sessions/);
          return true;
        },
      );
    }
  });

  test('a bearer cache of 0 reads the store on every check and behaves the same', async () => {
    const store = await svcStore.open(
      new Map<string, EdnValue>([
        [':store/file', `store-${++n}.db`],
        [':store/bearer-cache-sessions', 0],
      ]),
      ctx(temp.dir),
    );
    try {
      const { deps, second } = await flow(store as SqliteStore);
      const principal = await authenticate(deps, { token: second.access_token, realm: 'management' });
      await revokeSession(deps, { principal });
      await assert.rejects(
        authenticate(deps, { token: second.access_token, realm: 'management' }),
        (e: unknown) => (e as { code?: string }).code === 'invalid_token',
      );
    } finally {
      await store.close();
    }
  });
});

describe('sqlite store: migration 3 (split session tokens)', () => {
  test('a version 2 store keeps its sessions and retired digests, with the foreign keys intact and no digest index left', async () => {
    const file = freshFile();
    const raw = new Database(file);
    raw.pragma('journal_mode = WAL');
    raw.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    for (const [version, name] of [
      [1, 'initial'],
      [2, 'retired_refresh_tokens_retired_at'],
    ] as const) {
      raw.exec(readFileSync(new URL(`../../migrations/00${version}_${name}.sql`, import.meta.url), 'utf8'));
      raw.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)').run(version, name);
    }
    raw
      .prepare("INSERT INTO devices VALUES ('dev_01KAQ00000000000000000000D', ?, 'management', 'sub_x', 'old', 1, NULL)")
      .run('ab'.repeat(32));
    raw
      .prepare(
        `INSERT INTO sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at,
           refresh_digest, refresh_expires_at, prev_refresh_digest, prev_rotated_at, generation)
         VALUES ('ses_01KAQ00000000000000000000S', 'management', 'sub_x', 'dev_01KAQ00000000000000000000D', 1, 9e12, ?, 9e12, ?, 9e12, ?, 5, 2)`,
      )
      .run('a1'.repeat(32), 'b1'.repeat(32), 'c1'.repeat(32));
    raw
      .prepare("INSERT INTO retired_refresh_tokens (digest, session_id, retired_at) VALUES (?, 'ses_01KAQ00000000000000000000S', 3)")
      .run('d1'.repeat(32));
    raw.close();
    for (const f of [file, `${file}-wal`, `${file}-shm`]) if (existsSync(f)) chmodSync(f, 0o600);

    const store = await openSqliteStore({ file });
    try {
      const session = await store.getSession('ses_01KAQ00000000000000000000S');
      assert.equal(session?.generation, 2);
      assert.equal((await store.findSessionByAccessDigest('ses_01KAQ00000000000000000000S', 'a1'.repeat(32)))?.id, session?.id);
      assert.equal(
        await store.revokeSession(
          { sessionId: 'ses_01KAQ00000000000000000000S', now: 10, reason: 'logout' },
          {
            id: 'evt_01KAQ00000000000000000000E',
            type: 'session.revoked',
            realm: 'management',
            subject: 'sub_x',
            deviceId: 'dev_01KAQ00000000000000000000D',
            sessionId: 'ses_01KAQ00000000000000000000S',
            at: 10,
            data: {},
          },
        ),
        true,
      );
    } finally {
      await store.close();
    }
    const after = new Database(file, { readonly: true });
    try {
      assert.deepEqual(
        after.prepare('SELECT version FROM schema_migrations ORDER BY version').pluck().all(),
        loadMigrations().map((m) => m.version),
      );
      assert.deepEqual(after.prepare('SELECT session_id, digest, retired_at FROM retired_refresh_tokens').all(), [
        { session_id: 'ses_01KAQ00000000000000000000S', digest: 'd1'.repeat(32), retired_at: 3 },
      ]);
      assert.deepEqual(after.pragma('foreign_key_check'), []);
      assert.deepEqual(after.pragma('integrity_check', { simple: true }), 'ok');
      const indexed = after
        .prepare("SELECT il.name FROM sqlite_schema s, pragma_index_list(s.name) il WHERE s.type = 'table' AND s.name = 'sessions'")
        .pluck()
        .all() as string[];
      for (const name of indexed) {
        const columns = after.prepare('SELECT name FROM pragma_index_info(?)').pluck().all(name) as string[];
        assert.ok(!columns.some((c) => c.endsWith('_digest')), `index ${name} on ${columns.join(', ')}`);
      }
      const fk = after.prepare('SELECT "table" FROM pragma_foreign_key_list(\'retired_refresh_tokens\')').pluck().all();
      assert.deepEqual(fk, ['sessions'], 'retired digests still reference the sessions table by its final name');
    } finally {
      after.close();
    }
  });
});

describe('sqlite store: migration 9 (links and flows)', () => {
  test('a version 8 store keeps its sessions (amr ed25519), retired digests and indexes; a session must still name a device or a link', async () => {
    const file = freshFile();
    const raw = new Database(file);
    raw.pragma('journal_mode = WAL');
    raw.pragma('foreign_keys = ON');
    raw.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    for (const m of loadMigrations().filter((m) => m.version <= 8)) {
      raw.exec(m.sql);
      raw.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)').run(m.version, m.name);
    }
    const indexesBefore = raw
      .prepare(
        "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name IN ('sessions', 'retired_refresh_tokens') AND sql IS NOT NULL ORDER BY name",
      )
      .pluck()
      .all();
    raw
      .prepare("INSERT INTO devices VALUES ('dev_01KAQ00000000000000000000D', ?, 'management', 'sub_x', 'old', 1, NULL)")
      .run('ab'.repeat(32));
    raw
      .prepare(
        `INSERT INTO sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at,
           refresh_digest, refresh_expires_at, prev_refresh_digest, prev_rotated_at, generation, prev_successor, client_address, user_agent)
         VALUES ('ses_01KAQ00000000000000000000S', 'management', 'sub_x', 'dev_01KAQ00000000000000000000D', 1, 9e12, ?, 9e12, ?, 9e12, ?, 5, 2,
           'sealed', '127.0.0.1', 'curl/8')`,
      )
      .run('a1'.repeat(32), 'b1'.repeat(32), 'c1'.repeat(32));
    raw
      .prepare("INSERT INTO retired_refresh_tokens (digest, session_id, retired_at) VALUES (?, 'ses_01KAQ00000000000000000000S', 3)")
      .run('d1'.repeat(32));
    raw.close();
    for (const f of [file, `${file}-wal`, `${file}-shm`]) if (existsSync(f)) chmodSync(f, 0o600);

    const store = await openSqliteStore({ file });
    try {
      const session = await store.getSession('ses_01KAQ00000000000000000000S');
      assert.equal(session?.generation, 2);
      assert.deepEqual(session?.amr, ['ed25519']);
      assert.equal(session?.userAgent, 'curl/8');
      assert.equal((await store.findSessionByAccessDigest('ses_01KAQ00000000000000000000S', 'a1'.repeat(32)))?.id, session?.id);
    } finally {
      await store.close();
    }
    const after = new Database(file);
    try {
      after.pragma('foreign_keys = ON');
      assert.deepEqual(after.prepare('SELECT session_id, digest, retired_at FROM retired_refresh_tokens').all(), [
        { session_id: 'ses_01KAQ00000000000000000000S', digest: 'd1'.repeat(32), retired_at: 3 },
      ]);
      assert.equal(after.prepare('SELECT prev_successor FROM sessions').pluck().get(), 'sealed');
      assert.deepEqual(after.pragma('foreign_key_check'), []);
      assert.deepEqual(after.pragma('integrity_check', { simple: true }), 'ok');
      const indexesAfter = after
        .prepare(
          "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name IN ('sessions', 'retired_refresh_tokens') AND sql IS NOT NULL ORDER BY name",
        )
        .pluck()
        .all();
      // Migration 10 adds the partial index of sealed grace pairs, 14 the one of handed-off
      // sessions by their sign-in; every index before is kept.
      assert.deepEqual(
        indexesAfter.filter((name) => name !== 'sessions_grace_pair' && name !== 'sessions_parent'),
        indexesBefore,
      );
      assert.ok(indexesAfter.includes('sessions_grace_pair'));
      assert.match(String(after.prepare("SELECT sql FROM sqlite_schema WHERE name = 'sessions'").pluck().get()), /WITHOUT ROWID/);
      const fk = after.prepare('SELECT "table" FROM pragma_foreign_key_list(\'retired_refresh_tokens\')').pluck().all();
      assert.deepEqual(fk, ['sessions']);
      const insert = after.prepare(
        `INSERT INTO sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at, refresh_digest, refresh_expires_at)
         VALUES (?, 'application', 'sub_y', ?, 1, 9e12, 'x', 9e12, 'y', 9e12)`,
      );
      assert.throws(() => insert.run('ses_01KAQ0000000000000000000S2', 'lnk_01KAQ0000000000000000000L1'), /FOREIGN KEY/);
      after
        .prepare(
          "INSERT INTO links (id, realm, subject, provider, issuer, external_subject, name, created_at) VALUES ('lnk_01KAQ0000000000000000000L1', 'application', 'sub_y', 'corp', 'https://i', 'ann', 'ann', 1)",
        )
        .run();
      insert.run('ses_01KAQ0000000000000000000S2', 'lnk_01KAQ0000000000000000000L1');
      assert.throws(
        () => after.prepare("UPDATE sessions SET device_id = 'dev_nope' WHERE id = 'ses_01KAQ0000000000000000000S2'").run(),
        /FOREIGN KEY/,
      );
    } finally {
      after.close();
    }
  });
});

describe('sqlite store: no token at rest', () => {
  test('no token string appears in the database or WAL bytes after a full flow; only digests do', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    const { tokens, second } = await flow(store);
    const { createHash } = await import('node:crypto');
    const rawBytes = () => Buffer.concat([readFileSync(file), readFileSync(`${file}-wal`)]).toString('latin1');
    const check = (bytes: string) => {
      for (const token of tokens) {
        assert.equal(bytes.includes(token), false, 'a token is stored in clear');
        assert.equal(bytes.includes(token.slice(5)), false, 'a token body is stored in clear');
      }
    };
    try {
      const bytes = rawBytes();
      check(bytes);
      // Positive control: the reading sees real data, so the absence above means something.
      assert.ok(bytes.includes(createHash('sha256').update(second.access_token).digest('hex')), 'the current access digest is stored');
    } finally {
      await store.close();
    }
    check(readFileSync(file).toString('latin1'));
  });
});

describe('sqlite store: diagnostics off the event loop', () => {
  test('the diagnostics counters (a scan of the live sessions) do not run on the event loop: stats() does not answer within the current turn', async () => {
    const store = await openSqliteStore({ file: freshFile() });
    try {
      const { deps } = await flow(store);
      const expected = await store.stats(deps.clock.now());
      // Read synchronously on this thread, stats() would answer within a few microtasks; read on
      // a worker, the answer is a message, which no number of microtasks can deliver. (A callback
      // queued with setImmediate is no proof either way: under load the worker's message can
      // arrive in the poll phase before the check phase runs it.)
      let answered = false;
      const pending = store.stats(deps.clock.now()).then((s) => {
        answered = true;
        return s;
      });
      for (let i = 0; i < 100; i++) await Promise.resolve();
      assert.equal(answered, false, 'stats() answered within the current turn: it ran on the event loop');
      const stats = await pending;
      assert.deepEqual(stats, expected);
      assert.equal(stats.activeSessions.management, 1);
    } finally {
      await store.close();
    }
  });
});

describe('sqlite store: WAL checkpoints off the event loop', () => {
  /** The database file's own page count, from its header (bytes 28-31): it changes only when a checkpoint copies the WAL into the file. */
  const pagesInFile = (file: string): number => readFileSync(file).readUInt32BE(28);

  async function until(what: string, done: () => boolean): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (!done()) {
      if (Date.now() > deadline) assert.fail(`gave up waiting: ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  test('the WAL is copied into the database file and started over by the background thread, never by the connection that serves requests', async () => {
    const file = freshFile();
    // The main connection's own checkpoint (which blocks the event loop for the copy) is set
    // out of reach, so any checkpoint seen here is the background thread's.
    const plan = { everyMs: 10, restartAtFrames: 200, backstopFrames: 1_000_000 };
    const store = await openSqliteStore({ file, checkpoint: plan });
    const reader = new Database(file, { readonly: true });
    try {
      const { deps, second } = await flow(store);
      const frameBytes = (reader.pragma('page_size', { simple: true }) as number) + 24;
      let refreshToken = second.refresh_token;
      // Each rotation writes several pages: this is many times restartAtFrames. Whether they went
      // through the WAL is looked at right after each commit: the background thread, every 10 ms,
      // may have copied and restarted the WAL by the time the loop ends.
      let throughWal = false;
      for (let i = 0; i < 500; i++) {
        refreshToken = (await rotateRefreshToken(deps, { refreshToken, realm: 'management' })).refresh_token;
        if (!throughWal) {
          const inFile = reader.pragma('page_count', { simple: true }) as number;
          throughWal = inFile > pagesInFile(file) || statSync(`${file}-wal`).size > 0;
        }
      }
      const pages = reader.pragma('page_count', { simple: true }) as number;
      assert.ok(throughWal, 'the writes went through the WAL');
      // While this thread only waits, the file catches up with the WAL and the WAL starts over.
      await until('the database file holds every page', () => pagesInFile(file) === pages);
      await until('the WAL started over', () => statSync(`${file}-wal`).size < plan.restartAtFrames * frameBytes);
      // Nothing was lost on the way: the chain is whole and the newest pair is the live one.
      const audit = await store.listAuditEvents({ afterSeq: 0, limit: 1_000_000 });
      assert.equal(verifyAuditChain(audit).ok, true);
      assert.equal(audit.filter((e) => e.type === 'session.rotated').length, 501);
      await rotateRefreshToken(deps, { refreshToken, realm: 'management' });
    } finally {
      reader.close();
      await store.close();
    }
  });

  test('checkpoint bounds that cannot work are refused when the store opens', async () => {
    await assert.rejects(openSqliteStore({ file: freshFile(), checkpoint: { restartAtFrames: 500, backstopFrames: 500 } }), TypeError);
    await assert.rejects(openSqliteStore({ file: freshFile(), checkpoint: { everyMs: 0 } }), TypeError);
  });
});

describe('sqlite store: migration 10 (grace pair erasure)', () => {
  test('a version 9 store loses the sealed grace pairs its revoked sessions kept, and keeps those of live ones', async () => {
    const file = freshFile();
    const raw = new Database(file);
    raw.pragma('journal_mode = WAL');
    raw.pragma('foreign_keys = ON');
    raw.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    for (const m of loadMigrations().filter((m) => m.version <= 9)) {
      raw.exec(m.sql);
      raw.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)').run(m.version, m.name);
    }
    raw.exec(`
      INSERT INTO project (singleton, project_id, created_at) VALUES (1, 'prj_01KAQ00000000000000000000P', 0);
      INSERT INTO devices (id, public_key, realm, subject, name, created_at) VALUES ('dev_01KAQ00000000000000000000D', '${'ab'.repeat(32)}', 'management', 'admin', 'laptop', 0);`);
    const session = raw.prepare(
      `INSERT INTO sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at, refresh_digest,
         refresh_expires_at, prev_refresh_digest, prev_rotated_at, prev_successor, revoked_at)
       VALUES (?, 'management', 'admin', 'dev_01KAQ00000000000000000000D', 0, 9e12, ?, 9e12, ?, 9e12, ?, 1, ?, ?)`,
    );
    session.run('ses_01KAQ0000000000000000000RV', 'a1'.repeat(32), 'b1'.repeat(32), 'c1'.repeat(32), 'sealed-revoked', 5);
    session.run('ses_01KAQ0000000000000000000LV', 'a2'.repeat(32), 'b2'.repeat(32), 'c2'.repeat(32), 'sealed-live', null);
    raw.close();
    for (const f of [file, `${file}-wal`, `${file}-shm`]) if (existsSync(f)) chmodSync(f, 0o600);

    const store = await openSqliteStore({ file });
    await store.close();
    const after = new Database(file, { readonly: true });
    try {
      const pairs = after.prepare('SELECT id, prev_successor FROM sessions ORDER BY id').all();
      assert.deepEqual(pairs, [
        { id: 'ses_01KAQ0000000000000000000LV', prev_successor: 'sealed-live' },
        { id: 'ses_01KAQ0000000000000000000RV', prev_successor: null },
      ]);
    } finally {
      after.close();
    }
  });
});

describe('sqlite store: migration 12 (users, groups, SCIM tokens)', () => {
  test('a version 11 store gets a user (active, no attributes, created with its first credential) for every subject holding or having held a device or link', async () => {
    const file = freshFile();
    const raw = new Database(file);
    raw.pragma('journal_mode = WAL');
    raw.pragma('foreign_keys = ON');
    raw.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    for (const m of loadMigrations().filter((m) => m.version <= 11)) {
      raw.exec(m.sql);
      raw.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)').run(m.version, m.name);
    }
    const device = raw.prepare(
      'INSERT INTO devices (id, public_key, realm, subject, name, created_at, removed_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    // An admin with two devices (the later one removed), an application user whose only device
    // was removed, and one with a device and an older link.
    device.run('dev_01KAQ0000000000000000000A1', 'a1'.repeat(32), 'management', 'sub_01KAQ0000000000000000000AD', 'laptop', 2000, null);
    device.run('dev_01KAQ0000000000000000000A2', 'a2'.repeat(32), 'management', 'sub_01KAQ0000000000000000000AD', 'phone', 1000, 5000);
    device.run('dev_01KAQ0000000000000000000R1', 'b1'.repeat(32), 'application', 'sub_01KAQ0000000000000000000RM', 'kiosk', 3000, 4000);
    device.run('dev_01KAQ0000000000000000000L1', 'c1'.repeat(32), 'application', 'sub_01KAQ0000000000000000000LK', 'tablet', 7000, null);
    raw
      .prepare(
        `INSERT INTO links (id, realm, subject, provider, issuer, external_subject, name, created_at)
         VALUES ('lnk_01KAQ0000000000000000000L1', 'application', 'sub_01KAQ0000000000000000000LK', 'corp', 'https://login.example.com', 'ann', 'ann', 6000)`,
      )
      .run();
    raw
      .prepare(
        `INSERT INTO sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at, refresh_digest, refresh_expires_at)
         VALUES ('ses_01KAQ0000000000000000000S1', 'management', 'sub_01KAQ0000000000000000000AD', 'dev_01KAQ0000000000000000000A1', 2000, 9e12, ?, 9e12, ?, 9e12)`,
      )
      .run('d1'.repeat(32), 'e1'.repeat(32));
    raw.close();
    for (const f of [file, `${file}-wal`, `${file}-shm`]) if (existsSync(f)) chmodSync(f, 0o600);

    const store = await openSqliteStore({ file });
    try {
      const users = await store.listUsers({ limit: 10 });
      const blank = (subject: string, realm: 'management' | 'application', createdAt: number) => ({
        subject,
        realm,
        userName: null,
        externalId: null,
        name: null,
        nameSource: null,
        email: null,
        emailVerified: false,
        emailSource: null,
        groups: [],
        groupsSource: null,
        status: 'active',
        createdAt,
        updatedAt: createdAt,
        lastSignInAt: null,
        disabledAt: null,
      });
      assert.deepEqual(users, [
        blank('sub_01KAQ0000000000000000000AD', 'management', 1000),
        blank('sub_01KAQ0000000000000000000LK', 'application', 6000),
        blank('sub_01KAQ0000000000000000000RM', 'application', 3000),
      ]);
      // The bearer check reads the backfilled user with the session.
      const session = await store.findSessionByAccessDigest('ses_01KAQ0000000000000000000S1', 'd1'.repeat(32));
      assert.deepEqual(session?.user, { name: null, email: null, emailVerified: false, groups: [] });
      assert.deepEqual(await store.listGroups({}), []);
      assert.deepEqual(await store.listScimTokens(), []);
    } finally {
      await store.close();
    }
    const after = new Database(file, { readonly: true });
    try {
      // Every migration ran, this one and the later ones.
      assert.equal(after.prepare('SELECT MAX(version) FROM schema_migrations').pluck().get(), loadMigrations().at(-1)?.version);
      const indexes = after
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name IN ('users', 'groups') ORDER BY name")
        .pluck()
        .all();
      assert.ok(
        indexes.includes('users_realm_user_name') && indexes.includes('users_realm_email') && indexes.includes('groups_realm_name'),
      );
    } finally {
      after.close();
    }
  });

  test('a userName names one user of a realm even for a write that skips the store (the unique index decides)', async () => {
    const file = freshFile();
    const store = await openSqliteStore({ file });
    await store.close();
    const raw = new Database(file);
    try {
      const insert = raw.prepare("INSERT INTO users (subject, realm, user_name, created_at, updated_at) VALUES (?, ?, 'ada', 0, 0)");
      insert.run('sub_01KAQ0000000000000000000U1', 'application');
      insert.run('sub_01KAQ0000000000000000000U2', 'management');
      assert.throws(() => insert.run('sub_01KAQ0000000000000000000U3', 'application'), /UNIQUE constraint failed/);
    } finally {
      raw.close();
    }
  });

  test("a group's members are listed right after writes that skip the store (the triggers keep user_groups), through its index", async () => {
    const file = freshFile();
    await (await openSqliteStore({ file })).close();
    const raw = new Database(file);
    try {
      const insert = raw.prepare("INSERT INTO users (subject, realm, groups, created_at, updated_at) VALUES (?, 'application', ?, 0, 0)");
      insert.run('sub_01KAQ0000000000000000000U1', '["ops","web"]');
      insert.run('sub_01KAQ0000000000000000000U2', '["ops"]');
      insert.run('sub_01KAQ0000000000000000000U3', '["web"]');
      raw.prepare(`UPDATE users SET groups = '["web"]' WHERE subject = 'sub_01KAQ0000000000000000000U2'`).run();
      raw.prepare(`UPDATE users SET groups = '["db","ops"]' WHERE subject = 'sub_01KAQ0000000000000000000U3'`).run();
      raw.prepare("DELETE FROM users WHERE subject = 'sub_01KAQ0000000000000000000U1'").run();
    } finally {
      raw.close();
    }
    const store = await openSqliteStore({ file });
    try {
      const members = async (group: string, after?: string) =>
        (await store.listUsers({ group, limit: 10, ...(after === undefined ? {} : { after }) })).map((u) => u.subject);
      assert.deepEqual(await members('ops'), ['sub_01KAQ0000000000000000000U3']);
      assert.deepEqual(await members('web'), ['sub_01KAQ0000000000000000000U2']);
      assert.deepEqual(await members('db', 'sub_01KAQ0000000000000000000U3'), []);
    } finally {
      await store.close();
    }
    // Each filtered page reads an index: in subject order (no sort), or a look-up of a few rows
    // (sorted). Only the substring filter, and no filter at all, read users in primary-key order.
    const db = new Database(file, { readonly: true });
    try {
      const after = 'sub_01KAQ0000000000000000000U0';
      const cases: [Omit<UserFilter, 'limit'>, RegExp][] = [
        [{ group: 'ops' }, /^SEARCH ug USING PRIMARY KEY \(name=\?\) \| SEARCH users USING PRIMARY KEY \(subject=\?\)$/],
        [{ group: 'ops', after }, /^SEARCH ug USING PRIMARY KEY \(name=\? AND subject>\?\) \| SEARCH users USING PRIMARY KEY/],
        [{ group: 'ops', realm: 'application', status: 'active' }, /^SEARCH ug USING PRIMARY KEY \(name=\?\) \| SEARCH users/],
        [{ realm: 'application', after }, /^SEARCH users USING INDEX users_realm_subject \(realm=\? AND subject>\?\)$/],
        [{ status: 'disabled' }, /^SEARCH users USING INDEX users_status_subject \(status=\?\)$/],
        [{ email: 'ada@example.com' }, /^SEARCH users USING INDEX users_realm_email \(realm=\? AND email=\?\)/],
        [{ userName: 'ada' }, /^SEARCH users USING INDEX users_realm_user_name \(realm=\? AND user_name=\?\)/],
        [{ externalId: 'x-1' }, /^SEARCH users USING INDEX users_realm_external_id \(realm=\? AND external_id=\?\)/],
        [{ after }, /^SEARCH users USING PRIMARY KEY \(subject>\?\)$/],
      ];
      for (const [filter, expected] of cases) {
        const { sql, params } = userListingSql({ ...filter, limit: 101 });
        const plan = db
          .prepare<Record<string, string | number>, { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
          .all(params)
          .map((r) => r.detail)
          .join(' | ');
        assert.match(plan, expected, JSON.stringify(filter));
      }
    } finally {
      db.close();
    }
  });
});

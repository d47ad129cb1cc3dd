// Users on PostgreSQL beyond the conformance suite: migration 015 on a schema at the previous
// version (every subject with a credential gets its user), and the user row's locks racing
// sign-ins on two nodes (no deadlock, no live session of a disabled or removed user).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, test } from 'node:test';
import { type AuditEventDraft, type AuditEventType, digestToken, mintSessionToken, newId, verifyAuditChain } from '@svc/core';
import {
  type DeviceRecord,
  defaultUser,
  type GroupRecord,
  newSessionRecord,
  type PairingIntentRecord,
  type SessionRecord,
  type Store,
  type TokenPairDigests,
} from '@svc/core/store';
import type { PostgresStore } from '../../src/index.js';
import { loadMigrations } from '../../src/migrations.js';
import { createTestEnv } from '../pg-test-env.js';

const RACERS = 40;
const T0 = Date.UTC(2026, 10, 27, 10, 0, 0, 0);
const clock = { now: () => T0 };
const random = (n: number) => randomBytes(n);

const env = createTestEnv();
after(() => env.dispose());

function draft(type: AuditEventType, sessionId: string | null = null): AuditEventDraft {
  return { id: newId('event', clock, random), at: T0, type, realm: 'management', subject: null, deviceId: null, sessionId, data: {} };
}

function device(subject: string = newId('subject', clock, random)): DeviceRecord {
  return {
    id: newId('device', clock, random),
    publicKey: randomBytes(32).toString('hex'),
    realm: 'management',
    subject,
    name: 'laptop',
    createdAt: T0,
    removedAt: null,
  };
}

function pair(): TokenPairDigests & { readonly access: string } {
  const access = mintSessionToken('access', newId('session', clock, random), random);
  const refresh = mintSessionToken('refresh', newId('session', clock, random), random);
  return {
    access,
    accessDigest: digestToken(access),
    refreshDigest: digestToken(refresh),
    accessExpiresAt: T0 + 900_000,
    refreshExpiresAt: T0 + 86_400_000,
  };
}

function session(d: DeviceRecord, p: TokenPairDigests): SessionRecord {
  return newSessionRecord({ id: newId('session', clock, random), device: d, now: T0, expiresAt: T0 + 86_400_000, pair: p });
}

/** Two nodes on one fresh schema: two stores, two pools. */
async function twoNodes(): Promise<{
  a: PostgresStore;
  b: PostgresStore;
  nodes: readonly Store[];
  schemaName: string;
  close(): Promise<void>;
}> {
  const schema = env.schema();
  const a = await env.open(schema);
  const b = await env.open(schema);
  return {
    a,
    b,
    schemaName: schema,
    nodes: [a, b],
    async close() {
      await a.close();
      await b.close();
      await env.drop(schema);
    },
  };
}

/** The disable `updateUser` decides, without its last-management-user refusal. */
function disable(store: Store, subject: string) {
  return store.changeUser({ subject, now: T0 }, (current) => ({
    kind: 'update',
    user: { ...current, status: 'disabled', disabledAt: T0, updatedAt: T0 },
    revokeSessions: 'user_disabled',
    events: [draft('user.disabled')],
  }));
}

async function liveSessionsOf(store: Store, subject: string): Promise<readonly SessionRecord[]> {
  return store.listActiveSessions({ now: T0, subject });
}

test('migration 15 gives every subject holding (or having held) a device or a link a user: active, no attributes, created with its first credential', async () => {
  const schema = env.schema();
  await env.admin.query(`CREATE SCHEMA ${schema}`);
  await env.admin.query(
    `CREATE TABLE ${schema}.schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`,
  );
  for (const m of loadMigrations().filter((m) => m.version <= 14)) {
    await env.admin.query(`BEGIN; SET LOCAL search_path TO ${schema}; ${m.sql}; COMMIT;`);
    await env.admin.query(`INSERT INTO ${schema}.schema_migrations (version, name, applied_at) VALUES ($1, $2, 0)`, [m.version, m.name]);
  }
  const addDevice = (id: string, realm: string, subject: string, createdAt: number, removedAt: number | null = null) =>
    env.admin.query(
      `INSERT INTO ${schema}.devices (id, public_key, realm, subject, name, created_at, removed_at) VALUES ($1, $2, $3, $4, 'old', $5, $6)`,
      [id, randomBytes(32).toString('hex'), realm, subject, createdAt, removedAt],
    );
  const addLink = (id: string, realm: string, subject: string, createdAt: number) =>
    env.admin.query(
      `INSERT INTO ${schema}.links (id, realm, subject, provider, issuer, external_subject, name, created_at)
       VALUES ($1, $2, $3, 'corp', 'https://idp.example', $1, 'idp', $4)`,
      [id, realm, subject, createdAt],
    );
  // An admin with two devices (the older removed), an application user with a link only, one
  // with a device and an older link.
  await addDevice('dev_01KAQ00000000000000000000A', 'management', 'sub_admin', 3000);
  await addDevice('dev_01KAQ00000000000000000000B', 'management', 'sub_admin', 1000, 2000);
  await addLink('lnk_01KAQ00000000000000000000C', 'application', 'sub_linked', 4000);
  await addDevice('dev_01KAQ00000000000000000000D', 'application', 'sub_both', 6000);
  await addLink('lnk_01KAQ00000000000000000000E', 'application', 'sub_both', 5000);
  await env.admin.query(
    `INSERT INTO ${schema}.sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at,
       refresh_digest, refresh_expires_at, generation)
     VALUES ('ses_01KAQ00000000000000000000S', 'management', 'sub_admin', 'dev_01KAQ00000000000000000000A', 1, 9e12, $1, 9e12, $2, 9e12, 0)`,
    ['a1'.repeat(32), 'b1'.repeat(32)],
  );

  const store = await env.open(schema);
  try {
    const latest = loadMigrations().at(-1);
    const applied = await env.admin.query<{ version: number }>(`SELECT max(version) AS version FROM ${schema}.schema_migrations`);
    assert.equal(applied.rows[0]?.version, latest?.version);
    const users = await store.listUsers({ limit: 1000 });
    assert.deepEqual(
      users.map((u) => u.subject),
      ['sub_admin', 'sub_both', 'sub_linked'],
    );
    assert.deepEqual(await store.getUser('sub_admin'), defaultUser({ subject: 'sub_admin', realm: 'management', now: 1000 }));
    assert.deepEqual(await store.getUser('sub_linked'), defaultUser({ subject: 'sub_linked', realm: 'application', now: 4000 }));
    assert.deepEqual(await store.getUser('sub_both'), defaultUser({ subject: 'sub_both', realm: 'application', now: 5000 }));
    // The bearer check of a session made before the migration carries its (empty) user.
    const found = await store.findSessionByAccessDigest('ses_01KAQ00000000000000000000S', 'a1'.repeat(32));
    assert.deepEqual(found?.user, { name: null, email: null, emailVerified: false, groups: [] });
    // The backfilled admin counts as the last management user holding a credential.
    const context = await store.changeUser({ subject: 'sub_linked', now: T0 }, () => ({ kind: 'none' }));
    assert.equal(context.kind, 'none');
    let others = -1;
    await store.changeUser({ subject: 'sub_admin', now: T0 }, (_current, c) => {
      others = c.otherActiveManagementUsers;
      return { kind: 'none' };
    });
    assert.equal(others, 0);
  } finally {
    await store.close();
  }
});

test(`${RACERS} concurrent sign-ins of one user on two nodes all succeed (no deadlock on its row) and record the sign-in`, async () => {
  const n = await twoNodes();
  try {
    const d = device();
    assert.equal(await n.a.enrollDevice(d, draft('device.enrolled')), 'enrolled');
    const outcomes = await Promise.all(
      Array.from({ length: RACERS }, (_, i) => {
        const p = pair();
        return (n.nodes[i % 2] as Store).createSession(session(d, p), p, draft('session.created'));
      }),
    );
    assert.deepEqual(new Set(outcomes), new Set(['created']));
    assert.equal((await liveSessionsOf(n.a, d.subject)).length, RACERS);
    assert.equal((await n.b.getUser(d.subject))?.lastSignInAt, T0);
  } finally {
    await n.close();
  }
});

test('sign-ins racing a disable of their user on the other node leave no live session: each is refused or revoked with the disable', async () => {
  const n = await twoNodes();
  try {
    const devices = [device()];
    devices.push(device(devices[0]?.subject));
    for (const d of devices) assert.equal(await n.a.enrollDevice(d, draft('device.enrolled')), 'enrolled');
    const subject = devices[0]?.subject as string;
    const signIns = Array.from({ length: RACERS }, (_, i) => {
      const p = pair();
      const d = devices[i % 2] as DeviceRecord;
      return n.a.createSession(session(d, p), p, draft('session.created'));
    });
    // Once one sign-in is in, so that the disable has a session to revoke while others still run.
    await signIns[0];
    const disabled = disable(n.b, subject);
    const [outcome, ...results] = await Promise.all([disabled, ...signIns]);
    assert.equal(outcome.kind, 'updated');
    const created = results.filter((r) => r === 'created').length;
    assert.equal(created + results.filter((r) => r === 'user_disabled').length, RACERS, JSON.stringify(results));
    assert.equal(
      outcome.kind === 'updated' ? outcome.revokedSessions : -1,
      created,
      'every session created before the disable is revoked by it',
    );
    assert.deepEqual(await liveSessionsOf(n.b, subject), []);
    const p = pair();
    assert.equal(await n.b.createSession(session(devices[0] as DeviceRecord, p), p, draft('session.created')), 'user_disabled');
    assert.equal(verifyAuditChain(await n.a.listAuditEvents({ afterSeq: 0, limit: 1e6 })).ok, true);
  } finally {
    await n.close();
  }
});

test('sign-ins racing the removal of their user on the other node leave no live session and end in no error (no deadlock)', async () => {
  const n = await twoNodes();
  try {
    const d = device();
    assert.equal(await n.a.enrollDevice(d, draft('device.enrolled')), 'enrolled');
    const signIns = Array.from({ length: RACERS }, () => {
      const p = pair();
      return n.a.createSession(session(d, p), p, draft('session.created'));
    });
    await signIns[0];
    const removed = n.b.changeUser({ subject: d.subject, now: T0 }, () => ({ kind: 'remove', events: [draft('user.removed')] }));
    const [outcome, ...results] = await Promise.all([removed, ...signIns]);
    assert.equal(outcome.kind, 'removed');
    const created = results.filter((r) => r === 'created').length;
    assert.equal(created + results.filter((r) => r === 'device_inactive').length, RACERS, JSON.stringify(results));
    assert.equal(outcome.kind === 'removed' ? outcome.revokedSessions : -1, created);
    assert.deepEqual(await liveSessionsOf(n.b, d.subject), []);
    assert.equal(await n.a.getUser(d.subject), null);
    assert.equal((await n.a.getDevice(d.id))?.removedAt, T0);
  } finally {
    await n.close();
  }
});

/** An active management user: an admin who prepares intents. */
async function admin(store: Store): Promise<string> {
  const user = defaultUser({ subject: newId('subject', clock, random), realm: 'management', now: T0 });
  assert.equal(await store.createUser(user, draft('user.created')), 'created');
  return user.subject;
}

/** A live pairing intent for `subject` by `createdBy`, stored (with the subject's user when it has none). */
async function intentFor(store: Store, subject: string, createdBy: string): Promise<PairingIntentRecord> {
  const intent: PairingIntentRecord = {
    id: newId('intent', clock, random),
    realm: 'management',
    subject,
    name: null,
    codeDigest: randomBytes(32).toString('hex'),
    createdAt: T0,
    expiresAt: T0 + 900_000,
    createdBy,
    failures: 0,
    completedAt: null,
    burnedAt: null,
    deviceId: null,
    preparedByNode: null,
  };
  await store.createPairingIntent(intent, draft('pairing.prepared'));
  return intent;
}

function completeIntent(store: Store, intent: PairingIntentRecord, d: DeviceRecord = device(intent.subject)) {
  return store.completePairing({ id: intent.id, codeDigest: intent.codeDigest, now: T0, device: d }, draft('pairing.completed'));
}

test("migration 16 gives PostgreSQL the users (realm, external_id) index SQLite's 012 has: the directory's externalId look-up reads it", async () => {
  const schema = env.schema();
  const store = await env.open(schema);
  try {
    const found = await env.admin.query<{ indexdef: string }>(
      `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'users' AND indexname = 'users_realm_external_id'`,
      [schema],
    );
    assert.match(found.rows[0]?.indexdef ?? '', /\(realm, external_id\) WHERE \(external_id IS NOT NULL\)/);
  } finally {
    await store.close();
  }
});

test("attack: a completion waiting behind its user's removal sees no user row and is refused: the removed user is not recreated", async () => {
  const n = await twoNodes();
  const raw = await env.admin.connect();
  try {
    const by = await admin(n.a);
    const d = device();
    assert.equal(await n.a.enrollDevice(d, draft('device.enrolled')), 'enrolled');
    const intent = await intentFor(n.a, d.subject, by);
    // A removal that holds the user's row (as changeUser does) but, unlike changeUser, burns no
    // intent: only the completion's own check stands between the intent and a recreated user.
    await raw.query('BEGIN');
    await raw.query(`SET LOCAL search_path TO ${n.schemaName}`);
    await raw.query('SELECT subject FROM users WHERE subject = $1 FOR UPDATE', [d.subject]);
    const completion = completeIntent(n.b, intent);
    const deadline = Date.now() + 10_000;
    for (;;) {
      const waiting = await env.admin.query<{ n: number }>(
        `SELECT COUNT(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM users WHERE subject%FOR SHARE%'`,
      );
      if ((waiting.rows[0]?.n ?? 0) > 0) break;
      assert.ok(Date.now() < deadline, 'the completion did not come to wait on the user row within 10 s');
      await new Promise((r) => setTimeout(r, 20));
    }
    await raw.query('DELETE FROM users WHERE subject = $1', [d.subject]);
    await raw.query('COMMIT');
    assert.deepEqual(await completion, { kind: 'invalid' });
    assert.equal(await n.a.getUser(d.subject), null, 'the removed user is not recreated');
    assert.deepEqual(
      (await n.a.listDevices({ subject: d.subject })).map((x) => x.id),
      [d.id],
      'no device enrolled by the refused completion',
    );
    assert.equal((await n.a.getPairingIntent(intent.id))?.completedAt, null, 'the completion went back entirely');
  } finally {
    await raw.query('ROLLBACK').catch(() => undefined);
    raw.release();
    await n.close();
  }
});

test(`${RACERS} completions of intents for a user and by its admin, racing the removal of both on the other node: no error, no user recreated, every intent completed before or burned`, async () => {
  const n = await twoNodes();
  try {
    const by = await admin(n.a);
    const d = device();
    assert.equal(await n.a.enrollDevice(d, draft('device.enrolled')), 'enrolled');
    const intents: PairingIntentRecord[] = [];
    for (let i = 0; i < RACERS; i++) {
      intents.push(await intentFor(n.a, i % 2 === 0 ? d.subject : newId('subject', clock, random), by));
    }
    const completions = intents.map((intent) => completeIntent(n.a, intent));
    const remove = (subject: string) => n.b.changeUser({ subject, now: T0 }, () => ({ kind: 'remove', events: [draft('user.removed')] }));
    const [user, creator, ...results] = await Promise.all([remove(d.subject), remove(by), ...completions]);
    assert.equal(user.kind, 'removed');
    assert.equal(creator.kind, 'removed');
    const kinds = results.map((r) => r.kind);
    assert.deepEqual(new Set(kinds.filter((k) => k !== 'completed' && k !== 'invalid')), new Set(), JSON.stringify(kinds));
    const completed = kinds.filter((k) => k === 'completed').length;
    const burned = (user.kind === 'removed' ? user.burnedIntents : 0) + (creator.kind === 'removed' ? creator.burnedIntents : 0);
    // An intent for the user is also by the admin: burned once, by whichever removal came first.
    assert.equal(completed + burned, RACERS, `completed ${completed}, burned ${burned}`);
    assert.equal(await n.a.getUser(d.subject), null, 'the removed user is not recreated');
    assert.equal(await n.a.getUser(by), null);
    assert.deepEqual(await n.a.listDevices({ subject: d.subject }), [], "the user's devices, old and new, are removed");
    for (const intent of intents) {
      const stored = await n.a.getPairingIntent(intent.id);
      assert.ok(stored?.completedAt !== null || stored?.burnedAt !== null, `intent ${intent.id} is neither completed nor burned`);
    }
    assert.equal(verifyAuditChain(await n.a.listAuditEvents({ afterSeq: 0, limit: 1e6 })).ok, true);
  } finally {
    await n.close();
  }
});

test(`of ${RACERS} concurrent creations of users with one userName, or of group records with one name, on two nodes exactly one wins`, async () => {
  const n = await twoNodes();
  try {
    const users = await Promise.all(
      Array.from({ length: RACERS }, (_, i) => {
        const user = { ...defaultUser({ subject: newId('subject', clock, random), realm: 'application', now: T0 }), userName: 'ann' };
        return (n.nodes[i % 2] as Store).createUser(user, draft('user.created'));
      }),
    );
    assert.equal(users.filter((u) => u === 'created').length, 1);
    assert.equal(users.filter((u) => u === 'user_name_taken').length, RACERS - 1);
    const groups = await Promise.all(
      Array.from({ length: RACERS }, (_, i) => {
        const group: GroupRecord = {
          id: newId('group', clock, random),
          realm: 'application',
          name: 'ops',
          externalId: null,
          createdAt: T0,
          updatedAt: T0,
        };
        return (n.nodes[i % 2] as Store).saveGroup(group, draft('group.saved'));
      }),
    );
    assert.equal(groups.filter((g) => g === 'saved').length, 1);
    assert.equal(groups.filter((g) => g === 'name_taken').length, RACERS - 1);
    assert.deepEqual(await n.b.listGroups({}), [{ realm: 'application', name: 'ops', id: (await n.a.listGroups({}))[0]?.id, members: 0 }]);
  } finally {
    await n.close();
  }
});

test('users are listed and paged in code-point order and the text filter matches literally, whatever the collation', async () => {
  const n = await twoNodes();
  try {
    // Subjects whose order differs between a linguistic collation and code points.
    const subjects = ['sub_B', 'sub_a', 'sub_-z', 'sub_Z', 'sub_.a'];
    for (const subject of subjects) {
      const user = { ...defaultUser({ subject, realm: 'application', now: T0 }), name: `Ann_${subject}%` };
      assert.equal(await n.a.createUser(user, draft('user.created')), 'created');
    }
    const expected = [...subjects].sort();
    assert.deepEqual(
      (await n.a.listUsers({ limit: 100 })).map((u) => u.subject),
      expected,
    );
    const firstPage = await n.a.listUsers({ limit: 2 });
    const rest = await n.a.listUsers({ limit: 100, after: firstPage.at(-1)?.subject as string });
    assert.deepEqual(
      [...firstPage, ...rest].map((u) => u.subject),
      expected,
    );
    // `%` and `_` are literal characters of the needle, not LIKE wildcards; ASCII folding only.
    assert.deepEqual(
      (await n.a.listUsers({ limit: 100, text: 'ANN_SUB_B%' })).map((u) => u.subject),
      ['sub_B'],
    );
    assert.deepEqual(await n.a.listUsers({ limit: 100, text: 'ann%sub' }), []);
  } finally {
    await n.close();
  }
});

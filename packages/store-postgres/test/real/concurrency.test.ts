import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type AuditEventDraft, type AuditEventType, digestToken, mintSessionToken, mintToken, newId, verifyAuditChain } from '@svc/core';
import {
  type AuditedRotation,
  type DeviceRecord,
  defaultUser,
  type RotationOutcome,
  type SessionRecord,
  type Store,
  type TokenPairDigests,
} from '@svc/core/store';
import type pg from 'pg';
import type { PostgresStore } from '../../src/index.js';
import { createTestEnv } from '../pg-test-env.js';
import { managementSession } from '../session-record.js';

const ATTEMPTS = 50;
const T0 = Date.UTC(2026, 10, 22, 10, 0, 0, 0);
const clock = { now: () => T0 };
const random = (n: number) => randomBytes(n);

const env = createTestEnv();
after(() => env.dispose());

/** Two nodes on one fresh schema: two stores, two pools. */
async function twoNodes(): Promise<{ a: PostgresStore; b: PostgresStore; nodes: readonly Store[]; close(): Promise<void> }> {
  const schema = env.schema();
  const a = await env.open(schema);
  const b = await env.open(schema);
  return {
    a,
    b,
    nodes: [a, b],
    async close() {
      await a.close();
      await b.close();
      await env.drop(schema);
    },
  };
}

/** Runs `attempt(i, node)` ATTEMPTS times at once, alternating between the nodes. */
function storm<T>(nodes: readonly Store[], attempt: (i: number, node: Store) => Promise<T>): Promise<T[]> {
  return Promise.all(Array.from({ length: ATTEMPTS }, (_, i) => attempt(i, nodes[i % nodes.length] as Store)));
}

function draft(type: AuditEventType, data: AuditEventDraft['data'] = {}, sessionId: string | null = null): AuditEventDraft {
  return { id: newId('event', clock, random), at: T0, type, realm: 'management', subject: null, deviceId: null, sessionId, data };
}

function device(publicKey = randomBytes(32).toString('hex')): DeviceRecord {
  return {
    id: newId('device', clock, random),
    publicKey,
    realm: 'management',
    subject: newId('subject', clock, random),
    name: 'laptop',
    createdAt: T0,
    removedAt: null,
  };
}

function pair(now: number): TokenPairDigests & { readonly access: string; readonly refresh: string } {
  // Only the digests reach the store; the tokens name some session for their shape alone.
  const access = mintSessionToken('access', newId('session', clock, random), random);
  const refresh = mintSessionToken('refresh', newId('session', clock, random), random);
  return {
    access,
    refresh,
    accessDigest: digestToken(access),
    refreshDigest: digestToken(refresh),
    accessExpiresAt: now + 900_000,
    refreshExpiresAt: now + 86_400_000,
  };
}

/** An enrolled device with one fresh session; answers the session and its first pair. */
async function sessionOn(store: Store): Promise<{ session: SessionRecord; first: ReturnType<typeof pair> }> {
  const session = await newSession(store);
  const first = pair(T0);
  await store.createSession(session, first, draft('session.created', {}, session.id));
  return { session, first };
}

/** A session record of a device just enrolled on `store`, not yet created. */
async function newSession(store: Store): Promise<SessionRecord> {
  const d = device();
  assert.equal(await store.enrollDevice(d, draft('device.enrolled')), 'enrolled');
  return managementSession(newId('session', clock, random), d, T0, 7 * 86_400_000);
}

function rotationAudit(o: AuditedRotation): AuditEventDraft {
  const type =
    o.kind === 'rotated' ? 'session.rotated' : o.kind === 'rotated_in_grace' ? 'session.rotated_in_grace' : 'session.refresh_reused';
  return draft(type, { generation: o.session.generation }, o.session.id);
}

function tally(kinds: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of kinds) out[k] = (out[k] ?? 0) + 1;
  return out;
}

async function assertChainVerifies(store: Store, length?: number): Promise<void> {
  const events = await store.listAuditEvents({ afterSeq: 0, limit: 1e9 });
  const verdict = verifyAuditChain(events);
  assert.equal(verdict.ok, true, JSON.stringify(verdict));
  if (length !== undefined) assert.equal(events.length, length);
}

describe('across two nodes (two pools on one schema)', () => {
  let n: Awaited<ReturnType<typeof twoNodes>>;
  before(async () => {
    n = await twoNodes();
  });
  after(() => n.close());

  test('of 50 concurrent uses of one bootstrap token exactly one enrolls, the others see it used', async () => {
    const token = mintToken('bootstrap', random);
    const digest = digestToken(token);
    await n.a.issueBootstrapToken(
      { id: newId('bootstrap', clock, random), digest, createdAt: T0, expiresAt: T0 + 900_000 },
      draft('bootstrap.issued'),
    );
    const outcomes = await storm(n.nodes, (_, node) =>
      node.consumeBootstrapToken({ digest, now: T0 + 1, device: device() }, draft('device.enrolled')),
    );
    assert.deepEqual(tally(outcomes.map((o) => o.kind)), { enrolled: 1, used: ATTEMPTS - 1 });
    const winner = outcomes.find((o) => o.kind === 'enrolled');
    assert.ok(winner?.kind === 'enrolled');
    assert.equal((await n.b.getDevice(winner.device.id))?.publicKey, winner.device.publicKey);
  });

  test('bootstrap tokens issued concurrently on both nodes leave exactly one live', async () => {
    const tokens = Array.from({ length: 10 }, () => digestToken(mintToken('bootstrap', random)));
    await Promise.all(
      tokens.map((digest, i) =>
        (n.nodes[i % 2] as Store).issueBootstrapToken(
          { id: newId('bootstrap', clock, random), digest, createdAt: T0, expiresAt: T0 + 900_000 },
          draft('bootstrap.issued'),
        ),
      ),
    );
    const outcomes = [];
    for (const digest of tokens)
      outcomes.push((await n.a.consumeBootstrapToken({ digest, now: T0 + 1, device: device() }, draft('device.enrolled'))).kind);
    assert.deepEqual(tally(outcomes), { enrolled: 1, unknown: tokens.length - 1 });
  });

  test('of 50 concurrent consumptions of one challenge exactly one gets it', async () => {
    const id = newId('challenge', clock, random);
    await n.a.createChallenge({
      id,
      publicKey: 'ab'.repeat(32),
      realm: 'management',
      challenge: `svc-auth-v1 challenge x management ${id}`,
      createdAt: T0,
      expiresAt: T0 + 60_000,
    });
    const got = await storm(n.nodes, (_, node) => node.consumeChallenge({ id, now: T0 + 1 }));
    assert.equal(got.filter((c) => c !== null).length, 1);
    assert.equal(got.find((c) => c !== null)?.id, id);
  });

  test('a used challenge leaves the table at once, so sign-ins do not grow it until the challenges expire', async () => {
    // Kept until it expired, every used challenge stayed in the table: 24,000 rows at 400
    // sign-ins a second and the default 60 s, which each challenge's prune read while the
    // table's statistics still said it was empty.
    const ids = Array.from({ length: 40 }, () => newId('challenge', clock, random));
    for (const [i, id] of ids.entries()) {
      await (i % 2 === 0 ? n.a : n.b).createChallenge({
        id,
        publicKey: 'cd'.repeat(32),
        realm: 'management',
        challenge: `svc-auth-v1 challenge x management ${id}`,
        createdAt: T0,
        expiresAt: T0 + 60_000,
      });
    }
    const open = async () =>
      (await env.admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${n.a.schema}.challenges WHERE id = ANY($1)`, [ids])).rows[0]
        ?.n;
    assert.equal(await open(), 40);
    // Half of them used, on either node, long before they expire.
    for (const [i, id] of ids.slice(0, 20).entries()) assert.notEqual(await n.nodes[i % 2]?.consumeChallenge({ id, now: T0 + 1 }), null);
    assert.equal(await open(), 20, 'only the 20 challenges still open are kept');
    // A used one is refused as before.
    assert.equal(await n.b.consumeChallenge({ id: ids[0] as string, now: T0 + 2 }), null);
    // The open ones are still usable, once.
    assert.equal((await n.b.consumeChallenge({ id: ids[39] as string, now: T0 + 2 }))?.id, ids[39]);
    assert.equal(await n.a.consumeChallenge({ id: ids[39] as string, now: T0 + 3 }), null);
  });

  test('expired challenges and DPoP records are swept within 64 writes of a node', async () => {
    const later = T0 + 10 * 60_000;
    const count = async (table: string, column: string, keys: readonly string[]) =>
      (await env.admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${n.a.schema}.${table} WHERE ${column} = ANY($1)`, [keys]))
        .rows[0]?.n;
    // 100 of each that expire long before `later`.
    const stale = Array.from({ length: 100 }, () => newId('challenge', clock, random));
    for (const id of stale) {
      await n.b.createChallenge({
        id,
        publicKey: 'ef'.repeat(32),
        realm: 'management',
        challenge: id,
        createdAt: T0,
        expiresAt: T0 + 60_000,
      });
    }
    const proofs = Array.from({ length: 100 }, (_, i) => `sweep-test-${i}`);
    for (const key of proofs) assert.equal(await n.b.useDpopProof({ key, expiresAt: T0 + 60_000, now: T0 }), true);
    // The next 64 writes of node a, at `later`: one of them sweeps.
    for (let i = 0; i < 64; i++) {
      const id = newId('challenge', clock, random);
      await n.a.createChallenge({
        id,
        publicKey: 'ef'.repeat(32),
        realm: 'management',
        challenge: id,
        createdAt: later,
        expiresAt: later + 60_000,
      });
      assert.equal(await n.a.useDpopProof({ key: `sweep-test-new-${i}`, expiresAt: later + 60_000, now: later }), true);
    }
    assert.equal(await count('challenges', 'id', stale), 0, 'the expired challenges are gone');
    assert.equal(await count('dpop_proofs', 'proof_key', proofs), 0, 'the expired DPoP records are gone');
    // A swept key is free again, and a live one is still refused.
    assert.equal(await n.b.useDpopProof({ key: 'sweep-test-0', expiresAt: later + 60_000, now: later }), true);
    assert.equal(await n.b.useDpopProof({ key: 'sweep-test-new-0', expiresAt: later + 60_000, now: later }), false);
  });

  test('of 50 concurrent enrolments of one key on both nodes exactly one enrolls', async () => {
    const key = randomBytes(32).toString('hex');
    const outcomes = await storm(n.nodes, (_, node) => node.enrollDevice(device(key), draft('device.enrolled')));
    assert.deepEqual(tally(outcomes), { enrolled: 1, already_enrolled: ATTEMPTS - 1 });
    assert.equal((await n.b.findDeviceByPublicKey(key))?.publicKey, key);
  });

  test('with grace 0, 50 concurrent presentations of one refresh token rotate exactly once and leave at most one live pair', async () => {
    const { session, first } = await sessionOn(n.a);
    const nexts = Array.from({ length: ATTEMPTS }, () => pair(T0));
    // Each node's clock moves on: attempt i happens at T0 + 1000 + i.
    const outcomes = await storm(n.nodes, (i, node) =>
      node.rotateRefreshToken(
        {
          sessionId: session.id,
          presentedDigest: first.refreshDigest,
          realm: 'management',
          now: T0 + 1000 + i,
          graceMs: 0,
          next: nexts[i] as TokenPairDigests,
          sealedSuccessor: `sealed-${i}`,
        },
        rotationAudit,
      ),
    );
    const kinds = tally(outcomes.map((o) => o.kind));
    assert.equal(kinds.rotated, 1);
    assert.ok((kinds.reused ?? 0) <= 1, 'a session is revoked for reuse at most once');
    const resolving = [];
    for (const p of [first, ...nexts]) {
      const s = await n.b.findSessionByAccessDigest(session.id, p.accessDigest);
      if (s !== null) resolving.push(s);
    }
    assert.equal(resolving.length, 1, 'exactly one access digest is the current one');
    const finalSession = resolving[0] as SessionRecord;
    assert.equal(finalSession.id, session.id);
    assert.equal(finalSession.generation, (kinds.rotated ?? 0) + (kinds.rotated_in_grace ?? 0));
    assert.equal(finalSession.revokedAt !== null, kinds.reused === 1);
    assert.equal(await n.a.findSessionByAccessDigest(session.id, first.accessDigest), null, 'the first pair is retired');
  });

  test("with grace 10 s, 50 concurrent presentations of one refresh token leave exactly one live pair, the winner's, answered to all", async () => {
    const { session, first } = await sessionOn(n.a);
    const nexts = Array.from({ length: ATTEMPTS }, () => pair(T0));
    const now = T0 + 1000;
    const outcomes = await storm(n.nodes, (i, node) =>
      node.rotateRefreshToken(
        {
          sessionId: session.id,
          presentedDigest: first.refreshDigest,
          realm: 'management',
          now,
          graceMs: 10_000,
          next: nexts[i] as TokenPairDigests,
          sealedSuccessor: `sealed-${i}`,
        },
        rotationAudit,
      ),
    );
    assert.deepEqual(tally(outcomes.map((o) => o.kind)), { rotated: 1, rotated_in_grace: ATTEMPTS - 1 });
    assert.equal(await n.a.findSessionByAccessDigest(session.id, first.accessDigest), null, 'the first pair is retired');
    const winner = outcomes.findIndex((o) => o.kind === 'rotated');
    const live: number[] = [];
    for (const [i, p] of nexts.entries()) {
      const s = await n.b.findSessionByAccessDigest(session.id, p.accessDigest);
      if (s !== null) live.push(i);
    }
    assert.deepEqual(live, [winner], "exactly one of the 50 new access digests resolves: the winner's");
    // Every other presentation is answered with the winner's pair, sealed for the presented token.
    for (const o of outcomes) if (o.kind === 'rotated_in_grace') assert.equal(o.sealedSuccessor, `sealed-${winner}`);
    assert.equal((await n.b.getSession(session.id))?.generation, 1, 'nothing but the one rotation was written');
    // The winner's refresh token rotates on; a loser's (never issued to anyone) is unknown and revokes nothing.
    const loser = winner === 0 ? 1 : 0;
    const forged = await n.a.rotateRefreshToken(
      {
        sessionId: session.id,
        presentedDigest: (nexts[loser] as TokenPairDigests).refreshDigest,
        realm: 'management',
        now: now + 1,
        graceMs: 10_000,
        next: pair(now),
        sealedSuccessor: 'sealed-x',
      },
      rotationAudit,
    );
    assert.equal(forged.kind, 'invalid');
  });

  test('of 50 concurrent presentations of a refresh token retired outside grace exactly one revokes the session', async () => {
    const { session, first } = await sessionOn(n.a);
    const rotated = await n.a.rotateRefreshToken(
      {
        sessionId: session.id,
        presentedDigest: first.refreshDigest,
        realm: 'management',
        now: T0 + 1000,
        graceMs: 10_000,
        next: pair(T0),
        sealedSuccessor: 'sealed',
      },
      rotationAudit,
    );
    assert.equal(rotated.kind, 'rotated');
    const outcomes = await storm(n.nodes, (_, node) =>
      node.rotateRefreshToken(
        {
          sessionId: session.id,
          presentedDigest: first.refreshDigest,
          realm: 'management',
          now: T0 + 60_000,
          graceMs: 10_000,
          next: pair(T0),
          sealedSuccessor: 'sealed',
        },
        rotationAudit,
      ),
    );
    assert.deepEqual(tally(outcomes.map((o) => o.kind)), { reused: 1, invalid: ATTEMPTS - 1 });
    const after = await n.b.getSession(session.id);
    assert.equal(after?.revokedReason, 'refresh_token_reused');
    const reuseEvents = (await n.a.listAuditEvents({ afterSeq: 0, limit: 1e9 })).filter(
      (e) => e.type === 'session.refresh_reused' && e.sessionId === session.id,
    );
    assert.equal(reuseEvents.length, 1);
  });

  /**
   * Holds the session's row on another connection, starts a presentation of `presented` on node
   * b (it reads the row without a lock, then waits on the held row with its change), runs
   * `change` in the holder's transaction and commits it; answers the presentation's outcome.
   */
  async function presentWhileHeld(
    session: SessionRecord,
    presented: string,
    next: TokenPairDigests,
    change: (holder: pg.PoolClient) => Promise<unknown>,
  ): Promise<RotationOutcome> {
    const holder = await env.admin.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${n.a.schema}.sessions WHERE id = $1 FOR UPDATE`, [session.id]);
      const rotation = n.b.rotateRefreshToken(
        {
          sessionId: session.id,
          presentedDigest: presented,
          realm: 'management',
          now: T0 + 1000,
          graceMs: 10_000,
          next,
          sealedSuccessor: 'sealed',
        },
        rotationAudit,
      );
      rotation.catch(() => undefined);
      const until = Date.now() + 10_000;
      for (;;) {
        const waiting = await env.admin.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE sessions SET%' AND query LIKE '%generation = $19%'`,
        );
        if (waiting.rows[0].n === 1) break;
        if (Date.now() > until) assert.fail('waited 10 s for the rotation to wait on the held session row with its change');
        await new Promise((r) => setTimeout(r, 20));
      }
      await change(holder);
      await holder.query('COMMIT');
      return await rotation;
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
  }

  test('a-refresh-racing-the-revocation-of-its-session: a rotation whose row is revoked after its read is refused and writes nothing', async () => {
    const { session, first } = await sessionOn(n.a);
    // The holder revokes the session, as a sign-out or a device's removal on another node does.
    const next = pair(T0);
    const outcome = await presentWhileHeld(session, first.refreshDigest, next, (holder) =>
      holder.query(`UPDATE ${n.a.schema}.sessions SET revoked_at = $2, revoked_reason = 'signed_out' WHERE id = $1`, [
        session.id,
        T0 + 500,
      ]),
    );
    assert.deepEqual(outcome, { kind: 'invalid' });
    assert.equal(await n.a.findSessionByAccessDigest(session.id, next.accessDigest), null, 'the new pair was never written');
    const after = await n.b.getSession(session.id);
    assert.equal(after?.generation, 0);
    assert.equal(after?.revokedReason, 'signed_out');
    const retired = await env.admin.query(`SELECT count(*)::int AS n FROM ${n.a.schema}.retired_refresh_tokens WHERE session_id = $1`, [
      session.id,
    ]);
    assert.equal(retired.rows[0].n, 0, 'nothing was retired');
    const events = await n.a.listAuditEvents({ afterSeq: 0, limit: 1e9 });
    assert.equal(events.filter((e) => e.sessionId === session.id && e.type.startsWith('session.rotated')).length, 0);
  });

  test('a rotation whose row changed after its read but is still current is decided again under the lock, and rotates on the row as it is', async () => {
    const { session, first } = await sessionOn(n.a);
    // No path of the service changes a session's end; an operator's edit in the database does,
    // and it sends the rotation to the locked transaction, which plans on the row as committed.
    const { next, second } = { next: pair(T0), second: pair(T0) };
    await n.a.rotateRefreshToken(
      {
        sessionId: session.id,
        presentedDigest: first.refreshDigest,
        realm: 'management',
        now: T0 + 500,
        graceMs: 10_000,
        next,
        sealedSuccessor: 'sealed-0',
      },
      rotationAudit,
    );
    const shortened = session.expiresAt - 3_600_000;
    const outcome = await presentWhileHeld(session, next.refreshDigest, second, (holder) =>
      holder.query(`UPDATE ${n.a.schema}.sessions SET expires_at = $2 WHERE id = $1`, [session.id, shortened]),
    );
    assert.equal(outcome.kind, 'rotated');
    assert.equal(outcome.kind === 'rotated' ? outcome.session.generation : null, 2);
    assert.equal(outcome.kind === 'rotated' ? outcome.session.expiresAt : null, shortened, 'planned on the row as committed');
    const live = await n.a.findSessionByAccessDigest(session.id, second.accessDigest);
    assert.equal(live?.generation, 2, 'the new pair is the live one');
    assert.equal(live?.revokedAt, null);
    assert.equal(await n.a.findSessionByAccessDigest(session.id, next.accessDigest), null, 'the pair before it is retired');
    const retired = await env.admin.query(`SELECT digest FROM ${n.a.schema}.retired_refresh_tokens WHERE session_id = $1`, [session.id]);
    assert.deepEqual(
      retired.rows.map((r) => r.digest),
      [first.refreshDigest],
      'the token before the previous one is retired',
    );
    const events = await n.a.listAuditEvents({ afterSeq: 0, limit: 1e9 });
    assert.deepEqual(
      events.filter((e) => e.sessionId === session.id && e.type === 'session.rotated').map((e) => e.data.generation),
      [1, 2],
    );
  });

  test('of 50 concurrent completions of one pairing intent exactly one enrolls a device', async () => {
    const id = newId('intent', clock, random);
    const codeDigest = randomBytes(32).toString('hex');
    const subject = newId('subject', clock, random);
    // Completion requires the intent's creator to be a user (active).
    const admin = defaultUser({ subject: newId('subject', clock, random), realm: 'management', now: T0 });
    assert.equal(await n.a.createUser(admin, draft('user.created')), 'created');
    await n.a.createPairingIntent(
      {
        id,
        realm: 'application',
        subject,
        name: null,
        codeDigest,
        createdAt: T0,
        expiresAt: T0 + 300_000,
        createdBy: admin.subject,
        failures: 0,
        completedAt: null,
        burnedAt: null,
        deviceId: null,
        preparedByNode: null,
      },
      draft('pairing.prepared'),
    );
    const outcomes = await storm(n.nodes, (_, node) =>
      node.completePairing(
        { id, codeDigest, now: T0 + 1, device: { ...device(), realm: 'application', subject } },
        draft('pairing.completed'),
      ),
    );
    assert.deepEqual(tally(outcomes.map((o) => o.kind)), { completed: 1, invalid: ATTEMPTS - 1 });
    const winner = outcomes.find((o) => o.kind === 'completed');
    assert.ok(winner?.kind === 'completed');
    assert.equal((await n.b.getPairingIntent(id))?.deviceId, winner.device.id);
  });

  test('50 concurrent wrong pairing codes on both nodes count 1..5 once each and burn the intent exactly once', async () => {
    const id = newId('intent', clock, random);
    await n.b.createPairingIntent(
      {
        id,
        realm: 'application',
        subject: newId('subject', clock, random),
        name: null,
        codeDigest: randomBytes(32).toString('hex'),
        createdAt: T0,
        expiresAt: T0 + 300_000,
        createdBy: 'sub_admin',
        failures: 0,
        completedAt: null,
        burnedAt: null,
        deviceId: null,
        preparedByNode: null,
      },
      draft('pairing.prepared'),
    );
    const counted = await storm(n.nodes, (_, node) =>
      node.recordPairingFailure({ id, now: T0 + 1, maxFailures: 5 }, (failures, burned) =>
        draft(burned ? 'pairing.burned' : 'pairing.failed', { failures }),
      ),
    );
    const hits = counted.filter((c) => c !== null);
    assert.deepEqual(hits.map((c) => c.failures).sort(), [1, 2, 3, 4, 5]);
    assert.deepEqual(
      hits.filter((c) => c.burned).map((c) => c.failures),
      [5],
    );
    assert.equal((await n.a.getPairingIntent(id))?.failures, 5);
  });

  test('the audit chain has no gap and no fork after a storm of writes from both nodes', async () => {
    const before = (await n.a.auditHead())?.seq ?? 0;
    const writes = await Promise.all(
      Array.from({ length: 4 * ATTEMPTS }, (_, i) => {
        const node = n.nodes[i % 2] as Store;
        switch (i % 4) {
          case 0:
            return node.appendAuditEvent(draft('signin.failed', { i, reason: 'storm' })).then(() => 1);
          case 1:
            return node.enrollDevice(device(), draft('device.enrolled', { i })).then(() => 1);
          case 2:
            return sessionOn(node).then(() => 2);
          default:
            return node.revokeSession({ sessionId: 'ses_unknown', now: T0, reason: 'logout' }, draft('session.revoked')).then(() => 0);
        }
      }),
    );
    const written = writes.reduce((a, b) => a + b, 0);
    const head = await n.b.auditHead();
    assert.equal(head?.seq, before + written);
    await assertChainVerifies(n.a, before + written);
    const seqs = (await n.b.listAuditEvents({ afterSeq: 0, limit: 1e9 })).map((e) => e.seq);
    assert.deepEqual(
      seqs,
      Array.from({ length: seqs.length }, (_, i) => i + 1),
    );
  });
});

describe('the audit trail is sealed in batches, off the write path (issue #14)', () => {
  let n: Awaited<ReturnType<typeof twoNodes>>;
  before(async () => {
    n = await twoNodes();
  });
  after(() => n.close());

  const pendingRows = async () => Number((await env.admin.query(`SELECT COUNT(*) AS n FROM ${n.a.schema}.audit_pending`)).rows[0]?.n ?? -1);

  test('a write committed on node A is chained and visible to a read on node B at once, counted in its stats', async () => {
    const before = (await n.b.stats(T0)).events['device.enrolled'] ?? 0;
    const d = device();
    const event = draft('device.enrolled', { node: 'a' });
    assert.equal(await n.a.enrollDevice(d, event), 'enrolled');
    // No wait for the timer: the read chains what is pending first.
    const seen = (await n.b.listAuditEvents({ afterSeq: 0, limit: 1e9 })).find((e) => e.id === event.id);
    assert.equal(seen?.type, 'device.enrolled');
    assert.equal((await n.b.stats(T0)).events['device.enrolled'], before + 1);
    assert.equal(await pendingRows(), 0);
    await assertChainVerifies(n.b);
  });

  test('two nodes sealing at once, both waiting on the head: the pending event is chained once and both reads see it', async () => {
    // The head is held, so both nodes' sealing passes wait on it; released, both must end well,
    // the event chained once.
    const holder = await env.admin.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${n.a.schema}.audit_head WHERE singleton FOR UPDATE`);
      const id = newId('event', clock, random);
      // Written as a write's transaction leaves it, without any node's own pass asked for.
      await env.admin.query(
        `INSERT INTO ${n.a.schema}.audit_pending (id, at, type, realm, subject, device_id, session_id, data)
         VALUES ($1, $2, 'device.enrolled', 'management', NULL, NULL, NULL, '{"raced":true}')`,
        [id, T0],
      );
      const reads = [n.a, n.b].map((node) => node.listAuditEvents({ afterSeq: 0, limit: 1e9 }));
      for (const r of reads) r.catch(() => undefined);
      const until = Date.now() + 10_000;
      for (;;) {
        const waiting = await env.admin.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%audit_head%'`,
        );
        if (waiting.rows[0].n === 2) break;
        if (Date.now() > until) assert.fail('waited 10 s for both nodes to wait on the held head');
        await new Promise((r) => setTimeout(r, 20));
      }
      await holder.query('COMMIT');
      for (const events of await Promise.all(reads)) assert.equal(events.filter((e) => e.id === id).length, 1);
      assert.equal(await pendingRows(), 0);
      await assertChainVerifies(n.b);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
  });

  test('reads on both nodes racing the writes of both nodes chain every event exactly once, in one unbroken chain', async () => {
    const before = (await n.a.auditHead())?.seq ?? 0;
    const ids: string[] = [];
    const work: Promise<unknown>[] = [];
    for (let i = 0; i < 4 * ATTEMPTS; i++) {
      const node = n.nodes[i % 2] as Store;
      const event = draft('device.enrolled', { i });
      ids.push(event.id);
      work.push(node.enrollDevice(device(), event));
      // Sealers on both nodes, started by reads, while the writes commit.
      if (i % 10 === 0) work.push((n.nodes[(i / 10) % 2] as Store).auditHead());
    }
    await Promise.all(work);
    const events = await n.a.listAuditEvents({ afterSeq: before, limit: 1e9 });
    assert.equal(events.length, ids.length);
    assert.deepEqual(new Set(events.map((e) => e.id)), new Set(ids));
    await assertChainVerifies(n.b, before + ids.length);
    assert.equal(await pendingRows(), 0);
  });

  test('a change whose event cannot be recorded rolls back with it: no device, no pending event, no chained one', async () => {
    const event = draft('device.enrolled', { n: 1 });
    assert.equal(await n.a.enrollDevice(device(), event), 'enrolled');
    const before = (await n.a.auditHead())?.seq ?? 0;
    // The same event id again: refused whether the first is still pending or already chained,
    // after the device row was inserted in the same transaction.
    const second = device();
    await assert.rejects(n.b.enrollDevice(second, { ...event, data: { n: 2 } }));
    assert.equal(await n.a.findDeviceByPublicKey(second.publicKey), null);
    assert.equal((await n.a.auditHead())?.seq, before);
    assert.equal(await pendingRows(), 0);
    await assertChainVerifies(n.a);
  });

  test('an event id already in the chain fails the write, and the chain and its sealing go on', async () => {
    const event = draft('signin.failed', { reason: 'first' });
    const chained = await n.a.appendAuditEvent(event);
    assert.equal(chained.id, event.id);
    await assert.rejects(n.b.appendAuditEvent({ ...event, data: { reason: 'again' } }), /already in the chain/);
    const next = await n.b.appendAuditEvent(draft('signin.failed', { reason: 'next' }));
    assert.equal(next.seq, chained.seq + 1);
    assert.equal(await pendingRows(), 0);
    await assertChainVerifies(n.a);
  });

  test('a sign-in or a rotation whose event id is already in the chain is refused whole: no session, no new pair, nothing retired', async () => {
    // Each is one statement with its event since migration 011: the refusal must still undo the change.
    const chained = await n.a.appendAuditEvent(draft('signin.failed', { reason: 'taken' }));
    const session = await newSession(n.a);
    await assert.rejects(
      n.b.createSession(session, pair(T0), { ...draft('session.created', {}, session.id), id: chained.id }),
      /already in the chain/,
    );
    assert.equal(await n.a.getSession(session.id), null);

    const { session: live, first } = await sessionOn(n.a);
    const presentation = (next: ReturnType<typeof pair>) => ({
      sessionId: live.id,
      presentedDigest: first.refreshDigest,
      realm: 'management' as const,
      now: T0 + 1000,
      graceMs: 10_000,
      next,
      sealedSuccessor: 'sealed',
    });
    const refused = pair(T0);
    await assert.rejects(
      n.b.rotateRefreshToken(presentation(refused), (o) => ({ ...rotationAudit(o), id: chained.id })),
      /already in the chain/,
    );
    assert.equal((await n.a.getSession(live.id))?.generation, 0);
    assert.equal(await n.a.findSessionByAccessDigest(live.id, refused.accessDigest), null);
    // The token was not used up: presented again with an event that can be recorded, it rotates.
    const rotated = await n.a.rotateRefreshToken(presentation(pair(T0)), rotationAudit);
    assert.equal(rotated.kind, 'rotated');
    assert.equal(rotated.kind === 'rotated' ? rotated.session.generation : -1, 1);
    // A read chains what is pending: nothing of the refused writes was left there.
    await assertChainVerifies(n.a);
    assert.equal(await pendingRows(), 0);
  });

  test('editing a chained event is still found by the verifier', async () => {
    const event = await n.a.appendAuditEvent(draft('signin.failed', { reason: 'original' }));
    await env.admin.query(`UPDATE ${n.a.schema}.audit_events SET data = '{"reason":"forged"}' WHERE id = $1`, [event.id]);
    const verdict = verifyAuditChain(await n.b.listAuditEvents({ afterSeq: 0, limit: 1e9 }));
    assert.equal(verdict.ok, false);
    assert.equal(verdict.ok ? 0 : verdict.seq, event.seq);
  });
});

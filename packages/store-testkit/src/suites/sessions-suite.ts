import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  auditDraft,
  authenticate,
  createChallenge,
  createSession,
  digestToken,
  newId,
  revokeOtherSessions,
  rotateRefreshToken,
} from '@svc/core';
import { type DeviceRecord, openSuccessor } from '@svc/core/store';
import {
  auditLength,
  authenticates,
  bootstrapAdmin,
  createStoreSession,
  deviceRecord,
  enrollDevice,
  enrolledEvent,
  eventTypes,
  mintPair,
  NO_ATTRIBUTES,
  newDeviceKey,
  rejectsWithCode,
  revokedEvent,
  rotateAtStore,
  seconds,
  signIn,
  withUser,
} from '../fixtures.js';
import type { SuiteContext } from '../harness.js';

const GRACE = seconds(10);

/** createSession, findSessionByAccessDigest, getSession, listActiveSessions, rotateRefreshToken. */
export function sessionsSuite(ctx: SuiteContext): void {
  describe('sessions and refresh', () => {
    test('a session is found by its current access digest, revoked or expired alike', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        const { session, pair } = await createStoreSession(deps, device, { lifetimeMs: 1000 });
        // The bearer check reads the session with its user's attributes (a default user: none set).
        assert.deepEqual(await store.findSessionByAccessDigest(session.id, pair.digests.accessDigest), withUser(session, NO_ATTRIBUTES));
        assert.deepEqual(await store.getSession(session.id), session);
        assert.equal(
          await store.findSessionByAccessDigest(session.id, pair.digests.refreshDigest),
          null,
          'a refresh digest is not an access digest',
        );
        assert.equal(await store.findSessionByAccessDigest(session.id, digestToken('svca_unknown')), null);
        assert.equal(await store.findSessionByAccessDigest('ses_01KAQ00000000000000000000Z', pair.digests.accessDigest), null);
        assert.equal(await store.getSession('ses_01KAQ00000000000000000000Z'), null);
        clock.advance(2000);
        assert.equal((await store.findSessionByAccessDigest(session.id, pair.digests.accessDigest))?.id, session.id);
      }));

    test('bearer checks asked at once are each answered for their own session and digest', () =>
      ctx.world(async ({ deps, store }) => {
        const { device } = await enrollDevice(deps, 'application');
        const made: Awaited<ReturnType<typeof createStoreSession>>[] = [];
        for (let i = 0; i < 5; i++) made.push(await createStoreSession(deps, device));
        const unknown = 'ses_01KAQ00000000000000000000Z';
        // One turn: every session twice with its own digest, once with another's, and an unknown id.
        const asked = made.flatMap(({ session, pair }, i) => {
          const other = made[(i + 1) % made.length]?.pair.digests.accessDigest ?? '';
          return [
            { expect: withUser(session, NO_ATTRIBUTES), check: store.findSessionByAccessDigest(session.id, pair.digests.accessDigest) },
            { expect: null, check: store.findSessionByAccessDigest(session.id, other) },
            { expect: withUser(session, NO_ATTRIBUTES), check: store.findSessionByAccessDigest(session.id, pair.digests.accessDigest) },
          ];
        });
        asked.push({ expect: null, check: store.findSessionByAccessDigest(unknown, made[0]?.pair.digests.accessDigest ?? '') });
        const answers = await Promise.all(asked.map((a) => a.check));
        for (const [i, answer] of answers.entries()) assert.deepEqual(answer, asked[i]?.expect, `check ${i}`);
      }));

    test('listActiveSessions lists live sessions newest first, filtered by realm and device', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const app = await enrollDevice(deps, 'application');
        const admin = await enrollDevice(deps, 'management');
        const a = await createStoreSession(deps, app.device);
        clock.advance(1000);
        const b = await createStoreSession(deps, admin.device);
        clock.advance(1000);
        const c = await createStoreSession(deps, app.device);
        clock.advance(1000);
        const revoked = await createStoreSession(deps, app.device);
        await store.revokeSession(
          { sessionId: revoked.session.id, now: clock.now(), reason: 'logout' },
          revokedEvent(deps, revoked.session.id),
        );
        clock.advance(1000);
        const ending = await createStoreSession(deps, app.device, { lifetimeMs: 5000 });
        clock.advance(1000);
        const refreshEnding = await createStoreSession(deps, app.device, { refreshTtlMs: 5000 });
        const now = clock.now();
        const ids = async (filter: Parameters<typeof store.listActiveSessions>[0]) =>
          (await store.listActiveSessions(filter)).map((s) => s.id);
        assert.deepEqual(
          await ids({ now }),
          [refreshEnding, ending, c, b, a].map((s) => s.session.id),
        );
        assert.deepEqual(await ids({ now, realm: 'management' }), [b.session.id]);
        assert.deepEqual(
          await ids({ now, deviceId: app.device.id }),
          [refreshEnding, ending, c, a].map((s) => s.session.id),
        );
        assert.deepEqual(await ids({ now, realm: 'management', deviceId: app.device.id }), []);
        assert.deepEqual(
          await ids({ now: now + 5000 }),
          [c, b, a].map((s) => s.session.id),
          'ended and refresh-expired sessions are not active',
        );
      }));

    test('rotation retires the old access token immediately', () =>
      ctx.world(async ({ deps, store }) => {
        const admin = await bootstrapAdmin(deps);
        const first = await signIn(deps, admin.key, 'management');
        const second = await rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' });
        assert.equal(second.session_id, first.session_id);
        assert.notEqual(second.access_token, first.access_token);
        assert.equal(await authenticates(deps, first.access_token, 'management'), false);
        assert.ok(await authenticates(deps, second.access_token, 'management'));
        assert.equal(await store.findSessionByAccessDigest(first.session_id, digestToken(first.access_token)), null);
        const session = await store.getSession(first.session_id);
        assert.equal(session?.generation, 1);
        assert.equal(session?.lastRotatedAt, deps.clock.now());
        assert.deepEqual((await eventTypes(store)).slice(-1), ['session.rotated']);
      }));

    test('the immediately previous refresh token within grace is answered with the same live pair, and nothing dies', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const first = await signIn(deps, admin.key, 'management');
        const between = await rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' });
        clock.advance(GRACE);
        const retry = await rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' });
        assert.equal(retry.session_id, first.session_id);
        assert.equal(retry.access_token, between.access_token);
        assert.equal(retry.refresh_token, between.refresh_token);
        assert.ok(await authenticates(deps, between.access_token, 'management'));
        assert.equal(await authenticates(deps, first.access_token, 'management'), false);
        assert.equal((await store.getSession(first.session_id))?.generation, 1);
        assert.deepEqual((await eventTypes(store)).slice(-2), ['session.rotated', 'session.rotated_in_grace']);
        // The one live pair rotates on as usual.
        const next = await rotateRefreshToken(deps, { refreshToken: between.refresh_token, realm: 'management' });
        assert.ok(await authenticates(deps, next.access_token, 'management'));
      }));

    test('the store answers the previous token rotated_in_grace up to exactly the grace interval, reused 1 ms later', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        const { session, pair } = await createStoreSession(deps, device);
        const rotated = await rotateAtStore(deps, { refresh: pair.refresh, realm: 'application', graceMs: GRACE });
        assert.equal(rotated.outcome.kind, 'rotated');
        const rotatedAt = clock.now();
        clock.advance(GRACE);
        const inGrace = await rotateAtStore(deps, { refresh: pair.refresh, realm: 'application', graceMs: GRACE });
        assert.equal(inGrace.outcome.kind, 'rotated_in_grace');
        assert.equal(inGrace.auditCalls, 1);
        if (inGrace.outcome.kind !== 'rotated_in_grace') return;
        // Nothing changed: the pair of the rotation is still the live one, sealed for the presented token.
        assert.equal(inGrace.outcome.session.generation, 1);
        assert.equal(inGrace.outcome.session.lastRotatedAt, rotatedAt);
        assert.deepEqual(openSuccessor(pair.refresh, session.id, inGrace.outcome.sealedSuccessor), {
          access: rotated.next.access,
          refresh: rotated.next.refresh,
        });
        assert.equal((await store.findSessionByAccessDigest(session.id, rotated.next.digests.accessDigest))?.id, session.id);
        assert.equal(await store.findSessionByAccessDigest(session.id, inGrace.next.digests.accessDigest), null);
        clock.advance(1);
        const late = await rotateAtStore(deps, { refresh: pair.refresh, realm: 'application', graceMs: GRACE });
        assert.equal(late.outcome.kind, 'reused');
        if (late.outcome.kind !== 'reused') return;
        assert.equal(late.outcome.session.revokedAt, clock.now());
        assert.equal(late.outcome.session.revokedReason, 'refresh_token_reused');
      }));

    test('two tabs refreshing one token at once both stay signed in with the one live pair, and each next step works', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const first = await signIn(deps, admin.key, 'management');
        const [tabA, tabB] = await Promise.all([
          rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' }),
          rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' }),
        ]);
        assert.ok(tabA !== undefined && tabB !== undefined);
        assert.equal(tabA.refresh_token, tabB.refresh_token, 'never two live pairs: both tabs hold the same one');
        assert.equal(tabA.access_token, tabB.access_token);
        assert.ok(await authenticates(deps, tabA.access_token, 'management'));
        // Next step of each tab, one after the other, both inside the grace interval: both answered, session alive.
        clock.advance(1000);
        const nextA = await rotateRefreshToken(deps, { refreshToken: tabA.refresh_token, realm: 'management' });
        clock.advance(1000);
        const nextB = await rotateRefreshToken(deps, { refreshToken: tabB.refresh_token, realm: 'management' });
        assert.equal(nextB.refresh_token, nextA.refresh_token);
        assert.ok(await authenticates(deps, nextA.access_token, 'management'));
        assert.equal((await store.getSession(first.session_id))?.revokedAt, null);
        // A replay of the first token outside grace is still reuse and revokes the session.
        clock.advance(GRACE + 1);
        await rejectsWithCode(rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' }), 'refresh_token_reused');
        assert.equal(await authenticates(deps, nextA.access_token, 'management'), false);
      }));

    test('after the clock is stepped back 1 h, the previous refresh token presented 12 s after its rotation is reuse, not grace', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const first = await signIn(deps, admin.key, 'management');
        const next = await rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' });
        clock.set(clock.now() - 3_600_000 + 12_000);
        await rejectsWithCode(rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' }), 'refresh_token_reused');
        assert.equal(await authenticates(deps, next.access_token, 'management'), false);
        assert.equal((await store.getSession(first.session_id))?.revokedReason, 'refresh_token_reused');
      }));

    test('after the clock is stepped forward 1 h, the previous refresh token presented 2 s after its rotation is reuse', () =>
      ctx.world(async ({ deps, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const first = await signIn(deps, admin.key, 'management');
        await rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' });
        clock.advance(3_600_000 + 2_000);
        await rejectsWithCode(rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' }), 'refresh_token_reused');
      }));

    test('pruning retired refresh tokens keeps every one that can still reveal a reuse', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        // A live session rotated three times: its first token is retired for good.
        const live = await createStoreSession(deps, device);
        let refresh = live.pair.refresh;
        const retiredTokens: string[] = [];
        for (let i = 0; i < 3; i++) {
          retiredTokens.push(refresh);
          const r = await rotateAtStore(deps, { refresh, realm: 'application', graceMs: GRACE });
          assert.equal(r.outcome.kind, 'rotated');
          refresh = r.next.refresh;
          clock.advance(1000);
        }
        // A revoked session with a retired token of its own.
        const dead = await createStoreSession(deps, device);
        const deadNext = await rotateAtStore(deps, { refresh: dead.pair.refresh, realm: 'application', graceMs: GRACE });
        await rotateAtStore(deps, { refresh: deadNext.next.refresh, realm: 'application', graceMs: GRACE });
        await store.revokeSession({ sessionId: dead.session.id, now: clock.now(), reason: 'logout' }, revokedEvent(deps, dead.session.id));

        const pruned = await store.pruneRetiredRefreshTokens({ now: clock.now(), retiredBefore: 0, graceEndedBefore: 0 });
        assert.equal(pruned, 1, "only the revoked session's retired token goes");
        // The live session's oldest token is still known: presenting it is still reuse.
        const reuse = await rotateAtStore(deps, { refresh: retiredTokens[0] as string, realm: 'application', graceMs: GRACE });
        assert.equal(reuse.outcome.kind, 'reused');
      }));

    test('pruning drops retired refresh tokens older than the given cut-off', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        const { pair } = await createStoreSession(deps, device);
        const first = await rotateAtStore(deps, { refresh: pair.refresh, realm: 'application', graceMs: GRACE });
        clock.advance(1000);
        const second = await rotateAtStore(deps, { refresh: first.next.refresh, realm: 'application', graceMs: GRACE });
        clock.advance(1000);
        await rotateAtStore(deps, { refresh: second.next.refresh, realm: 'application', graceMs: GRACE });
        // Two digests are retired for good (the first at t+1s, the second at t+2s).
        assert.equal(await store.pruneRetiredRefreshTokens({ now: clock.now(), retiredBefore: clock.now() - 500, graceEndedBefore: 0 }), 1);
        assert.equal(await store.pruneRetiredRefreshTokens({ now: clock.now(), retiredBefore: clock.now() + 1, graceEndedBefore: 0 }), 1);
        assert.equal(await store.pruneRetiredRefreshTokens({ now: clock.now(), retiredBefore: clock.now() + 1, graceEndedBefore: 0 }), 0);
      }));

    test('a database copy and a retired refresh token do not open the live pair once grace is over', () =>
      ctx.world(async ({ deps, store, clock, storedGracePairs }) => {
        const { device } = await enrollDevice(deps, 'application');
        const { session, pair } = await createStoreSession(deps, device);
        const rotated = await rotateAtStore(deps, { refresh: pair.refresh, realm: 'application', graceMs: GRACE });
        assert.equal(rotated.outcome.kind, 'rotated');
        const live = { access: rotated.next.access, refresh: rotated.next.refresh };
        // Within grace the sealed pair is kept (the previous token must be answered with it), and
        // a sweep at the end of grace keeps it too.
        clock.advance(GRACE);
        await store.pruneRetiredRefreshTokens({ now: clock.now(), retiredBefore: 0, graceEndedBefore: clock.now() - GRACE });
        const during = await storedGracePairs();
        assert.deepEqual(
          openSuccessor(pair.refresh, session.id, during.get(session.id) ?? ''),
          live,
          'the grace pair is kept during grace',
        );
        const replay = await rotateAtStore(deps, { refresh: pair.refresh, realm: 'application', graceMs: GRACE });
        assert.equal(replay.outcome.kind, 'rotated_in_grace');
        // Grace is over: the sweep erases it. A dump plus the retired token (which, presented,
        // would be detected as a reuse and revoke the session) must not yield the live pair.
        clock.advance(1);
        await store.pruneRetiredRefreshTokens({ now: clock.now(), retiredBefore: 0, graceEndedBefore: clock.now() - GRACE });
        const after = await storedGracePairs();
        assert.equal(after.has(session.id), false, 'no sealed pair is kept for the session after grace');
        for (const [id, sealed] of after) assert.equal(openSuccessor(pair.refresh, id, sealed), null);
        assert.equal((await store.getSession(session.id))?.revokedAt, null, 'the sweep revokes nothing');
        assert.equal((await store.findSessionByAccessDigest(session.id, rotated.next.digests.accessDigest))?.id, session.id);
      }));

    test('a revoked session keeps no sealed grace pair: revoked by logout, by a detected reuse, or by removing its device', () =>
      ctx.world(async ({ deps, store, clock, storedGracePairs }) => {
        const { device } = await enrollDevice(deps, 'application');
        const { device: doomed } = await enrollDevice(deps, 'application');
        const rotatedOnce = async (d: DeviceRecord) => {
          const created = await createStoreSession(deps, d);
          const r = await rotateAtStore(deps, { refresh: created.pair.refresh, realm: 'application', graceMs: GRACE });
          assert.equal(r.outcome.kind, 'rotated');
          return { id: created.session.id, first: created.pair.refresh, next: r.next };
        };
        const loggedOut = await rotatedOnce(device);
        const reused = await rotatedOnce(device);
        const removed = await rotatedOnce(doomed);
        const untouched = await rotatedOnce(device);
        const before = await storedGracePairs();
        for (const s of [loggedOut, reused, removed, untouched]) assert.ok(before.has(s.id), 'each rotated session has its grace pair');

        await store.revokeSession({ sessionId: loggedOut.id, now: clock.now(), reason: 'logout' }, revokedEvent(deps, loggedOut.id));
        // An older retired token of `reused`: detected as reuse even within grace, which revokes it.
        const second = await rotateAtStore(deps, { refresh: reused.next.refresh, realm: 'application', graceMs: GRACE });
        assert.equal(second.outcome.kind, 'rotated');
        const reuse = await rotateAtStore(deps, { refresh: reused.first, realm: 'application', graceMs: GRACE });
        assert.equal(reuse.outcome.kind, 'reused');
        const gone = await store.removeDevice(
          { deviceId: doomed.id, now: clock.now() },
          auditDraft(deps, 'device.removed', { realm: doomed.realm, deviceId: doomed.id }),
        );
        assert.equal(gone.revokedSessions, 1);

        const after = await storedGracePairs();
        for (const s of [loggedOut, reused, removed]) assert.equal(after.has(s.id), false, `no sealed pair on revoked session ${s.id}`);
        assert.ok(after.has(untouched.id), 'a live session within grace keeps its pair');
      }));

    test('with a grace interval of 0 the previous refresh token is reuse even within the same millisecond', () =>
      ctx.world(async ({ deps }) => {
        const { device } = await enrollDevice(deps, 'application');
        const { pair } = await createStoreSession(deps, device);
        const rotated = await rotateAtStore(deps, { refresh: pair.refresh, realm: 'application', graceMs: 0 });
        assert.equal(rotated.outcome.kind, 'rotated');
        const again = await rotateAtStore(deps, { refresh: pair.refresh, realm: 'application', graceMs: 0 });
        assert.equal(again.outcome.kind, 'reused');
      }));

    test('a session is never created for a removed device, even when the sign-in looked the device up before the removal', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        const removed = await store.removeDevice(
          { deviceId: device.id, now: clock.now() },
          auditDraft(deps, 'device.removed', { realm: device.realm, deviceId: device.id }),
        );
        assert.equal(removed.removed, true);
        const before = await auditLength(store);
        await assert.rejects(createStoreSession(deps, device), /refused a session .*: device_inactive/);
        assert.equal(await auditLength(store), before, 'nothing is written for a refused session');
        assert.deepEqual(await store.listActiveSessions({ now: clock.now(), deviceId: device.id }), []);
      }));

    test('a refresh token reused after the grace interval revokes the session and its current access token at once', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const first = await signIn(deps, admin.key, 'management');
        const second = await rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' });
        clock.advance(GRACE + 1);
        await rejectsWithCode(rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' }), 'refresh_token_reused');
        assert.equal(await authenticates(deps, second.access_token, 'management'), false);
        await rejectsWithCode(
          rotateRefreshToken(deps, { refreshToken: second.refresh_token, realm: 'management' }),
          'invalid_refresh_token',
        );
        const session = await store.getSession(first.session_id);
        assert.equal(session?.revokedReason, 'refresh_token_reused');
        const reused = (await store.listAuditEvents({ afterSeq: 0, limit: 100 })).filter((e) => e.type === 'session.refresh_reused');
        assert.equal(reused.length, 1);
        assert.equal(reused[0]?.sessionId, first.session_id);
      }));

    test('an older retired refresh token is reuse even within the grace interval', () =>
      ctx.world(async ({ deps, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const first = await signIn(deps, admin.key, 'management');
        const second = await rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' });
        clock.advance(1);
        const third = await rotateRefreshToken(deps, { refreshToken: second.refresh_token, realm: 'management' });
        await rejectsWithCode(rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' }), 'refresh_token_reused');
        assert.equal(await authenticates(deps, third.access_token, 'management'), false);
      }));

    test('a refresh token of a revoked session is invalid and changes nothing', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        const { session, pair } = await createStoreSession(deps, device);
        await store.revokeSession({ sessionId: session.id, now: clock.now(), reason: 'logout' }, revokedEvent(deps, session.id));
        const before = await auditLength(store);
        const current = await rotateAtStore(deps, { refresh: pair.refresh, realm: 'application', graceMs: GRACE });
        assert.deepEqual(current.outcome, { kind: 'invalid' });
        assert.equal(current.auditCalls, 0);
        assert.equal(await auditLength(store), before);
        assert.equal((await store.getSession(session.id))?.generation, 0);
      }));

    test('an unknown refresh token is invalid and writes nothing', () =>
      ctx.world(async ({ deps, store }) => {
        const before = await auditLength(store);
        const unknown = mintPair(deps, newId('session', deps.clock, deps.random));
        const result = await rotateAtStore(deps, { refresh: unknown.refresh, realm: 'management', graceMs: GRACE });
        assert.deepEqual(result.outcome, { kind: 'invalid' });
        assert.equal(result.auditCalls, 0);
        assert.equal(await auditLength(store), before);
        await rejectsWithCode(rotateRefreshToken(deps, { refreshToken: unknown.refresh, realm: 'management' }), 'invalid_refresh_token');
      }));

    test('a forged refresh token naming a real session is invalid and revokes nothing', () =>
      ctx.world(async ({ deps, store }) => {
        // Session ids are no secret (every token pair and audit event shows them): knowing one
        // must not let anyone revoke that session by posing as a reused token.
        const admin = await bootstrapAdmin(deps);
        const pair = await signIn(deps, admin.key, 'management');
        const rotated = await rotateRefreshToken(deps, { refreshToken: pair.refresh_token, realm: 'management' });
        const before = await auditLength(store);
        const forged = mintPair(deps, pair.session_id);
        const result = await rotateAtStore(deps, { refresh: forged.refresh, realm: 'management', graceMs: GRACE });
        assert.deepEqual(result.outcome, { kind: 'invalid' });
        assert.equal(result.auditCalls, 0);
        await rejectsWithCode(rotateRefreshToken(deps, { refreshToken: forged.refresh, realm: 'management' }), 'invalid_refresh_token');
        assert.equal(await auditLength(store), before);
        assert.equal((await store.getSession(pair.session_id))?.revokedAt, null);
        assert.ok(await authenticates(deps, rotated.access_token, 'management'));
        assert.equal(await authenticates(deps, forged.access, 'management'), false, 'a forged access token naming the session is refused');
      }));

    test('a token of one session with the selector of another is refused', () =>
      ctx.world(async ({ deps, store }) => {
        const admin = await bootstrapAdmin(deps);
        const a = await signIn(deps, admin.key, 'management');
        const b = await signIn(deps, admin.key, 'management');
        // Splice b's session id into a's tokens: the digest no longer matches either session.
        const selector = (id: string) => id.slice('ses_'.length);
        const spliced = (token: string) => token.replace(selector(a.session_id), selector(b.session_id));
        assert.equal(await authenticates(deps, spliced(a.access_token), 'management'), false);
        await rejectsWithCode(
          rotateRefreshToken(deps, { refreshToken: spliced(a.refresh_token), realm: 'management' }),
          'invalid_refresh_token',
        );
        assert.equal((await store.getSession(b.session_id))?.revokedAt, null);
        assert.ok(await authenticates(deps, a.access_token, 'management'));
        assert.ok(await authenticates(deps, b.access_token, 'management'));
      }));

    test('a refresh token is valid until 1 ms before its expiry and invalid from then on', () =>
      ctx.world(
        async ({ deps, clock }) => {
          const admin = await bootstrapAdmin(deps);
          const kept = await signIn(deps, admin.key, 'management');
          const lapsed = await signIn(deps, admin.key, 'management');
          clock.advance(seconds(3600) - 1);
          await rotateRefreshToken(deps, { refreshToken: kept.refresh_token, realm: 'management' });
          clock.advance(1);
          await rejectsWithCode(
            rotateRefreshToken(deps, { refreshToken: lapsed.refresh_token, realm: 'management' }),
            'invalid_refresh_token',
          );
        },
        { refreshTokenTtlSeconds: 3600, accessTokenTtlSeconds: 600 },
      ));

    test('an access token authenticates until 1 ms before its expiry and never after', () =>
      ctx.world(async ({ deps, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const pair = await signIn(deps, admin.key, 'management');
        clock.advance(seconds(deps.settings.accessTokenTtlSeconds) - 1);
        assert.ok(await authenticates(deps, pair.access_token, 'management'));
        clock.advance(1);
        assert.equal(await authenticates(deps, pair.access_token, 'management'), false);
        // The refresh token still works: a short access lifetime is what refresh is for.
        const next = await rotateRefreshToken(deps, { refreshToken: pair.refresh_token, realm: 'management' });
        assert.ok(await authenticates(deps, next.access_token, 'management'));
      }));

    test('no rotation extends the absolute lifetime of a session', () =>
      ctx.world(
        async ({ deps, store, clock }) => {
          const admin = await bootstrapAdmin(deps);
          let pair = await signIn(deps, admin.key, 'management');
          const start = clock.now();
          const end = start + seconds(3600);
          assert.equal((await store.getSession(pair.session_id))?.expiresAt, end);
          for (let i = 0; i < 3; i++) {
            clock.advance(seconds(1000));
            pair = await rotateRefreshToken(deps, { refreshToken: pair.refresh_token, realm: 'management' });
            const session = await store.getSession(pair.session_id);
            assert.equal(session?.expiresAt, end);
            assert.ok((session?.accessExpiresAt ?? Number.POSITIVE_INFINITY) <= end);
            assert.ok((session?.refreshExpiresAt ?? Number.POSITIVE_INFINITY) <= end);
            assert.ok(pair.refresh_expires_in <= (end - clock.now()) / 1000);
          }
          // At 3000 s the last pair was clamped: the refresh token dies with the session at 3600 s.
          assert.equal((await store.getSession(pair.session_id))?.refreshExpiresAt, end);
          clock.set(end - 1);
          assert.ok(await authenticates(deps, pair.access_token, 'management'));
          clock.set(end);
          assert.equal(await authenticates(deps, pair.access_token, 'management'), false);
          await rejectsWithCode(
            rotateRefreshToken(deps, { refreshToken: pair.refresh_token, realm: 'management' }),
            'invalid_refresh_token',
          );
        },
        { sessionMaxLifetimeSeconds: 3600, refreshTokenTtlSeconds: 1800, accessTokenTtlSeconds: 900 },
      ));

    test('the store clamps a rotated pair to the end of the session', () =>
      ctx.world(async ({ deps, store }) => {
        const { device } = await enrollDevice(deps, 'application');
        const { session, pair } = await createStoreSession(deps, device, {
          lifetimeMs: seconds(60),
          accessTtlMs: seconds(30),
          refreshTtlMs: seconds(60),
        });
        const next = mintPair(deps, session.id, { accessTtlMs: seconds(900), refreshTtlMs: seconds(86_400) });
        const { outcome } = await rotateAtStore(deps, { refresh: pair.refresh, realm: 'application', graceMs: GRACE, next });
        assert.equal(outcome.kind, 'rotated');
        const after = await store.getSession(session.id);
        assert.equal(after?.accessExpiresAt, session.expiresAt);
        assert.equal(after?.refreshExpiresAt, session.expiresAt);
      }));

    test('an application session is refused by management authentication, and a management one by application', () =>
      ctx.world(async ({ deps }) => {
        const admin = await bootstrapAdmin(deps);
        const app = await enrollDevice(deps, 'application');
        const appPair = await signIn(deps, app.key, 'application');
        const adminPair = await signIn(deps, admin.key, 'management');
        assert.equal(appPair.realm, 'application');
        assert.ok(await authenticates(deps, appPair.access_token, 'application'));
        assert.equal(await authenticates(deps, appPair.access_token, 'management'), false);
        assert.ok(await authenticates(deps, adminPair.access_token, 'management'));
        assert.equal(await authenticates(deps, adminPair.access_token, 'application'), false);
      }));

    test('a refresh token presented to the other realm is invalid_refresh_token and changes nothing', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const app = await enrollDevice(deps, 'application');
        const pair = await signIn(deps, app.key, 'application');
        const before = await auditLength(store);
        await rejectsWithCode(rotateRefreshToken(deps, { refreshToken: pair.refresh_token, realm: 'management' }), 'invalid_refresh_token');
        // Also a retired one: another realm never learns that a token was reused.
        const next = await rotateRefreshToken(deps, { refreshToken: pair.refresh_token, realm: 'application' });
        clock.advance(GRACE + 1);
        const afterRotation = await auditLength(store);
        assert.equal(afterRotation, before + 1);
        const wrongRealm = await rotateAtStore(deps, { refresh: pair.refresh_token, realm: 'management', graceMs: GRACE });
        assert.deepEqual(wrongRealm.outcome, { kind: 'invalid' });
        assert.equal(wrongRealm.auditCalls, 0);
        const session = await store.getSession(pair.session_id);
        assert.equal(session?.generation, 1);
        assert.equal(session?.revokedAt, null);
        assert.equal(await auditLength(store), afterRotation);
        assert.ok(await authenticates(deps, next.access_token, 'application'));
      }));

    test('a session records the client it was created from, and a subject lists and revokes its own sessions only', () =>
      ctx.world(async ({ deps, store, clock }) => {
        // One user (subject) with two devices, and another user.
        const laptop = newDeviceKey();
        const phone = newDeviceKey();
        const first = deviceRecord(deps, 'application', laptop);
        const second: DeviceRecord = { ...deviceRecord(deps, 'application', phone), subject: first.subject };
        for (const d of [first, second]) assert.equal(await store.enrollDevice(d, enrolledEvent(deps, d)), 'enrolled');
        const stranger = await enrollDevice(deps, 'application');
        const signInFrom = async (key: typeof laptop, client: { address?: string; userAgent?: string }) => {
          const challenge = await createChallenge(deps, { publicKey: key.publicKey, realm: 'application' });
          return createSession(deps, { challengeId: challenge.id, signature: key.sign(challenge.challenge), realm: 'application', client });
        };
        const onLaptop = await signInFrom(laptop, { address: '203.0.113.7', userAgent: 'Firefox\u202e\u0007/1' });
        clock.advance(1000);
        const onPhone = await signInFrom(phone, { address: 'not an address', userAgent: 'x'.repeat(1000) });
        clock.advance(1000);
        const theirs = await signInFrom(stranger.key, {});

        const laptopSession = await store.getSession(onLaptop.session_id);
        assert.equal(laptopSession?.clientAddress, '203.0.113.7');
        assert.equal(laptopSession?.userAgent, 'Firefox  /1', 'control and bidi characters are not kept');
        const phoneSession = await store.getSession(onPhone.session_id);
        assert.equal(phoneSession?.clientAddress, null, 'what is not an IP address is not kept');
        assert.equal(phoneSession?.userAgent?.length, 256);
        assert.equal((await store.getSession(theirs.session_id))?.userAgent, null);

        const now = clock.now();
        const mine = { now, realm: 'application' as const, subject: first.subject };
        assert.deepEqual(
          (await store.listActiveSessions(mine)).map((s) => s.id),
          [onPhone.session_id, onLaptop.session_id],
        );
        assert.deepEqual(
          (await store.listDevices({ realm: 'application', subject: first.subject })).map((d) => d.id),
          [first.id, second.id].sort(),
          'enrolled in the same millisecond: in id order',
        );
        assert.deepEqual(await store.listDevices({ realm: 'management', subject: first.subject }), []);

        const principal = await authenticate(deps, { token: onLaptop.access_token, realm: 'application' });
        assert.deepEqual(await revokeOtherSessions(deps, { principal }), { revoked: [onPhone.session_id] });
        assert.equal((await store.getSession(onPhone.session_id))?.revokedReason, 'revoked_by_owner');
        assert.ok(await authenticates(deps, onLaptop.access_token, 'application'), 'the session that asked stays signed in');
        assert.ok(await authenticates(deps, theirs.access_token, 'application'), "another subject's session is untouched");
        assert.equal(await authenticates(deps, onPhone.access_token, 'application'), false);
        assert.deepEqual(await revokeOtherSessions(deps, { principal }), { revoked: [] }, 'nothing left to revoke, nothing written');
        assert.equal((await eventTypes(store)).filter((t) => t === 'session.revoked').length, 1);
      }));
  });
}

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditDraft, createChallenge, createSession, newId } from '@svc/core';
import type { ChallengeRecord } from '@svc/core/store';
import {
  auditLength,
  authenticate,
  bootstrapAdmin,
  enrollDevice,
  eventTypes,
  newDeviceKey,
  newStoreSession,
  rejectsWithCode,
  seconds,
  signIn,
} from '../fixtures.js';
import type { SuiteContext } from '../harness.js';

/** createChallenge, readChallenge, consumeChallenge, and sign-in (createSession) through the use cases and the store. */
export function signInSuite(ctx: SuiteContext): void {
  describe('challenges and sign-in', () => {
    test('a signed challenge yields a session whose access token authenticates in its realm', () =>
      ctx.world(async ({ deps, store }) => {
        const admin = await bootstrapAdmin(deps);
        const pair = await signIn(deps, admin.key, 'management');
        assert.equal(pair.realm, 'management');
        assert.equal(pair.token_type, 'Bearer');
        const principal = await authenticate(deps, pair.access_token, 'management');
        assert.equal(principal.subject, admin.device.subject);
        assert.equal(principal.device, admin.device.id);
        assert.equal(principal.session, pair.session_id);
        const session = await store.getSession(pair.session_id);
        assert.equal(session?.deviceId, admin.device.id);
        assert.equal(session?.generation, 0);
        assert.deepEqual(await eventTypes(store), ['bootstrap.issued', 'device.enrolled', 'session.created']);
      }));

    test('a challenge is single use', () =>
      ctx.world(async ({ deps }) => {
        const admin = await bootstrapAdmin(deps);
        const challenge = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
        const signature = admin.key.sign(challenge.challenge);
        await createSession(deps, { challengeId: challenge.id, signature, realm: 'management' });
        await rejectsWithCode(createSession(deps, { challengeId: challenge.id, signature, realm: 'management' }), 'invalid_challenge');
      }));

    test('a challenge is valid until 1 ms before its expiry and refused from its expiry on', () =>
      ctx.world(async ({ deps, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const ttl = seconds(deps.settings.challengeTtlSeconds);
        const early = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
        const late = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
        assert.equal(late.expiresAt, clock.now() + ttl);
        clock.advance(ttl - 1);
        await createSession(deps, { challengeId: early.id, signature: admin.key.sign(early.challenge), realm: 'management' });
        clock.advance(1);
        await rejectsWithCode(
          createSession(deps, { challengeId: late.id, signature: admin.key.sign(late.challenge), realm: 'management' }),
          'invalid_challenge',
        );
      }));

    test('after the clock is stepped back 1 h, a challenge issued before the step is refused instead of living 1 h longer', () =>
      ctx.world(async ({ deps, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const stale = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
        const skewed = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
        clock.set(clock.now() - 3_600_000 + 1000);
        await rejectsWithCode(
          createSession(deps, { challengeId: stale.id, signature: admin.key.sign(stale.challenge), realm: 'management' }),
          'invalid_challenge',
        );
        // Within the tolerated skew between nodes (1 s), a challenge dated ahead is still good.
        clock.set(skewed.createdAt - 1000);
        await createSession(deps, { challengeId: skewed.id, signature: admin.key.sign(skewed.challenge), realm: 'management' });
      }));

    test('a challenge issued for one realm cannot sign in to the other', () =>
      ctx.world(async ({ deps }) => {
        const admin = await bootstrapAdmin(deps);
        const challenge = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'application' });
        await rejectsWithCode(
          createSession(deps, { challengeId: challenge.id, signature: admin.key.sign(challenge.challenge), realm: 'management' }),
          'invalid_challenge',
        );
      }));

    test('an unknown key gets a challenge but fails with invalid_signature', () =>
      ctx.world(async ({ deps }) => {
        await bootstrapAdmin(deps);
        const stranger = newDeviceKey();
        const challenge = await createChallenge(deps, { publicKey: stranger.publicKey, realm: 'management' });
        assert.match(challenge.challenge, /^svc-auth-v1 challenge /);
        await rejectsWithCode(
          createSession(deps, { challengeId: challenge.id, signature: stranger.sign(challenge.challenge), realm: 'management' }),
          'invalid_signature',
        );
      }));

    test('a wrong signature is invalid_signature and uses the challenge up', () =>
      ctx.world(async ({ deps }) => {
        const admin = await bootstrapAdmin(deps);
        const challenge = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
        await rejectsWithCode(
          createSession(deps, { challengeId: challenge.id, signature: newDeviceKey().sign(challenge.challenge), realm: 'management' }),
          'invalid_signature',
        );
        await rejectsWithCode(
          createSession(deps, { challengeId: challenge.id, signature: admin.key.sign(challenge.challenge), realm: 'management' }),
          'invalid_challenge',
        );
      }));

    test('every refusal before the session uses the challenge up: a second attempt with it is invalid_challenge', () =>
      ctx.world(async ({ deps }) => {
        const admin = await bootstrapAdmin(deps);
        const app = await enrollDevice(deps, 'application');
        const stranger = newDeviceKey();
        const cases = [
          // For another realm, an unknown key, a key of another realm.
          { key: admin.key, issuedFor: 'application', first: 'invalid_challenge', again: 'application' },
          { key: stranger, issuedFor: 'management', first: 'invalid_signature', again: 'management' },
          { key: app.key, issuedFor: 'management', first: 'invalid_signature', again: 'management' },
        ] as const;
        for (const c of cases) {
          const challenge = await createChallenge(deps, { publicKey: c.key.publicKey, realm: c.issuedFor });
          const attempt = (realm: 'management' | 'application') =>
            createSession(deps, { challengeId: challenge.id, signature: c.key.sign(challenge.challenge), realm });
          await rejectsWithCode(attempt('management'), c.first);
          // Not used up, the same challenge would be refused for its key again (invalid_signature).
          await rejectsWithCode(attempt(c.again), 'invalid_challenge');
        }
      }));

    test('a sign-in whose session transaction fails in the store still uses its challenge up', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const challenge = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
        // The session's transaction fails (an outage, a lock held too long) and rolls back.
        const failing = new Proxy(store, {
          get(target, name) {
            if (name === 'createSession') return async () => Promise.reject(new Error('the store failed'));
            const value = Reflect.get(target, name);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        });
        const signature = admin.key.sign(challenge.challenge);
        await assert.rejects(
          createSession({ ...deps, store: failing }, { challengeId: challenge.id, signature, realm: 'management' }),
          /the store failed/,
        );
        assert.equal(await store.readChallenge({ id: challenge.id, now: clock.now() }), null, 'the challenge is still usable');
      }));

    test('a key enrolled in the application realm cannot sign in to management', () =>
      ctx.world(async ({ deps }) => {
        const app = await enrollDevice(deps, 'application');
        await rejectsWithCode(signIn(deps, app.key, 'management'), 'invalid_signature');
        const pair = await signIn(deps, app.key, 'application');
        assert.equal(pair.realm, 'application');
      }));

    test('failed sign-ins are audited as signin.failed with their reason', () =>
      ctx.world(async ({ deps, store }) => {
        const admin = await bootstrapAdmin(deps);
        const app = await enrollDevice(deps, 'application');
        await rejectsWithCode(
          createSession(deps, { challengeId: 'chl_01KAQ00000000000000000000Z', signature: 'ab'.repeat(64), realm: 'management' }),
          'invalid_challenge',
        );
        const c = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
        await rejectsWithCode(
          createSession(deps, { challengeId: c.id, signature: app.key.sign(c.challenge), realm: 'management' }),
          'invalid_signature',
        );
        await rejectsWithCode(signIn(deps, newDeviceKey(), 'management'), 'invalid_signature');
        await rejectsWithCode(signIn(deps, app.key, 'management'), 'invalid_signature');
        const failed = (await store.listAuditEvents({ afterSeq: 0, limit: 100 })).filter((e) => e.type === 'signin.failed');
        assert.deepEqual(
          failed.map((e) => [e.realm, e.data.reason]),
          [
            ['management', 'challenge_unknown_expired_or_used'],
            ['management', 'bad_signature'],
            ['management', 'key_not_enrolled'],
            ['management', 'key_in_other_realm'],
          ],
        );
      }));

    test('the store hands a challenge out once, unchanged, and never after its expiry', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const make = (): ChallengeRecord => ({
          id: newId('challenge', clock, deps.random),
          publicKey: newDeviceKey().publicKey,
          realm: 'application',
          challenge: `svc-auth-v1 challenge test ${clock.now()}`,
          createdAt: clock.now(),
          expiresAt: clock.now() + seconds(60),
        });
        const a = make();
        const b = make();
        await store.createChallenge(a);
        await store.createChallenge(b);
        assert.equal(await auditLength(store), 0, 'issuing a challenge is not an audited change');
        // Neither key is enrolled: each challenge comes without a device.
        assert.deepEqual(await store.consumeChallenge({ id: a.id, now: clock.now() }), { ...a, device: null });
        assert.equal(await store.consumeChallenge({ id: a.id, now: clock.now() }), null);
        assert.equal(await store.consumeChallenge({ id: 'chl_01KAQ00000000000000000000Z', now: clock.now() }), null);
        assert.equal(await store.consumeChallenge({ id: b.id, now: b.expiresAt }), null);
        assert.deepEqual(await store.consumeChallenge({ id: b.id, now: b.expiresAt - 1 }), { ...b, device: null });
      }));

    test('a used challenge comes with the active device of its key: of its own realm or not, never a removed one', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const app = await enrollDevice(deps, 'application');
        const gone = await enrollDevice(deps, 'application');
        const issue = (publicKey: string, realm: 'management' | 'application') => createChallenge(deps, { publicKey, realm });
        const own = await issue(admin.key.publicKey, 'management');
        const otherRealm = await issue(app.key.publicKey, 'management');
        const removed = await issue(gone.key.publicKey, 'application');
        const removal = await store.removeDevice(
          { deviceId: gone.device.id, now: clock.now() },
          auditDraft(deps, 'device.removed', { realm: 'application', deviceId: gone.device.id }),
        );
        assert.equal(removal.removed, true);
        assert.deepEqual(await store.consumeChallenge({ id: own.id, now: clock.now() }), { ...own, device: admin.device });
        assert.deepEqual(await store.consumeChallenge({ id: otherRealm.id, now: clock.now() }), { ...otherRealm, device: app.device });
        assert.deepEqual(await store.consumeChallenge({ id: removed.id, now: clock.now() }), { ...removed, device: null });
        // Used up: the device no longer makes a used challenge usable.
        assert.equal(await store.consumeChallenge({ id: own.id, now: clock.now() }), null);
      }));

    test('a read challenge is not used up: it reads as using it would find it, until a use or a session takes it', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const challenge = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
        const stored = await store.readChallenge({ id: challenge.id, now: clock.now() });
        assert.ok(stored !== null);
        assert.deepEqual(await store.readChallenge({ id: challenge.id, now: clock.now() }), stored, 'a second read finds the same');
        assert.deepEqual(stored.device, admin.device);
        assert.equal(stored.challenge, challenge.challenge);
        // The rules of a use: refused from its expiry on, and dated in the future (a clock stepped back).
        assert.equal(await store.readChallenge({ id: challenge.id, now: stored.expiresAt }), null);
        assert.equal(await store.readChallenge({ id: challenge.id, now: stored.createdAt - seconds(3_600) }), null);
        assert.equal(await store.readChallenge({ id: 'chl_01KAQ00000000000000000000Z', now: clock.now() }), null);
        // Reading used nothing up: the use finds what the reads found, once.
        assert.deepEqual(await store.consumeChallenge({ id: challenge.id, now: clock.now() }), stored);
        assert.equal(await store.readChallenge({ id: challenge.id, now: clock.now() }), null);
      }));

    test('a session created with its challenge uses it up in the same transaction; a second one with it writes nothing', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const challenge = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
        const use = { id: challenge.id, now: clock.now() };
        const first = newStoreSession(deps, admin.device);
        assert.equal(await store.createSession(first.session, first.digests, first.event, use), 'created');
        assert.equal(await store.readChallenge(use), null, 'the session used the challenge up');
        assert.equal(await store.consumeChallenge(use), null);
        const events = await auditLength(store);
        const second = newStoreSession(deps, admin.device);
        assert.equal(await store.createSession(second.session, second.digests, second.event, use), 'challenge_used');
        assert.equal(await store.getSession(second.session.id), null, 'no session for a used challenge');
        assert.equal(await auditLength(store), events, 'no event for a session not created');
        assert.equal((await store.getSession(first.session.id))?.id, first.session.id);
      }));

    test('an expired, future-dated or unknown challenge creates no session; a refused session still uses its challenge up', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const admin = await bootstrapAdmin(deps);
        const gone = await enrollDevice(deps, 'application');
        const expired = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
        const attempts = [
          { id: expired.id, now: (await store.readChallenge({ id: expired.id, now: clock.now() }))?.expiresAt ?? 0 },
          { id: expired.id, now: clock.now() - seconds(3_600) },
          { id: 'chl_01KAQ00000000000000000000Z', now: clock.now() },
        ];
        for (const use of attempts) {
          const s = newStoreSession(deps, admin.device);
          assert.equal(await store.createSession(s.session, s.digests, s.event, use), 'challenge_used', `at ${use.now}`);
          assert.equal(await store.getSession(s.session.id), null);
        }
        // None of those used it up: it is still there at its own time.
        assert.notEqual(await store.readChallenge({ id: expired.id, now: clock.now() }), null);
        // A session refused for its device (removed meanwhile) uses its challenge up all the same.
        const challenge = await createChallenge(deps, { publicKey: gone.key.publicKey, realm: 'application' });
        const removal = await store.removeDevice(
          { deviceId: gone.device.id, now: clock.now() },
          auditDraft(deps, 'device.removed', { realm: 'application', deviceId: gone.device.id }),
        );
        assert.equal(removal.removed, true);
        const refused = newStoreSession(deps, gone.device);
        const use = { id: challenge.id, now: clock.now() };
        assert.equal(await store.createSession(refused.session, refused.digests, refused.event, use), 'device_inactive');
        assert.equal(await store.getSession(refused.session.id), null);
        assert.equal(await store.readChallenge(use), null, 'the refused sign-in used its challenge up');
      }));
  });
}

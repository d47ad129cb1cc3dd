import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { revokeSession, rotateRefreshToken } from '@svc/core';
import {
  auditLength,
  authenticate,
  authenticates,
  bootstrapAdmin,
  createStoreSession,
  enrollDevice,
  rejectsWithCode,
  revokedEvent,
  signIn,
} from '../fixtures.js';
import type { SuiteContext } from '../harness.js';

/** revokeSession, through the use case and at the store, in one connection and across peers. */
export function revocationSuite(ctx: SuiteContext): void {
  const needsPeer = ctx.hasPeers ? {} : { skip: 'the store cannot open a peer connection' };

  describe('revocation and logout', () => {
    test('logout revokes the own session immediately: access and refresh tokens are refused', () =>
      ctx.world(async ({ deps, store }) => {
        const admin = await bootstrapAdmin(deps);
        const pair = await signIn(deps, admin.key, 'management');
        const principal = await authenticate(deps, pair.access_token, 'management');
        assert.deepEqual(await revokeSession(deps, { principal }), { session_id: pair.session_id, revoked: true });
        assert.equal(await authenticates(deps, pair.access_token, 'management'), false);
        await rejectsWithCode(rotateRefreshToken(deps, { refreshToken: pair.refresh_token, realm: 'management' }), 'invalid_refresh_token');
        const session = await store.getSession(pair.session_id);
        assert.equal(session?.revokedReason, 'logout');
        assert.equal(session?.revokedAt, deps.clock.now());
        const revoked = (await store.listAuditEvents({ afterSeq: 0, limit: 100 })).filter((e) => e.type === 'session.revoked');
        assert.deepEqual(
          revoked.map((e) => [e.sessionId, e.data.reason]),
          [[pair.session_id, 'logout']],
        );
      }));

    test('an admin revokes another session immediately', () =>
      ctx.world(async ({ deps, store }) => {
        const admin = await bootstrapAdmin(deps);
        const app = await enrollDevice(deps, 'application');
        const adminPair = await signIn(deps, admin.key, 'management');
        const appPair = await signIn(deps, app.key, 'application');
        const principal = await authenticate(deps, adminPair.access_token, 'management');
        await revokeSession(deps, { principal, sessionId: appPair.session_id });
        assert.equal(await authenticates(deps, appPair.access_token, 'application'), false);
        assert.ok(await authenticates(deps, adminPair.access_token, 'management'));
        assert.equal((await store.getSession(appPair.session_id))?.revokedReason, 'revoked_by_admin');
      }));

    test('revoking a revoked session succeeds again without a second event', () =>
      ctx.world(async ({ deps, store }) => {
        const admin = await bootstrapAdmin(deps);
        const adminPair = await signIn(deps, admin.key, 'management');
        const other = await signIn(deps, admin.key, 'management');
        const principal = await authenticate(deps, adminPair.access_token, 'management');
        await revokeSession(deps, { principal, sessionId: other.session_id });
        const before = await auditLength(store);
        assert.deepEqual(await revokeSession(deps, { principal, sessionId: other.session_id }), {
          session_id: other.session_id,
          revoked: true,
        });
        assert.equal(await auditLength(store), before);
      }));

    test('an application principal cannot revoke another session', () =>
      ctx.world(async ({ deps }) => {
        const app = await enrollDevice(deps, 'application');
        const mine = await signIn(deps, app.key, 'application');
        const theirs = await signIn(deps, app.key, 'application');
        const principal = await authenticate(deps, mine.access_token, 'application');
        await rejectsWithCode(revokeSession(deps, { principal, sessionId: theirs.session_id }), 'not_found');
        assert.ok(await authenticates(deps, theirs.access_token, 'application'));
      }));

    test('the store revokes once: unknown or already revoked sessions return false and write nothing', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        const { session } = await createStoreSession(deps, device);
        const before = await auditLength(store);
        assert.equal(
          await store.revokeSession({ sessionId: session.id, now: clock.now(), reason: 'logout' }, revokedEvent(deps, session.id)),
          true,
        );
        clock.advance(1000);
        assert.equal(
          await store.revokeSession(
            { sessionId: session.id, now: clock.now(), reason: 'revoked_by_admin' },
            revokedEvent(deps, session.id),
          ),
          false,
        );
        assert.equal(
          await store.revokeSession(
            { sessionId: 'ses_01KAQ00000000000000000000Z', now: clock.now(), reason: 'logout' },
            revokedEvent(deps, 'x'),
          ),
          false,
        );
        const after = await store.getSession(session.id);
        assert.equal(after?.revokedAt, clock.now() - 1000);
        assert.equal(after?.revokedReason, 'logout');
        assert.equal(await auditLength(store), before + 1);
      }));

    test('a revocation through one connection is refused at once through another', needsPeer, () =>
      ctx.world(async ({ deps, peer, depsFor }) => {
        const other = await peer();
        assert.ok(other !== null);
        const peerDeps = depsFor(other);
        const admin = await bootstrapAdmin(deps);
        const pair = await signIn(deps, admin.key, 'management');
        assert.ok(await authenticates(peerDeps, pair.access_token, 'management'));
        await revokeSession(peerDeps, { principal: await authenticate(peerDeps, pair.access_token, 'management') });
        assert.equal(await authenticates(deps, pair.access_token, 'management'), false);
        // And the other way round.
        const second = await signIn(peerDeps, admin.key, 'management');
        await revokeSession(deps, { principal: await authenticate(deps, second.access_token, 'management') });
        assert.equal(await authenticates(peerDeps, second.access_token, 'management'), false);
      }),
    );

    test('a rotation through one connection retires the old access token at once for another', needsPeer, () =>
      ctx.world(async ({ deps, peer, depsFor }) => {
        const other = await peer();
        assert.ok(other !== null);
        const peerDeps = depsFor(other);
        const admin = await bootstrapAdmin(deps);
        const pair = await signIn(deps, admin.key, 'management');
        const next = await rotateRefreshToken(peerDeps, { refreshToken: pair.refresh_token, realm: 'management' });
        assert.equal(await authenticates(deps, pair.access_token, 'management'), false);
        assert.ok(await authenticates(deps, next.access_token, 'management'));
      }),
    );
  });
}

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditDraft, GENESIS_HASH } from '@svc/core';
import { allEvents, createStoreSession, enrollDevice, revokedEvent } from '../fixtures.js';
import type { SuiteContext } from '../harness.js';

/** stats. */
export function statsSuite(ctx: SuiteContext): void {
  describe('stats', () => {
    test('an empty store counts nothing and its audit head is the genesis hash', () =>
      ctx.world(async ({ store, clock }) => {
        assert.deepEqual(await store.stats(clock.now()), {
          devices: { management: 0, application: 0 },
          activeSessions: { management: 0, application: 0 },
          events: {},
          auditLength: 0,
          auditHead: GENESIS_HASH,
        });
      }));

    test('stats count active devices and live sessions per realm, and events per type', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const m1 = await enrollDevice(deps, 'management');
        await enrollDevice(deps, 'management');
        const a1 = await enrollDevice(deps, 'application');
        const a2 = await enrollDevice(deps, 'application');
        const a3 = await enrollDevice(deps, 'application');
        await store.removeDevice(
          { deviceId: a3.device.id, now: clock.now() },
          auditDraft(deps, 'device.removed', { deviceId: a3.device.id }),
        );
        await createStoreSession(deps, m1.device);
        await createStoreSession(deps, a1.device);
        await createStoreSession(deps, a2.device);
        await createStoreSession(deps, a2.device, { lifetimeMs: 1000 });
        const revoked = await createStoreSession(deps, a1.device);
        await store.revokeSession(
          { sessionId: revoked.session.id, now: clock.now(), reason: 'logout' },
          revokedEvent(deps, revoked.session.id),
        );
        await store.appendAuditEvent(auditDraft(deps, 'signin.failed', {}));
        const stats = await store.stats(clock.now() + 1000);
        const events = await allEvents(store);
        assert.deepEqual(stats, {
          devices: { management: 2, application: 2 },
          activeSessions: { management: 1, application: 2 },
          events: { 'device.enrolled': 5, 'device.removed': 1, 'session.created': 5, 'session.revoked': 1, 'signin.failed': 1 },
          auditLength: events.length,
          auditHead: events.at(-1)?.hash,
        });
        assert.equal(stats.auditLength, 13);
      }));

    test('event counts stay right per type across appends (kept counts, not a count over the trail)', () =>
      ctx.world(async ({ deps, store, clock }) => {
        for (let i = 0; i < 3; i++) await store.appendAuditEvent(auditDraft(deps, 'signin.failed', {}));
        assert.deepEqual((await store.stats(clock.now())).events, { 'signin.failed': 3 });
        await enrollDevice(deps, 'application');
        assert.deepEqual((await store.stats(clock.now())).events, { 'signin.failed': 3, 'device.enrolled': 1 });
      }));
  });

  describe('retention', () => {
    test('a backlog larger than one retention batch is deleted whole by one call', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        const ended = 1203;
        for (let i = 0; i < ended; i += 20) {
          await Promise.all(Array.from({ length: Math.min(20, ended - i) }, () => createStoreSession(deps, device, { lifetimeMs: 1000 })));
        }
        const live = await createStoreSession(deps, device);
        assert.deepEqual(await store.pruneEndedRecords({ endedBefore: clock.now() + 1000 }), { sessions: ended, pairingIntents: 0 });
        assert.deepEqual(
          (await store.listActiveSessions({ now: clock.now() })).map((s) => s.id),
          [live.session.id],
        );
        assert.deepEqual(await store.pruneEndedRecords({ endedBefore: clock.now() + 1000 }), { sessions: 0, pairingIntents: 0 });
      }));

    test('ended sessions and expired pairing intents are deleted once past the retention; live ones and the audit trail stay', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        const live = await createStoreSession(deps, device);
        const expiring = await createStoreSession(deps, device, { lifetimeMs: 1000 });
        const revoked = await createStoreSession(deps, device);
        await store.revokeSession(
          { sessionId: revoked.session.id, now: clock.now(), reason: 'logout' },
          revokedEvent(deps, revoked.session.id),
        );
        const intent = (id: string, expiresAt: number) => ({
          id,
          realm: 'application' as const,
          subject: 'sub_retention',
          name: null,
          codeDigest: 'cd'.repeat(32),
          createdAt: clock.now(),
          expiresAt,
          createdBy: device.id,
          failures: 0,
          completedAt: null,
          burnedAt: null,
          deviceId: null,
          preparedByNode: null,
        });
        await store.createPairingIntent(
          intent('int_01KAQ0000000000000000RETA1', clock.now() + 1000),
          auditDraft(deps, 'pairing.prepared', {}),
        );
        await store.createPairingIntent(
          intent('int_01KAQ0000000000000000RETA2', clock.now() + 900_000),
          auditDraft(deps, 'pairing.prepared', {}),
        );
        const trail = await allEvents(store);

        // Nothing has ended long enough ago yet.
        assert.deepEqual(await store.pruneEndedRecords({ endedBefore: clock.now() - 1 }), { sessions: 0, pairingIntents: 0 });
        // Past the revocation and the short session's and first intent's ends.
        assert.deepEqual(await store.pruneEndedRecords({ endedBefore: clock.now() + 1000 }), { sessions: 2, pairingIntents: 1 });
        assert.equal(await store.getSession(expiring.session.id), null);
        assert.equal(await store.getSession(revoked.session.id), null);
        assert.notEqual(await store.getSession(live.session.id), null);
        assert.equal(await store.getPairingIntent('int_01KAQ0000000000000000RETA1'), null);
        assert.notEqual(await store.getPairingIntent('int_01KAQ0000000000000000RETA2'), null);
        assert.deepEqual(await allEvents(store), trail, 'the audit trail keeps what they did');
        // A token of a deleted session is unknown.
        assert.equal(await store.findSessionByAccessDigest(revoked.session.id, revoked.pair.digests.accessDigest), null);
      }));
  });
}

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
  });
}

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditDraft, removeDevice, rotateRefreshToken } from '@svc/core';
import {
  auditLength,
  authenticate,
  authenticates,
  bootstrapAdmin,
  createStoreSession,
  deviceRecord,
  enrollDevice,
  enrolledEvent,
  eventTypes,
  newDeviceKey,
  rejectsWithCode,
  signIn,
} from '../fixtures.js';
import type { SuiteContext } from '../harness.js';

/** enrollDevice, findDeviceByPublicKey, getDevice, listDevices, countDevices, removeDevice. */
export function devicesSuite(ctx: SuiteContext): void {
  describe('devices', () => {
    test('an enrolled device is found by its key and its id, exactly as enrolled', () =>
      ctx.world(async ({ deps, store }) => {
        const { device } = await enrollDevice(deps, 'application');
        assert.deepEqual(await store.findDeviceByPublicKey(device.publicKey), device);
        assert.deepEqual(await store.getDevice(device.id), device);
        assert.equal(await store.getDevice('dev_01KAQ00000000000000000000Z'), null);
        assert.equal(await store.findDeviceByPublicKey(newDeviceKey().publicKey), null);
        assert.deepEqual(await eventTypes(store), ['device.enrolled']);
      }));

    test('a key already enrolled on an active device is already_enrolled, and writes nothing', () =>
      ctx.world(async ({ deps, store }) => {
        const { key } = await enrollDevice(deps, 'management');
        const before = await auditLength(store);
        const again = deviceRecord(deps, 'application', key);
        assert.equal(await store.enrollDevice(again, enrolledEvent(deps, again)), 'already_enrolled');
        assert.equal(await store.getDevice(again.id), null);
        assert.equal(await auditLength(store), before);
      }));

    test('listDevices lists active devices oldest first, by realm; countDevices counts them', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const a = await enrollDevice(deps, 'management');
        clock.advance(1000);
        const b = await enrollDevice(deps, 'application');
        clock.advance(1000);
        const c = await enrollDevice(deps, 'management');
        clock.advance(1000);
        const d = await enrollDevice(deps, 'application');
        assert.deepEqual(
          (await store.listDevices({})).map((x) => x.id),
          [a, b, c, d].map((x) => x.device.id),
        );
        assert.deepEqual(
          (await store.listDevices({ realm: 'management' })).map((x) => x.id),
          [a.device.id, c.device.id],
        );
        assert.deepEqual(
          (await store.listDevices({ realm: 'application' })).map((x) => x.id),
          [b.device.id, d.device.id],
        );
        assert.equal(await store.countDevices('management'), 2);
        assert.equal(await store.countDevices('application'), 2);
        await store.removeDevice(
          { deviceId: b.device.id, now: clock.now() },
          auditDraft(deps, 'device.removed', { deviceId: b.device.id }),
        );
        assert.deepEqual(
          (await store.listDevices({ realm: 'application' })).map((x) => x.id),
          [d.device.id],
        );
        assert.equal(await store.countDevices('application'), 1);
      }));

    test('removeDevice marks the device removed, revokes its live sessions, and is audited once', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        const other = await enrollDevice(deps, 'application');
        const s1 = await createStoreSession(deps, device);
        const s2 = await createStoreSession(deps, device);
        const ended = await createStoreSession(deps, device, { lifetimeMs: 1000 });
        const untouched = await createStoreSession(deps, other.device);
        clock.advance(2000);
        const draft = () => auditDraft(deps, 'device.removed', { realm: 'application', deviceId: device.id });
        const before = await auditLength(store);
        assert.deepEqual(await store.removeDevice({ deviceId: device.id, now: clock.now() }, draft()), {
          removed: true,
          revokedSessions: 2,
        });
        assert.equal((await store.getDevice(device.id))?.removedAt, clock.now());
        assert.equal(await store.findDeviceByPublicKey(device.publicKey), null);
        for (const s of [s1, s2]) {
          const after = await store.getSession(s.session.id);
          assert.equal(after?.revokedAt, clock.now());
          assert.equal(after?.revokedReason, 'device_removed');
        }
        assert.equal((await store.getSession(ended.session.id))?.revokedAt, null, 'an ended session is left as it was');
        assert.equal((await store.getSession(untouched.session.id))?.revokedAt, null);
        assert.equal(await auditLength(store), before + 1);
        assert.deepEqual(await store.removeDevice({ deviceId: device.id, now: clock.now() }, draft()), {
          removed: false,
          revokedSessions: 0,
        });
        assert.deepEqual(await store.removeDevice({ deviceId: 'dev_01KAQ00000000000000000000Z', now: clock.now() }, draft()), {
          removed: false,
          revokedSessions: 0,
        });
        assert.equal(await auditLength(store), before + 1, 'a removal that changed nothing writes no event');
      }));

    test('a key can be enrolled again after its device was removed', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device, key } = await enrollDevice(deps, 'application');
        await store.removeDevice({ deviceId: device.id, now: clock.now() }, auditDraft(deps, 'device.removed', { deviceId: device.id }));
        const again = await enrollDevice(deps, 'application', key);
        assert.deepEqual(await store.findDeviceByPublicKey(key.publicKey), again.device);
        assert.notEqual((await store.getDevice(device.id))?.removedAt, null);
      }));

    test('removing a device through the use case revokes its sessions at once', () =>
      ctx.world(async ({ deps, store }) => {
        const admin = await bootstrapAdmin(deps);
        const second = await bootstrapAdmin(deps);
        const adminPair = await signIn(deps, admin.key, 'management');
        const doomed = await signIn(deps, second.key, 'management');
        const principal = await authenticate(deps, adminPair.access_token, 'management');
        const result = await removeDevice(deps, { principal, deviceId: second.device.id });
        assert.deepEqual(result, { device_id: second.device.id, removed: true, revoked_sessions: 1 });
        assert.equal(await authenticates(deps, doomed.access_token, 'management'), false);
        await rejectsWithCode(
          rotateRefreshToken(deps, { refreshToken: doomed.refresh_token, realm: 'management' }),
          'invalid_refresh_token',
        );
        await rejectsWithCode(signIn(deps, second.key, 'management'), 'invalid_signature');
        assert.ok(await authenticates(deps, adminPair.access_token, 'management'));
        assert.equal((await eventTypes(store)).filter((t) => t === 'device.removed').length, 1);
      }));

    test('the last management device cannot be removed', () =>
      ctx.world(async ({ deps, store }) => {
        const admin = await bootstrapAdmin(deps);
        const principal = await authenticate(deps, (await signIn(deps, admin.key, 'management')).access_token, 'management');
        await rejectsWithCode(removeDevice(deps, { principal, deviceId: admin.device.id }), 'invalid_request');
        await rejectsWithCode(removeDevice(deps, { principal, deviceId: 'dev_01KAQ00000000000000000000Z' }), 'not_found');
        assert.equal(await store.countDevices('management'), 1);
        assert.equal((await eventTypes(store)).includes('device.removed'), false);
      }));
  });
}

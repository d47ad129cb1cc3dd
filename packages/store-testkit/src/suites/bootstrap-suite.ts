import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditDraft, digestToken, enrollWithBootstrapToken, issueBootstrapToken, mintToken, newId } from '@svc/core';
import { auditLength, deviceRecord, enrollDevice, eventTypes, minutes, newDeviceKey, rejectsWithCode } from '../fixtures.js';
import type { SuiteContext } from '../harness.js';

/** issueBootstrapToken and consumeBootstrapToken, through the use cases and at the store. */
export function bootstrapSuite(ctx: SuiteContext): void {
  describe('bootstrap token', () => {
    test('a bootstrap token enrolls the first management device, once', () =>
      ctx.world(async ({ deps, store }) => {
        const { token } = await issueBootstrapToken(deps, { recovery: false });
        const key = newDeviceKey();
        const device = await enrollWithBootstrapToken(deps, { bootstrapToken: token, publicKey: key.publicKey, name: 'laptop' });
        assert.equal(device.realm, 'management');
        assert.equal(device.publicKey, key.publicKey);
        assert.equal(device.name, 'laptop');
        assert.deepEqual(await store.findDeviceByPublicKey(key.publicKey), device);
        await rejectsWithCode(
          enrollWithBootstrapToken(deps, { bootstrapToken: token, publicKey: newDeviceKey().publicKey }),
          'bootstrap_token_used',
        );
        assert.equal(await store.countDevices('management'), 1);
        assert.deepEqual(await eventTypes(store), ['bootstrap.issued', 'device.enrolled']);
      }));

    test('a bootstrap token is still valid 1 ms before 15 minutes', () =>
      ctx.world(async ({ deps, clock }) => {
        const { token, expiresAt } = await issueBootstrapToken(deps, { recovery: false });
        assert.equal(expiresAt, clock.now() + minutes(15));
        clock.advance(minutes(15) - 1);
        await enrollWithBootstrapToken(deps, { bootstrapToken: token, publicKey: newDeviceKey().publicKey });
      }));

    test('a bootstrap token is refused at exactly 15 minutes and after, and enrolls nothing', () =>
      ctx.world(async ({ deps, clock, store }) => {
        const exact = await issueBootstrapToken(deps, { recovery: false });
        clock.advance(minutes(15));
        await rejectsWithCode(
          enrollWithBootstrapToken(deps, { bootstrapToken: exact.token, publicKey: newDeviceKey().publicKey }),
          'bootstrap_token_expired',
        );
        const later = await issueBootstrapToken(deps, { recovery: false });
        clock.advance(minutes(60));
        await rejectsWithCode(
          enrollWithBootstrapToken(deps, { bootstrapToken: later.token, publicKey: newDeviceKey().publicKey }),
          'bootstrap_token_expired',
        );
        assert.equal(await store.countDevices('management'), 0);
        assert.deepEqual(await eventTypes(store), ['bootstrap.issued', 'bootstrap.issued']);
      }));

    test('an unknown bootstrap token is refused as invalid_bootstrap_token', () =>
      ctx.world(async ({ deps, store }) => {
        await issueBootstrapToken(deps, { recovery: false });
        await rejectsWithCode(
          enrollWithBootstrapToken(deps, { bootstrapToken: mintToken('bootstrap', deps.random), publicKey: newDeviceKey().publicKey }),
          'invalid_bootstrap_token',
        );
        await rejectsWithCode(
          enrollWithBootstrapToken(deps, { bootstrapToken: 'svcb_not-a-token', publicKey: newDeviceKey().publicKey }),
          'invalid_bootstrap_token',
        );
        assert.equal(await store.countDevices('management'), 0);
      }));

    test('a newer bootstrap token supersedes the older one', () =>
      ctx.world(async ({ deps, clock }) => {
        const older = await issueBootstrapToken(deps, { recovery: false });
        clock.advance(1000);
        const newer = await issueBootstrapToken(deps, { recovery: false });
        await rejectsWithCode(
          enrollWithBootstrapToken(deps, { bootstrapToken: older.token, publicKey: newDeviceKey().publicKey }),
          'invalid_bootstrap_token',
        );
        await enrollWithBootstrapToken(deps, { bootstrapToken: newer.token, publicKey: newDeviceKey().publicKey });
      }));

    test('already_enrolled leaves the bootstrap token unused', () =>
      ctx.world(async ({ deps, store }) => {
        const taken = await enrollDevice(deps, 'application');
        const { token } = await issueBootstrapToken(deps, { recovery: false });
        const before = await auditLength(store);
        await rejectsWithCode(
          enrollWithBootstrapToken(deps, { bootstrapToken: token, publicKey: taken.key.publicKey }),
          'already_enrolled',
        );
        assert.equal(await auditLength(store), before, 'a refused enrollment writes no event');
        await enrollWithBootstrapToken(deps, { bootstrapToken: token, publicKey: newDeviceKey().publicKey });
        assert.equal(await store.countDevices('management'), 1);
      }));

    test('issuing a bootstrap token is refused while a management device exists, unless for recovery', () =>
      ctx.world(async ({ deps, store }) => {
        const first = await issueBootstrapToken(deps, { recovery: false });
        assert.equal(first.reason, 'init');
        await enrollWithBootstrapToken(deps, { bootstrapToken: first.token, publicKey: newDeviceKey().publicKey });
        const before = await auditLength(store);
        await rejectsWithCode(issueBootstrapToken(deps, { recovery: false }), 'config_invalid');
        assert.equal(await auditLength(store), before);
        const recovery = await issueBootstrapToken(deps, { recovery: true });
        assert.equal(recovery.reason, 'recovery');
        await enrollWithBootstrapToken(deps, { bootstrapToken: recovery.token, publicKey: newDeviceKey().publicKey });
        assert.equal(await store.countDevices('management'), 2);
        const issued = (await store.listAuditEvents({ afterSeq: 0, limit: 100 })).filter((e) => e.type === 'bootstrap.issued');
        assert.deepEqual(
          issued.map((e) => [e.data.reason, e.data.management_devices]),
          [
            ['init', 0],
            ['recovery', 1],
          ],
        );
      }));

    test('an application device does not block issuing a bootstrap token', () =>
      ctx.world(async ({ deps }) => {
        await enrollDevice(deps, 'application');
        assert.equal((await issueBootstrapToken(deps, { recovery: false })).reason, 'init');
      }));

    test('the store reports each bootstrap outcome, in the documented order, and audits only the enrollment', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const now = clock.now();
        const token = mintToken('bootstrap', deps.random);
        const issue = (digest: string, expiresAt: number) =>
          store.issueBootstrapToken(
            { id: newId('bootstrap', clock, deps.random), digest, createdAt: clock.now(), expiresAt },
            auditDraft(deps, 'bootstrap.issued', { realm: 'management', data: { reason: 'init' } }),
          );
        const consume = (digest: string, at: number, device = deviceRecord(deps, 'management')) =>
          store.consumeBootstrapToken(
            { digest, now: at, device },
            auditDraft(deps, 'device.enrolled', { realm: 'management', deviceId: device.id, data: { via: 'bootstrap' } }),
          );
        await issue(digestToken(token), now + minutes(15));
        assert.equal(await auditLength(store), 1);
        assert.deepEqual(await consume(digestToken(mintToken('bootstrap', deps.random)), now), { kind: 'unknown' });
        assert.deepEqual(await consume(digestToken(token), now + minutes(15)), { kind: 'expired' });
        const taken = await enrollDevice(deps, 'application');
        assert.deepEqual(await consume(digestToken(token), now, deviceRecord(deps, 'management', taken.key)), { kind: 'already_enrolled' });
        const afterRefusals = await auditLength(store);
        const device = deviceRecord(deps, 'management');
        const enrolled = await consume(digestToken(token), now + minutes(15) - 1, device);
        assert.deepEqual(enrolled, { kind: 'enrolled', device });
        assert.equal(await auditLength(store), afterRefusals + 1);
        assert.deepEqual(await consume(digestToken(token), now), { kind: 'used' });
        // A used token stays "used" even past its expiry: the check order is unknown, used, expired.
        assert.deepEqual(await consume(digestToken(token), now + minutes(60)), { kind: 'used' });
        // Superseded: a second token makes the first unknown.
        const first = mintToken('bootstrap', deps.random);
        const second = mintToken('bootstrap', deps.random);
        await issue(digestToken(first), now + minutes(15));
        await issue(digestToken(second), now + minutes(15));
        assert.deepEqual(await consume(digestToken(first), now), { kind: 'unknown' });
        assert.equal((await consume(digestToken(second), now)).kind, 'enrolled');
        assert.equal(await auditLength(store), afterRefusals + 4);
      }));
  });
}

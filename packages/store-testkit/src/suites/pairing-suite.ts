import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type AuthDeps,
  auditDraft,
  clusterIdOf,
  completePairing,
  newId,
  type PreparedPairing,
  pairingProofString,
  preparePairing,
  type Realm,
  sha256Hex,
} from '@svc/core';
import { PAIRING_MAX_FAILURES } from '@svc/core/settings';
import type { PairingIntentRecord } from '@svc/core/store';
import {
  allEvents,
  auditLength,
  authenticate,
  bootstrapAdmin,
  type DeviceKey,
  deviceRecord,
  enrollDevice,
  eventTypes,
  intentCreator,
  newDeviceKey,
  rejectsWithCode,
  seconds,
  signIn,
} from '../fixtures.js';
import type { SuiteContext } from '../harness.js';

/** The node id every pairing proof in the suite binds. */
export const TEST_NODE_ID = 'node-testkit-1';

/** A management principal and an intent prepared for `realm` and the new device key `key`. */
async function prepared(
  deps: AuthDeps,
  realm: Realm,
  ttlSeconds = 300,
  key: DeviceKey = newDeviceKey(),
): Promise<PreparedPairing & { readonly key: DeviceKey }> {
  const admin = await bootstrapAdmin(deps);
  const principal = await authenticate(deps, (await signIn(deps, admin.key, 'management')).access_token, 'management');
  return { ...(await preparePairing(deps, { principal, realm, publicKey: key.publicKey, name: 'kiosk', ttlSeconds })), key };
}

/** A completion attempt by `key`, with a proof signed by `signer` (default: `key` itself). */
async function complete(
  deps: AuthDeps,
  intent: PreparedPairing,
  code: string,
  key: DeviceKey,
  signer: DeviceKey = key,
  nodeId = TEST_NODE_ID,
) {
  const { device } = await completePairing(deps, {
    nodeId: TEST_NODE_ID,
    intentId: intent.intent_id,
    code,
    publicKey: key.publicKey,
    signature: signer.sign(pairingProofString({ nodeId, intentId: intent.intent_id, publicKey: key.publicKey })),
  });
  return device;
}

/** A code that is certainly wrong: the right one with its last character changed. */
function wrongCode(code: string): string {
  return code.slice(0, -1) + (code.endsWith('Z') ? 'Y' : 'Z');
}

/** createPairingIntent, getPairingIntent, recordPairingFailure, completePairing. */
export function pairingSuite(ctx: SuiteContext): void {
  describe('pairing', () => {
    test('an intent prepared on one node and completed on another records and reports both nodes and the cluster', () =>
      ctx.world(async ({ deps, store }) => {
        const NODE_A = 'AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAA-0';
        const key = newDeviceKey();
        const admin = await bootstrapAdmin(deps);
        const principal = await authenticate(deps, (await signIn(deps, admin.key, 'management')).access_token, 'management');
        const intent = await preparePairing(deps, { principal, realm: 'application', publicKey: key.publicKey, nodeId: NODE_A });
        assert.equal((await store.getPairingIntent(intent.intent_id))?.preparedByNode, NODE_A);
        const completed = await completePairing(deps, {
          nodeId: TEST_NODE_ID,
          intentId: intent.intent_id,
          code: intent.code,
          publicKey: key.publicKey,
          signature: key.sign(pairingProofString({ nodeId: TEST_NODE_ID, intentId: intent.intent_id, publicKey: key.publicKey })),
        });
        assert.equal(completed.preparedByNode, NODE_A);
        assert.deepEqual(await store.findDeviceByPublicKey(key.publicKey), completed.device);
        const events = (await allEvents(store)).filter((e) => e.type.startsWith('pairing.'));
        assert.deepEqual(
          events.map((e) => [e.type, e.data.prepared_by_node, e.data.completed_by_node, e.data.cluster_id]),
          [
            ['pairing.prepared', NODE_A, undefined, clusterIdOf(deps.projectId)],
            ['pairing.completed', NODE_A, TEST_NODE_ID, clusterIdOf(deps.projectId)],
          ],
        );
      }));

    test('a prepared intent completed with its code and a proof of possession enrolls the device in its realm', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const intent = await prepared(deps, 'application');
        assert.match(intent.code, /^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}$/);
        const stored = await store.getPairingIntent(intent.intent_id);
        assert.equal(stored?.realm, 'application');
        assert.equal(stored?.failures, 0);
        assert.equal(stored?.completedAt, null);
        assert.notEqual(stored?.codeDigest, intent.code);
        assert.equal(intent.public_key, intent.key.publicKey);
        const key = intent.key;
        clock.advance(1000);
        // Case, spaces and dashes do not matter when typing the code.
        const device = await complete(deps, intent, intent.code.toLowerCase().replace('-', ' '), key);
        assert.equal(device.realm, 'application');
        assert.equal(device.subject, intent.subject);
        assert.equal(device.name, 'kiosk');
        assert.deepEqual(await store.findDeviceByPublicKey(key.publicKey), device);
        const done = await store.getPairingIntent(intent.intent_id);
        assert.equal(done?.completedAt, clock.now());
        assert.equal(done?.deviceId, device.id);
        const pair = await signIn(deps, key, 'application');
        assert.equal(pair.realm, 'application');
        assert.deepEqual(
          (await eventTypes(store)).filter((t) => t.startsWith('pairing.')),
          ['pairing.prepared', 'pairing.completed'],
        );
      }));

    test('a wrong pairing code is counted and audited', () =>
      ctx.world(async ({ deps, store }) => {
        const intent = await prepared(deps, 'application');
        await rejectsWithCode(complete(deps, intent, wrongCode(intent.code), intent.key), 'invalid_pairing_code');
        assert.equal((await store.getPairingIntent(intent.intent_id))?.failures, 1);
        const failed = (await store.listAuditEvents({ afterSeq: 0, limit: 100 })).filter((e) => e.type === 'pairing.failed');
        assert.deepEqual(
          failed.map((e) => e.data.failures),
          [1],
        );
        await complete(deps, intent, intent.code, intent.key);
      }));

    test('a leaked pairing code is useless with any key but the one pinned at prepare: refused, counted, audited, and the right device still pairs', () =>
      ctx.world(async ({ deps, store }) => {
        const intent = await prepared(deps, 'management');
        // The attacker has the intent id and the right code, and a key (and proof) of their own.
        const attacker = newDeviceKey();
        await rejectsWithCode(complete(deps, intent, intent.code, attacker), 'invalid_pairing_code');
        assert.equal((await store.getPairingIntent(intent.intent_id))?.failures, 1);
        assert.equal(await store.findDeviceByPublicKey(attacker.publicKey), null);
        const device = await complete(deps, intent, intent.code, intent.key);
        assert.equal(device.publicKey, intent.key.publicKey);
      }));

    test('the 5th wrong code burns the intent; then even the right code fails', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const intent = await prepared(deps, 'management');
        for (let i = 1; i <= PAIRING_MAX_FAILURES; i++) {
          await rejectsWithCode(complete(deps, intent, wrongCode(intent.code), intent.key), 'invalid_pairing_code');
          assert.equal((await store.getPairingIntent(intent.intent_id))?.failures, i);
        }
        assert.equal((await store.getPairingIntent(intent.intent_id))?.burnedAt, clock.now());
        await rejectsWithCode(complete(deps, intent, intent.code, intent.key), 'invalid_pairing_intent');
        await rejectsWithCode(complete(deps, intent, wrongCode(intent.code), intent.key), 'invalid_pairing_intent');
        const types = (await eventTypes(store)).filter((t) => t.startsWith('pairing.'));
        assert.deepEqual(types, ['pairing.prepared', ...Array(PAIRING_MAX_FAILURES - 1).fill('pairing.failed'), 'pairing.burned']);
      }));

    test('an intent cannot be completed from its expiry on', () =>
      ctx.world(async ({ deps, clock }) => {
        const intent = await prepared(deps, 'application', 60);
        clock.advance(seconds(60));
        await rejectsWithCode(complete(deps, intent, intent.code, intent.key), 'invalid_pairing_intent');
      }));

    test('a replayed completion fails', () =>
      ctx.world(async ({ deps, store }) => {
        const intent = await prepared(deps, 'application');
        const key = intent.key;
        await complete(deps, intent, intent.code, key);
        await rejectsWithCode(complete(deps, intent, intent.code, key), 'invalid_pairing_intent');
        await rejectsWithCode(complete(deps, intent, intent.code, newDeviceKey()), 'invalid_pairing_intent');
        assert.equal(await store.countDevices('application'), 1);
      }));

    test('a proof signed by another key, or for another node, is a wrong attempt (invalid_pairing_code), counted; the intent stays live', () =>
      ctx.world(async ({ deps, store }) => {
        const intent = await prepared(deps, 'application');
        const key = intent.key;
        await rejectsWithCode(complete(deps, intent, intent.code, key, newDeviceKey()), 'invalid_pairing_code');
        await rejectsWithCode(complete(deps, intent, intent.code, key, key, 'node-elsewhere'), 'invalid_pairing_code');
        const live = await store.getPairingIntent(intent.intent_id);
        assert.equal(live?.completedAt, null);
        assert.equal(live?.failures, 2);
        await complete(deps, intent, intent.code, key);
      }));

    test('pairing a key that is already enrolled is already_enrolled and the intent stays live', () =>
      ctx.world(async ({ deps, store }) => {
        const taken = await enrollDevice(deps, 'application');
        const intent = await prepared(deps, 'application', 300, taken.key);
        await rejectsWithCode(complete(deps, intent, intent.code, taken.key), 'already_enrolled');
        const live = await store.getPairingIntent(intent.intent_id);
        assert.equal(live?.completedAt, null);
        assert.equal(live?.failures, 0);
      }));

    test('preparing pairing needs a management principal', () =>
      ctx.world(async ({ deps }) => {
        const app = await enrollDevice(deps, 'application');
        const principal = await authenticate(deps, (await signIn(deps, app.key, 'application')).access_token, 'application');
        await rejectsWithCode(
          preparePairing(deps, { principal, realm: 'application', publicKey: newDeviceKey().publicKey }),
          'invalid_token',
        );
      }));

    test('preparing pairing without the new device’s public key, or with a malformed one, is invalid_request', () =>
      ctx.world(async ({ deps }) => {
        const admin = await bootstrapAdmin(deps);
        const principal = await authenticate(deps, (await signIn(deps, admin.key, 'management')).access_token, 'management');
        for (const publicKey of [undefined, null, '', 'zz', 'ab'.repeat(31)]) {
          await rejectsWithCode(preparePairing(deps, { principal, realm: 'application', publicKey }), 'invalid_request');
        }
      }));

    test('the store counts failures only against live intents and completes only with the right code digest', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const now = clock.now();
        const intent: PairingIntentRecord = {
          id: newId('intent', clock, deps.random),
          realm: 'application',
          subject: newId('subject', clock, deps.random),
          name: null,
          codeDigest: sha256Hex('right'),
          createdAt: now,
          expiresAt: now + seconds(300),
          createdBy: await intentCreator(deps),
          failures: 0,
          completedAt: null,
          burnedAt: null,
          deviceId: null,
          preparedByNode: null,
        };
        await store.createPairingIntent(intent, auditDraft(deps, 'pairing.prepared', { data: { intent_id: intent.id } }));
        assert.deepEqual(await store.getPairingIntent(intent.id), intent);
        assert.equal(await store.getPairingIntent('int_01KAQ00000000000000000000Z'), null);
        const fail = (id: string, at: number) =>
          store.recordPairingFailure({ id, now: at, maxFailures: 2 }, (failures, burned) =>
            auditDraft(deps, burned ? 'pairing.burned' : 'pairing.failed', { data: { intent_id: id, failures } }),
          );
        assert.equal(await fail('int_01KAQ00000000000000000000Z', now), null);
        assert.equal(await fail(intent.id, intent.expiresAt), null, 'an expired intent counts nothing');
        const before = await auditLength(store);
        const device = deviceRecord(deps, 'application');
        const event = () => auditDraft(deps, 'pairing.completed', { data: { intent_id: intent.id } });
        assert.deepEqual(await store.completePairing({ id: intent.id, codeDigest: sha256Hex('wrong'), now, device }, event()), {
          kind: 'invalid',
        });
        assert.deepEqual(
          await store.completePairing({ id: intent.id, codeDigest: intent.codeDigest, now: intent.expiresAt, device }, event()),
          {
            kind: 'invalid',
          },
        );
        assert.equal(await auditLength(store), before, 'refused completions write nothing');
        assert.deepEqual(await fail(intent.id, now), { failures: 1, burned: false });
        assert.deepEqual(await fail(intent.id, now), { failures: 2, burned: true });
        assert.equal(await fail(intent.id, now), null, 'a burned intent counts nothing more');
        assert.equal(await auditLength(store), before + 2);
        assert.deepEqual(await store.completePairing({ id: intent.id, codeDigest: intent.codeDigest, now, device }, event()), {
          kind: 'invalid',
        });
        assert.equal(await store.getDevice(device.id), null);
      }));

    test('the store completes a live intent once, enrolling the device with its event', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const now = clock.now();
        const intent: PairingIntentRecord = {
          id: newId('intent', clock, deps.random),
          realm: 'management',
          subject: newId('subject', clock, deps.random),
          name: 'laptop',
          codeDigest: sha256Hex('right'),
          createdAt: now,
          expiresAt: now + seconds(300),
          createdBy: await intentCreator(deps),
          failures: 0,
          completedAt: null,
          burnedAt: null,
          deviceId: null,
          preparedByNode: null,
        };
        await store.createPairingIntent(intent, auditDraft(deps, 'pairing.prepared', { data: { intent_id: intent.id } }));
        const device = { ...deviceRecord(deps, 'management'), subject: intent.subject };
        const event = () => auditDraft(deps, 'pairing.completed', { data: { intent_id: intent.id } });
        const before = await auditLength(store);
        assert.deepEqual(await store.completePairing({ id: intent.id, codeDigest: intent.codeDigest, now, device }, event()), {
          kind: 'completed',
          device,
        });
        assert.equal(await auditLength(store), before + 1);
        const again = deviceRecord(deps, 'management');
        assert.deepEqual(await store.completePairing({ id: intent.id, codeDigest: intent.codeDigest, now, device: again }, event()), {
          kind: 'invalid',
        });
        assert.equal((await store.getPairingIntent(intent.id))?.deviceId, device.id);
      }));
  });
}

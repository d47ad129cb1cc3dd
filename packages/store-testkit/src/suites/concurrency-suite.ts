import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type AuthDeps,
  auditDraft,
  completePairing,
  createChallenge,
  createSession,
  enrollWithBootstrapToken,
  issueBootstrapToken,
  pairingProofString,
  preparePairing,
  removeDevice,
  rotateRefreshToken,
  verifyAuditChain,
} from '@svc/core';
import type { Store } from '@svc/core/store';
import {
  allEvents,
  authenticate,
  authenticates,
  bootstrapAdmin,
  createStoreSession,
  enrollDevice,
  newDeviceKey,
  newStoreSession,
  rotateAtStore,
  settle,
  signIn,
} from '../fixtures.js';
import type { SuiteContext, World } from '../harness.js';
import { TEST_NODE_ID } from './pairing-suite.js';

/** How many callers race for each single-use credential. */
export const RACERS = 50;

/** Deps for the racers: alternately over the store and, when the factory has them, over peer connections. */
async function racerDeps(w: World): Promise<AuthDeps[]> {
  const stores: Store[] = [w.store];
  const peer = await w.peer();
  if (peer !== null) stores.push(peer);
  return Array.from({ length: RACERS }, (_, i) => w.depsFor(stores[i % stores.length] ?? w.store));
}

/** N concurrent uses of one single-use credential yield exactly one winner. */
export function concurrencySuite(ctx: SuiteContext): void {
  const where = ctx.hasPeers ? 'across two connections' : 'on one connection';

  describe(`concurrency: ${RACERS} racers ${where}`, () => {
    test('one bootstrap token enrolls exactly one device', () =>
      ctx.world(async (w) => {
        const racers = await racerDeps(w);
        const { token } = await issueBootstrapToken(w.deps, { recovery: false });
        const { values, codes } = await settle(
          racers.map((deps) => enrollWithBootstrapToken(deps, { bootstrapToken: token, publicKey: newDeviceKey().publicKey })),
        );
        assert.equal(values.length, 1);
        assert.deepEqual(new Set(codes), new Set(['bootstrap_token_used']));
        assert.equal(await w.store.countDevices('management'), 1);
        assert.equal((await allEvents(w.store)).filter((e) => e.type === 'device.enrolled').length, 1);
      }));

    test('one challenge signs in exactly once', () =>
      ctx.world(async (w) => {
        const racers = await racerDeps(w);
        const admin = await bootstrapAdmin(w.deps);
        const challenge = await createChallenge(w.deps, { publicKey: admin.key.publicKey, realm: 'management' });
        const signature = admin.key.sign(challenge.challenge);
        const { values, codes } = await settle(
          racers.map((deps) => createSession(deps, { challengeId: challenge.id, signature, realm: 'management' })),
        );
        assert.equal(values.length, 1);
        assert.deepEqual(new Set(codes), new Set(['invalid_challenge']));
        assert.equal((await w.store.listActiveSessions({ now: w.clock.now() })).length, 1);
      }));

    test(`${RACERS} sessions created at once with one challenge: exactly one is created, every other writes nothing`, () =>
      ctx.world(async (w) => {
        const admin = await bootstrapAdmin(w.deps);
        const challenge = await createChallenge(w.deps, { publicKey: admin.key.publicKey, realm: 'management' });
        const stores: Store[] = [w.store];
        const peer = await w.peer();
        if (peer !== null) stores.push(peer);
        const use = { id: challenge.id, now: w.clock.now() };
        const drafts = Array.from({ length: RACERS }, () => newStoreSession(w.deps, admin.device));
        const answers = await Promise.all(
          drafts.map((d, i) => (stores[i % stores.length] as Store).createSession(d.session, d.digests, d.event, use)),
        );
        assert.equal(answers.filter((a) => a === 'created').length, 1, answers.join(' '));
        assert.equal(answers.filter((a) => a === 'challenge_used').length, RACERS - 1, answers.join(' '));
        assert.equal((await w.store.listActiveSessions({ now: w.clock.now() })).length, 1);
        assert.equal((await allEvents(w.store)).filter((e) => e.type === 'session.created').length, 1);
      }));

    test('sign-ins racing the removal of their device never leave a live session for it', () =>
      ctx.world(async (w) => {
        const racers = await racerDeps(w);
        const { device } = await enrollDevice(w.deps, 'application');
        const [remover, ...signers] = racers as [AuthDeps, ...AuthDeps[]];
        await Promise.allSettled([
          remover.store.removeDevice(
            { deviceId: device.id, now: w.clock.now() },
            auditDraft(remover, 'device.removed', { realm: device.realm, deviceId: device.id }),
          ),
          ...signers.map((deps) => createStoreSession(deps, device)),
        ]);
        assert.equal((await w.store.getDevice(device.id))?.removedAt, w.clock.now());
        assert.deepEqual(await w.store.listActiveSessions({ now: w.clock.now(), deviceId: device.id }), []);
      }));

    test('two concurrent removals of the last two management devices leave one (the last cannot be deleted twice)', () =>
      ctx.world(async (w) => {
        const racers = await racerDeps(w);
        const a = await bootstrapAdmin(w.deps);
        const b = await bootstrapAdmin(w.deps);
        const [first, second] = racers as [AuthDeps, AuthDeps, ...AuthDeps[]];
        const { values, codes } = await settle([
          removeDevice(first, { principal: null, deviceId: a.device.id }),
          removeDevice(second, { principal: null, deviceId: b.device.id }),
        ]);
        assert.equal(values.length, 1);
        assert.deepEqual(codes, ['invalid_request']);
        assert.equal(await w.store.countDevices('management'), 1);
        assert.equal((await allEvents(w.store)).filter((e) => e.type === 'device.removed').length, 1);
      }));

    test(`${RACERS} concurrent removals of ${RACERS} management devices leave exactly one`, () =>
      ctx.world(async (w) => {
        const racers = await racerDeps(w);
        const admins: { readonly device: { readonly id: string } }[] = [];
        for (let i = 0; i < RACERS; i++) admins.push(await bootstrapAdmin(w.deps));
        const { values, codes } = await settle(
          racers.map((deps, i) => removeDevice(deps, { principal: null, deviceId: admins[i]?.device.id })),
        );
        assert.equal(values.length, RACERS - 1);
        assert.deepEqual(codes, ['invalid_request']);
        assert.equal(await w.store.countDevices('management'), 1);
      }));

    test('one pairing intent is completed exactly once', () =>
      ctx.world(async (w) => {
        const racers = await racerDeps(w);
        const admin = await bootstrapAdmin(w.deps);
        const principal = await authenticate(w.deps, (await signIn(w.deps, admin.key, 'management')).access_token, 'management');
        // Every racer holds the pinned key, the code and a valid proof: only the store can pick one.
        const key = newDeviceKey();
        const intent = await preparePairing(w.deps, { principal, realm: 'application', publicKey: key.publicKey, ttlSeconds: 300 });
        const { values, codes } = await settle(
          racers.map((deps) => {
            const proof = pairingProofString({ nodeId: TEST_NODE_ID, intentId: intent.intent_id, publicKey: key.publicKey });
            return completePairing(deps, {
              nodeId: TEST_NODE_ID,
              intentId: intent.intent_id,
              code: intent.code,
              publicKey: key.publicKey,
              signature: key.sign(proof),
            }).then((r) => r.device);
          }),
        );
        assert.equal(values.length, 1);
        assert.deepEqual(new Set(codes), new Set(['invalid_pairing_intent']));
        assert.equal(await w.store.countDevices('application'), 1);
        assert.equal((await w.store.getPairingIntent(intent.intent_id))?.deviceId, values[0]?.id);
      }));

    test('one refresh token with no grace interval is rotated exactly once and leaves at most one live pair', () =>
      ctx.world(async (w) => {
        const racers = await racerDeps(w);
        const app = await enrollDevice(w.deps, 'application');
        const first = await signIn(w.deps, app.key, 'application');
        const results = await Promise.all(
          racers.map((deps) => rotateAtStore(deps, { refresh: first.refresh_token, realm: 'application', graceMs: 0 })),
        );
        const kinds = results.map((r) => r.outcome.kind);
        assert.equal(kinds.filter((k) => k === 'rotated').length, 1);
        const issued = results.filter((r) => r.outcome.kind === 'rotated' || r.outcome.kind === 'rotated_in_grace');
        let live = 0;
        for (const r of issued) if (await authenticates(w.deps, r.next.access, 'application')) live++;
        // A reuse verdict revokes the session (no live pair); otherwise exactly one pair survives.
        assert.equal(live, kinds.includes('reused') ? 0 : 1);
        assert.equal(verifyAuditChain(await allEvents(w.store)).ok, true);
      }));

    test('one refresh token presented concurrently within the grace interval leaves exactly one live pair, held by every presenter', () =>
      ctx.world(async (w) => {
        const racers = await racerDeps(w);
        const app = await enrollDevice(w.deps, 'application');
        const first = await signIn(w.deps, app.key, 'application');
        const { values, codes } = await settle(
          racers.map((deps) => rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'application' })),
        );
        assert.deepEqual(codes, [], 'every presentation within grace is answered');
        assert.equal(new Set(values.map((p) => p.refresh_token)).size, 1, 'every presenter got the same pair');
        let live = 0;
        for (const pair of values) if (await authenticates(w.deps, pair.access_token, 'application')) live++;
        assert.equal(live, values.length);
        const session = await w.store.getSession(first.session_id);
        assert.equal(session?.generation, 1);
        assert.equal(session?.revokedAt, null);
        const types = (await allEvents(w.store)).map((e) => e.type);
        assert.equal(types.filter((t) => t === 'session.rotated').length, 1);
        assert.equal(types.filter((t) => t === 'session.rotated_in_grace').length, RACERS - 1);
      }));
  });
}

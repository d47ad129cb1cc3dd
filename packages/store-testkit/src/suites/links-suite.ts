import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type AuditEventDraft, type AuthDeps, auditDraft, newId, type Realm, sha256Hex, verifyAuditChain } from '@svc/core';
import { type FlowRecord, type LinkRecord, newSessionRecord, type PairingIntentRecord, type Store } from '@svc/core/store';
import { allEvents, auditLength, createStoreSession, enrollDevice, intentCreator, mintPair, minutes, settle } from '../fixtures.js';
import type { SuiteContext, World } from '../harness.js';
import { RACERS } from './concurrency-suite.js';

const ISSUER = 'https://login.example.com';

/** A link record as a use case builds it. */
export function linkRecord(deps: AuthDeps, over: Partial<LinkRecord> = {}): LinkRecord {
  return {
    id: newId('link', deps.clock, deps.random),
    realm: 'application',
    subject: newId('subject', deps.clock, deps.random),
    provider: 'corp',
    issuer: ISSUER,
    externalSubject: `user-${newId('event', deps.clock, deps.random)}`,
    credentialData: null,
    counter: null,
    name: 'ann@example.com',
    createdAt: deps.clock.now(),
    lastUsedAt: null,
    removedAt: null,
    ...over,
  };
}

function linkedEvent(deps: AuthDeps, link: LinkRecord): AuditEventDraft {
  return auditDraft(deps, 'link.created', {
    realm: link.realm,
    subject: link.subject,
    deviceId: link.id,
    data: { provider: link.provider },
  });
}

function flowRecord(deps: AuthDeps, over: Partial<FlowRecord> = {}): FlowRecord {
  const now = deps.clock.now();
  return {
    id: newId('flow', deps.clock, deps.random),
    provider: 'corp',
    realm: 'application',
    intent: 'signin',
    subject: null,
    pairingIntentId: null,
    state: '{"nonce":"n"}',
    createdAt: now,
    expiresAt: now + minutes(10),
    ...over,
  };
}

/** Creates a session for `link` at the store, as finishProviderFlow does; answers the outcome and the session id. */
async function linkSession(deps: AuthDeps, link: LinkRecord, counter: number | null | 'unchanged', store: Store = deps.store) {
  const now = deps.clock.now();
  const id = newId('session', deps.clock, deps.random);
  const pair = mintPair(deps, id);
  const session = newSessionRecord({ id, device: link, now, expiresAt: now + minutes(60 * 24), pair: pair.digests, amr: ['fed'] });
  const outcome = await store.createLinkSession({ session, pair: pair.digests, counter, now }, [
    auditDraft(deps, 'provider.signin', { realm: link.realm, subject: link.subject, deviceId: link.id, sessionId: id }),
    auditDraft(deps, 'session.created', { realm: link.realm, subject: link.subject, deviceId: link.id, sessionId: id }),
  ]);
  return { outcome, sessionId: id, pair };
}

async function racers(w: World): Promise<Store[]> {
  const stores: Store[] = [w.store];
  const peer = await w.peer();
  if (peer !== null) stores.push(peer);
  return Array.from({ length: RACERS }, (_, i) => stores[i % stores.length] ?? w.store);
}

/** A live link intent (a pairing intent whose code is bound to a provider), stored with its event. */
async function linkIntent(deps: AuthDeps, over: Partial<PairingIntentRecord> = {}): Promise<PairingIntentRecord> {
  const now = deps.clock.now();
  const intent: PairingIntentRecord = {
    id: newId('intent', deps.clock, deps.random),
    realm: 'application',
    subject: newId('subject', deps.clock, deps.random),
    name: null,
    codeDigest: sha256Hex(`code ${newId('event', deps.clock, deps.random)}`),
    createdAt: now,
    expiresAt: now + minutes(15),
    createdBy: over.createdBy ?? (await intentCreator(deps)),
    failures: 0,
    completedAt: null,
    burnedAt: null,
    deviceId: null,
    preparedByNode: null,
    ...over,
  };
  await deps.store.createPairingIntent(intent, auditDraft(deps, 'pairing.prepared', { data: { intent_id: intent.id, kind: 'link' } }));
  return intent;
}

async function removeLinkAt(deps: AuthDeps, link: LinkRecord, store: Store = deps.store) {
  return store.removeLink(
    { linkId: link.id, now: deps.clock.now() },
    auditDraft(deps, 'link.removed', { realm: link.realm, subject: link.subject, deviceId: link.id }),
  );
}

/** Links, flows and link sessions at the store: the contract 5 operations, with their races. */
export function linksSuite(ctx: SuiteContext): void {
  describe('links and flows at the store', () => {
    test('a link is stored with its event, found live by its identity, and listed by realm, subject and provider', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const before = await auditLength(store);
        const link = linkRecord(deps, { credentialData: '{"publicKey":"pk"}', counter: 7 });
        assert.equal(await store.createLink(link, linkedEvent(deps, link)), 'created');
        assert.equal(await auditLength(store), before + 1);
        assert.deepEqual(await store.getLink(link.id), link);
        assert.deepEqual(await store.findLiveLink({ realm: 'application', issuer: ISSUER, externalSubject: link.externalSubject }), link);
        assert.equal(await store.findLiveLink({ realm: 'management', issuer: ISSUER, externalSubject: link.externalSubject }), null);
        clock.advance(1);
        const other = linkRecord(deps, { provider: 'passkey', subject: link.subject });
        await store.createLink(other, linkedEvent(deps, other));
        assert.deepEqual(
          (await store.listLinks({ subject: link.subject })).map((l) => l.id),
          [link.id, other.id],
        );
        assert.deepEqual(
          (await store.listLinks({ provider: 'passkey' })).map((l) => l.id),
          [other.id],
        );
        assert.deepEqual(await store.listLinks({ realm: 'management' }), []);
      }));

    test('one live link per realm, issuer and external subject: a second is already_linked and writes nothing; after removal it can be linked again', () =>
      ctx.world(async ({ deps, store }) => {
        const link = linkRecord(deps);
        await store.createLink(link, linkedEvent(deps, link));
        const before = await auditLength(store);
        const twin = linkRecord(deps, { externalSubject: link.externalSubject });
        assert.equal(await store.createLink(twin, linkedEvent(deps, twin)), 'already_linked');
        assert.equal(await store.getLink(twin.id), null);
        assert.equal(await auditLength(store), before);
        // The same identity in the other realm is another link.
        const elsewhere = linkRecord(deps, { externalSubject: link.externalSubject, realm: 'management' });
        assert.equal(await store.createLink(elsewhere, linkedEvent(deps, elsewhere)), 'created');
        assert.deepEqual(await removeLinkAt(deps, link), { removed: true, revokedSessions: 0 });
        assert.equal(await store.createLink(twin, linkedEvent(deps, twin)), 'created');
      }));

    test('removeLink with keepAnotherWayIn refuses the last live link of a subject (no other link, no device), writes nothing; another link or a device lets it go', () =>
      ctx.world(async ({ deps, store }) => {
        const only = linkRecord(deps);
        await store.createLink(only, linkedEvent(deps, only));
        const guarded = (link: LinkRecord) =>
          store.removeLink(
            { linkId: link.id, now: deps.clock.now(), keepAnotherWayIn: true },
            auditDraft(deps, 'link.removed', { realm: link.realm, subject: link.subject, deviceId: link.id }),
          );
        const before = await auditLength(store);
        assert.deepEqual(await guarded(only), { removed: false, revokedSessions: 0, lastWayIn: true });
        assert.equal((await store.getLink(only.id))?.removedAt, null);
        assert.equal(await auditLength(store), before);
        // A link of the same subject in the other realm is no way into this one.
        const elsewhere = linkRecord(deps, { subject: only.subject, realm: 'management' });
        await store.createLink(elsewhere, linkedEvent(deps, elsewhere));
        assert.equal((await guarded(only)).lastWayIn, true);
        // A second link of the subject: the first may go, then the second is the last.
        const second = linkRecord(deps, { subject: only.subject });
        await store.createLink(second, linkedEvent(deps, second));
        assert.deepEqual(await guarded(only), { removed: true, revokedSessions: 0 });
        assert.equal((await guarded(second)).lastWayIn, true);
        // An active device of the subject in the realm is another way in.
        const { device } = await enrollDevice(deps, 'application');
        const owned = linkRecord(deps, { subject: device.subject });
        await store.createLink(owned, linkedEvent(deps, owned));
        assert.deepEqual(await guarded(owned), { removed: true, revokedSessions: 0 });
        // Unknown or already removed: removed false, not lastWayIn.
        assert.deepEqual(await guarded(only), { removed: false, revokedSessions: 0 });
      }));

    test('two concurrent guarded removals of the last two links of a subject: exactly one goes', () =>
      ctx.world(async ({ deps, store }) => {
        const a = linkRecord(deps);
        const b = linkRecord(deps, { subject: a.subject });
        await store.createLink(a, linkedEvent(deps, a));
        await store.createLink(b, linkedEvent(deps, b));
        const remove = (link: LinkRecord) =>
          store.removeLink(
            { linkId: link.id, now: deps.clock.now(), keepAnotherWayIn: true },
            auditDraft(deps, 'link.removed', { realm: link.realm, subject: link.subject, deviceId: link.id }),
          );
        const outcomes = await Promise.all([remove(a), remove(b)]);
        assert.equal(outcomes.filter((o) => o.removed).length, 1, JSON.stringify(outcomes));
        assert.equal(outcomes.filter((o) => o.lastWayIn === true).length, 1, JSON.stringify(outcomes));
        assert.equal((await store.listLinks({ subject: a.subject })).length, 1);
      }));

    test('renameLink renames a live link with its event; an unknown or removed link is false and writes nothing', () =>
      ctx.world(async ({ deps, store }) => {
        const link = linkRecord(deps);
        await store.createLink(link, linkedEvent(deps, link));
        const renamed = (id: string, name: string) =>
          store.renameLink(
            { linkId: id, name },
            auditDraft(deps, 'link.renamed', { realm: link.realm, subject: link.subject, deviceId: id, data: { name } }),
          );
        let before = await auditLength(store);
        assert.equal(await renamed(link.id, 'Work laptop'), true);
        assert.equal((await store.getLink(link.id))?.name, 'Work laptop');
        assert.equal((await store.listLinks({ subject: link.subject }))[0]?.name, 'Work laptop');
        assert.equal(await auditLength(store), before + 1);
        const last = (await allEvents(store)).at(-1);
        assert.equal(last?.type, 'link.renamed');
        assert.equal(last?.data.name, 'Work laptop');
        before = await auditLength(store);
        assert.equal(await renamed(linkRecord(deps).id, 'Ghost'), false);
        assert.equal(await auditLength(store), before);
        await removeLinkAt(deps, link);
        before = await auditLength(store);
        assert.equal(await renamed(link.id, 'After removal'), false);
        assert.equal((await store.getLink(link.id))?.name, 'Work laptop');
        assert.equal(await auditLength(store), before);
      }));

    test('a link that completes a link intent uses it up in the same transaction, and a used, expired, burned or mismatched intent links nothing', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const intent = await linkIntent(deps);
        const pairing = (over: Partial<{ codeDigest: string; now: number }> = {}) => ({
          id: intent.id,
          codeDigest: intent.codeDigest,
          now: clock.now(),
          ...over,
        });
        let before = await auditLength(store);
        const wrong = linkRecord(deps, { subject: intent.subject });
        assert.equal(
          await store.createLink(wrong, linkedEvent(deps, wrong), pairing({ codeDigest: sha256Hex('guess') })),
          'intent_invalid',
        );
        assert.equal(
          await store.createLink(wrong, linkedEvent(deps, wrong), pairing({ now: intent.expiresAt })),
          'intent_invalid',
          'expired',
        );
        assert.equal(await store.getLink(wrong.id), null);
        assert.equal(await auditLength(store), before);
        // An identity that is already linked: nothing written, and the intent stays live for another credential.
        const taken = linkRecord(deps);
        await store.createLink(taken, linkedEvent(deps, taken));
        before = await auditLength(store);
        const twin = linkRecord(deps, { subject: intent.subject, externalSubject: taken.externalSubject });
        assert.equal(await store.createLink(twin, linkedEvent(deps, twin), pairing()), 'already_linked');
        assert.equal((await store.getPairingIntent(intent.id))?.completedAt, null);
        assert.equal(await auditLength(store), before);
        clock.advance(1000);
        const link = linkRecord(deps, { subject: intent.subject });
        assert.equal(await store.createLink(link, linkedEvent(deps, link), pairing()), 'created');
        assert.equal(await auditLength(store), before + 1);
        assert.equal((await store.getPairingIntent(intent.id))?.completedAt, clock.now());
        assert.deepEqual(await store.getLink(link.id), link);
        const again = linkRecord(deps, { subject: intent.subject });
        assert.equal(await store.createLink(again, linkedEvent(deps, again), pairing()), 'intent_invalid');
        assert.equal(await store.getLink(again.id), null);
        // A burned intent links nothing either.
        const burned = await linkIntent(deps);
        await store.recordPairingFailure({ id: burned.id, now: clock.now(), maxFailures: 1 }, (failures, isBurned) =>
          auditDraft(deps, isBurned ? 'pairing.burned' : 'pairing.failed', { data: { intent_id: burned.id, failures } }),
        );
        const late = linkRecord(deps, { subject: burned.subject });
        assert.equal(
          await store.createLink(late, linkedEvent(deps, late), { id: burned.id, codeDigest: burned.codeDigest, now: clock.now() }),
          'intent_invalid',
        );
        assert.ok(verifyAuditChain(await allEvents(store)).ok);
      }));

    test(`a link intent completed by ${RACERS} concurrent links of different credentials links exactly one`, () =>
      ctx.world(async (w) => {
        const { deps, store, clock } = w;
        const intent = await linkIntent(deps);
        const before = await auditLength(store);
        const links = Array.from({ length: RACERS }, () => linkRecord(deps, { subject: intent.subject }));
        const { values: outcomes, codes } = await settle(
          (await racers(w)).map((racer, i) => {
            const link = links[i] as LinkRecord;
            return racer.createLink(link, linkedEvent(deps, link), { id: intent.id, codeDigest: intent.codeDigest, now: clock.now() });
          }),
        );
        assert.deepEqual(codes, []);
        assert.deepEqual(
          outcomes.filter((o) => o === 'created'),
          ['created'],
        );
        assert.equal(outcomes.filter((o) => o === 'intent_invalid').length, RACERS - 1);
        assert.equal((await store.listLinks({ subject: intent.subject })).length, 1);
        assert.equal(await auditLength(store), before + 1);
      }));

    test('removing a link revokes its live sessions (link_removed) with the event, once', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const link = linkRecord(deps);
        await store.createLink(link, linkedEvent(deps, link));
        const a = await linkSession(deps, link, null);
        const b = await linkSession(deps, link, null);
        assert.deepEqual([a.outcome, b.outcome], [{ kind: 'created' }, { kind: 'created' }]);
        const { device } = await enrollDevice(deps, 'application');
        const { session: deviceSession } = await createStoreSession(deps, device);
        clock.advance(1000);
        const before = await auditLength(store);
        assert.deepEqual(await removeLinkAt(deps, link), { removed: true, revokedSessions: 2 });
        assert.equal(await auditLength(store), before + 1);
        for (const id of [a.sessionId, b.sessionId]) {
          const s = await store.getSession(id);
          assert.equal(s?.revokedReason, 'link_removed');
          assert.equal(s?.revokedAt, clock.now());
        }
        assert.equal((await store.getSession(deviceSession.id))?.revokedAt, null);
        assert.equal((await store.getLink(link.id))?.removedAt, clock.now());
        assert.deepEqual(await store.listLinks({}), []);
        assert.deepEqual(await removeLinkAt(deps, link), { removed: false, revokedSessions: 0 });
        assert.equal(await auditLength(store), before + 1);
      }));

    test('a link session is stored with its amr, its device the link, and both events in order; the link records its last use', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const link = linkRecord(deps);
        await store.createLink(link, linkedEvent(deps, link));
        clock.advance(5000);
        const before = await auditLength(store);
        const { outcome, sessionId } = await linkSession(deps, link, null);
        assert.deepEqual(outcome, { kind: 'created' });
        const session = await store.getSession(sessionId);
        assert.equal(session?.deviceId, link.id);
        assert.deepEqual(session?.amr, ['fed']);
        assert.deepEqual(
          (await store.listActiveSessions({ now: clock.now(), deviceId: link.id })).map((s) => s.id),
          [sessionId],
        );
        const events = (await allEvents(store)).slice(before);
        assert.deepEqual(
          events.map((e) => [e.type, e.sessionId]),
          [
            ['provider.signin', sessionId],
            ['session.created', sessionId],
          ],
        );
        assert.equal((await store.getLink(link.id))?.lastUsedAt, clock.now());
        assert.ok(verifyAuditChain(await allEvents(store)).ok);
      }));

    test('a device session keeps the amr ed25519', () =>
      ctx.world(async ({ deps, store }) => {
        const { device } = await enrollDevice(deps, 'application');
        const { session } = await createStoreSession(deps, device);
        assert.deepEqual((await store.getSession(session.id))?.amr, ['ed25519']);
      }));

    test('no session for a removed or unknown link, and createSession (devices only) refuses a link id', () =>
      ctx.world(async ({ deps, store }) => {
        const link = linkRecord(deps);
        await store.createLink(link, linkedEvent(deps, link));
        const pairFor = mintPair(deps, newId('session', deps.clock, deps.random));
        const asDevice = newSessionRecord({
          id: newId('session', deps.clock, deps.random),
          device: link,
          now: deps.clock.now(),
          expiresAt: deps.clock.now() + minutes(60),
          pair: pairFor.digests,
        });
        assert.equal(await store.createSession(asDevice, pairFor.digests, auditDraft(deps, 'session.created', {})), 'device_inactive');
        await removeLinkAt(deps, link);
        const before = await auditLength(store);
        assert.deepEqual((await linkSession(deps, link, null)).outcome, { kind: 'link_removed' });
        assert.deepEqual((await linkSession(deps, linkRecord(deps), null)).outcome, { kind: 'link_removed' });
        assert.equal(await auditLength(store), before);
        assert.deepEqual(await store.listActiveSessions({ now: deps.clock.now() }), []);
      }));

    test('the signature counter must strictly advance (cloned authenticator): a regression or a replay writes nothing; 0 and 0 pass', () =>
      ctx.world(async ({ deps, store }) => {
        const link = linkRecord(deps, { counter: 10 });
        await store.createLink(link, linkedEvent(deps, link));
        const before = await auditLength(store);
        assert.deepEqual((await linkSession(deps, link, 9)).outcome, { kind: 'counter_regressed', stored: 10 });
        assert.deepEqual((await linkSession(deps, link, 10)).outcome, { kind: 'counter_regressed', stored: 10 });
        assert.deepEqual((await linkSession(deps, link, null)).outcome, { kind: 'counter_regressed', stored: 10 });
        assert.equal(await auditLength(store), before);
        assert.deepEqual((await linkSession(deps, link, 11)).outcome, { kind: 'created' });
        assert.equal((await store.getLink(link.id))?.counter, 11);
        assert.deepEqual((await linkSession(deps, link, 11)).outcome, { kind: 'counter_regressed', stored: 11 });
        // 'unchanged' (a link created by the same ceremony) leaves the counter as stored.
        assert.deepEqual((await linkSession(deps, link, 'unchanged')).outcome, { kind: 'created' });
        assert.equal((await store.getLink(link.id))?.counter, 11);
        const zero = linkRecord(deps, { counter: 0 });
        await store.createLink(zero, linkedEvent(deps, zero));
        assert.deepEqual((await linkSession(deps, zero, 0)).outcome, { kind: 'created' });
        assert.deepEqual((await linkSession(deps, zero, 0)).outcome, { kind: 'created' });
        const none = linkRecord(deps);
        await store.createLink(none, linkedEvent(deps, none));
        assert.deepEqual((await linkSession(deps, none, 3)).outcome, { kind: 'counter_regressed', stored: null });
      }));

    test('a flow is used up once, before it expires, and never when dated in the future (clock stepped back)', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const flow = flowRecord(deps, { intent: 'link', subject: 'sub_01KAQ0000000000000000000S1' });
        await store.createFlow(flow);
        assert.deepEqual(await store.consumeFlow({ id: flow.id, now: clock.now() }), flow);
        assert.equal(await store.consumeFlow({ id: flow.id, now: clock.now() }), null);
        const expiring = flowRecord(deps);
        await store.createFlow(expiring);
        clock.advance(minutes(10));
        assert.equal(await store.consumeFlow({ id: expiring.id, now: clock.now() }), null);
        const lastMs = flowRecord(deps);
        await store.createFlow(lastMs);
        clock.advance(minutes(10) - 1);
        assert.deepEqual(await store.consumeFlow({ id: lastMs.id, now: clock.now() }), lastMs);
        const future = flowRecord(deps);
        await store.createFlow(future);
        clock.set(clock.now() - 5000);
        assert.equal(await store.consumeFlow({ id: future.id, now: clock.now() }), null);
        assert.equal(await store.consumeFlow({ id: 'flw_01KAQ0000000000000000000Z1', now: clock.now() }), null);
      }));
  });

  const where = ctx.hasPeers ? 'across two connections' : 'on one connection';
  describe(`links and flows: ${RACERS} racers ${where}`, () => {
    test('one flow is finished exactly once', () =>
      ctx.world(async (w) => {
        const stores = await racers(w);
        const flow = flowRecord(w.deps);
        await w.store.createFlow(flow);
        const got = await Promise.all(stores.map((s) => s.consumeFlow({ id: flow.id, now: w.clock.now() })));
        assert.equal(got.filter((f) => f !== null).length, 1);
      }));

    test('sign-ins presenting the same counter (a cloned authenticator racing the real one) create exactly one session', () =>
      ctx.world(async (w) => {
        const stores = await racers(w);
        const link = linkRecord(w.deps, { counter: 5 });
        await w.store.createLink(link, linkedEvent(w.deps, link));
        const outcomes = await Promise.all(stores.map((s) => linkSession(w.deps, link, 6, s)));
        assert.equal(outcomes.filter((o) => o.outcome.kind === 'created').length, 1);
        assert.deepEqual(
          new Set(outcomes.filter((o) => o.outcome.kind !== 'created').map((o) => o.outcome.kind)),
          new Set(['counter_regressed']),
        );
        assert.equal((await w.store.listActiveSessions({ now: w.clock.now(), deviceId: link.id })).length, 1);
        assert.equal((await w.store.getLink(link.id))?.counter, 6);
        assert.ok(verifyAuditChain(await allEvents(w.store)).ok);
      }));

    test('sign-ins racing the removal of their link never leave a live session for it', () =>
      ctx.world(async (w) => {
        const stores = await racers(w);
        const link = linkRecord(w.deps);
        await w.store.createLink(link, linkedEvent(w.deps, link));
        const [remover, ...signers] = stores as [Store, ...Store[]];
        await settle<unknown>([removeLinkAt(w.deps, link, remover), ...signers.map((s) => linkSession(w.deps, link, null, s))]);
        assert.deepEqual(await w.store.listActiveSessions({ now: w.clock.now(), deviceId: link.id }), []);
        assert.ok(verifyAuditChain(await allEvents(w.store)).ok);
      }));

    test('one identity is linked exactly once', () =>
      ctx.world(async (w) => {
        const stores = await racers(w);
        const realm: Realm = 'application';
        const links = stores.map(() => linkRecord(w.deps, { realm, externalSubject: 'same-user' }));
        const outcomes = await Promise.all(links.map((l, i) => (stores[i] as Store).createLink(l, linkedEvent(w.deps, l))));
        assert.equal(outcomes.filter((o) => o === 'created').length, 1);
        assert.equal((await w.store.listLinks({ realm })).length, 1);
        assert.equal((await allEvents(w.store)).filter((e) => e.type === 'link.created').length, 1);
      }));
  });
}

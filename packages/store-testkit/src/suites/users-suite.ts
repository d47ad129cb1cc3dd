import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type AuditEventDraft,
  type AuthDeps,
  auditDraft,
  newId,
  type Realm,
  sha256Hex,
  type UserActor,
  updateUser,
  verifyAuditChain,
} from '@svc/core';
import {
  defaultUser,
  type GroupRecord,
  type LinkRecord,
  newSessionRecord,
  type PairingIntentRecord,
  SCIM_TOKEN_USE_RESOLUTION_MS,
  type ScimTokenRecord,
  type Store,
  type UserRecord,
} from '@svc/core/store';
import {
  allEvents,
  auditLength,
  bootstrapAdmin,
  createStoreSession,
  deviceRecord,
  enrollDevice,
  enrolledEvent,
  eventTypes,
  intentCreator,
  mintPair,
  minutes,
  NO_ATTRIBUTES,
  settle,
} from '../fixtures.js';
import type { SuiteContext, World } from '../harness.js';
import { RACERS } from './concurrency-suite.js';
import { linkRecord } from './links-suite.js';

/** A user as a use case builds it: active, no attributes unless given. */
function userRecord(deps: AuthDeps, over: Partial<UserRecord> = {}): UserRecord {
  const now = deps.clock.now();
  return { ...defaultUser({ subject: newId('subject', deps.clock, deps.random), realm: 'application', now }), ...over };
}

function userEvent(
  deps: AuthDeps,
  type: 'user.created' | 'user.updated' | 'user.disabled' | 'user.removed',
  user: UserRecord,
): AuditEventDraft {
  return auditDraft(deps, type, { realm: user.realm, subject: user.subject, data: { via: 'testkit' } });
}

/** Creates `user` at the store (asserting it is created) and answers it. */
async function addUser(deps: AuthDeps, over: Partial<UserRecord> = {}, store: Store = deps.store): Promise<UserRecord> {
  const user = userRecord(deps, over);
  assert.equal(await store.createUser(user, userEvent(deps, 'user.created', user)), 'created');
  return user;
}

/** Sets a user's status through changeUser, as updateUser does (revoking sessions on a disable). */
async function setStatus(deps: AuthDeps, subject: string, status: 'active' | 'disabled', store: Store = deps.store) {
  const now = deps.clock.now();
  const outcome = await store.changeUser({ subject, now }, (current) => ({
    kind: 'update',
    user: { ...current, status, disabledAt: status === 'disabled' ? now : null, updatedAt: now },
    revokeSessions: status === 'disabled' ? 'user_disabled' : null,
    events: [userEvent(deps, status === 'disabled' ? 'user.disabled' : 'user.updated', current)],
  }));
  assert.equal(outcome.kind, 'updated');
  return outcome;
}

function linkedEvent(deps: AuthDeps, link: LinkRecord): AuditEventDraft {
  return auditDraft(deps, 'link.created', {
    realm: link.realm,
    subject: link.subject,
    deviceId: link.id,
    data: { provider: link.provider },
  });
}

/** A link of `subject` created at the store. */
async function addLink(deps: AuthDeps, over: Partial<LinkRecord>): Promise<LinkRecord> {
  const link = linkRecord(deps, over);
  assert.equal(await deps.store.createLink(link, linkedEvent(deps, link)), 'created');
  return link;
}

/** A session of `link` at the store, as finishProviderFlow makes it. */
async function linkSession(deps: AuthDeps, link: LinkRecord, refresh?: Parameters<Store['createLinkSession']>[0]['refresh']) {
  const now = deps.clock.now();
  const id = newId('session', deps.clock, deps.random);
  const pair = mintPair(deps, id);
  const session = newSessionRecord({ id, device: link, now, expiresAt: now + minutes(60), pair: pair.digests, amr: ['fed'] });
  const outcome = await deps.store.createLinkSession(
    { session, pair: pair.digests, counter: null, now, ...(refresh === undefined ? {} : { refresh }) },
    [
      auditDraft(deps, 'provider.signin', { realm: link.realm, subject: link.subject, deviceId: link.id, sessionId: id }),
      auditDraft(deps, 'session.created', { realm: link.realm, subject: link.subject, deviceId: link.id, sessionId: id }),
    ],
  );
  return { outcome, session, pair };
}

/** A live pairing intent for `subject`, stored with its event. */
async function pairingIntent(deps: AuthDeps, subject: string, realm: Realm, createdBy?: string): Promise<PairingIntentRecord> {
  const now = deps.clock.now();
  const intent: PairingIntentRecord = {
    id: newId('intent', deps.clock, deps.random),
    realm,
    subject,
    name: null,
    codeDigest: sha256Hex(`code ${newId('event', deps.clock, deps.random)}`),
    createdAt: now,
    expiresAt: now + minutes(15),
    createdBy: createdBy ?? (await intentCreator(deps)),
    failures: 0,
    completedAt: null,
    burnedAt: null,
    deviceId: null,
    preparedByNode: null,
  };
  await deps.store.createPairingIntent(intent, auditDraft(deps, 'pairing.prepared', { data: { intent_id: intent.id } }));
  return intent;
}

function groupRecord(deps: AuthDeps, over: Partial<GroupRecord> = {}): GroupRecord {
  const now = deps.clock.now();
  return {
    id: newId('group', deps.clock, deps.random),
    realm: 'application',
    name: 'ops',
    externalId: null,
    createdAt: now,
    updatedAt: now,
    ...over,
  };
}

const ACTOR: UserActor = { via: 'cli', subject: null, session: null };

async function peers(w: World): Promise<Store[]> {
  const stores: Store[] = [w.store];
  const peer = await w.peer();
  if (peer !== null) stores.push(peer);
  return stores;
}

/** Users, groups and SCIM tokens at the store: the contract 8 operations, with their race. */
export function usersSuite(ctx: SuiteContext): void {
  describe('users, groups and SCIM tokens at the store', () => {
    test('createUser stores a user with its event; a second user of the subject is `exists`, a taken userName `user_name_taken`, nothing written', () =>
      ctx.world(async ({ deps, store }) => {
        const before = await auditLength(store);
        const ada = await addUser(deps, {
          userName: 'ada',
          externalId: 'ext-1',
          name: 'Ada Lovelace',
          nameSource: 'scim',
          email: 'ada@example.com',
          emailVerified: true,
          emailSource: 'scim',
          groups: ['dev', 'ops'],
          groupsSource: 'scim',
        });
        assert.deepEqual(await store.getUser(ada.subject), ada);
        assert.equal(await store.getUser('sub_01KAQ00000000000000000000Z'), null);
        assert.equal(await auditLength(store), before + 1);
        const twin = { ...ada, userName: 'other' };
        assert.equal(await store.createUser(twin, userEvent(deps, 'user.created', twin)), 'exists');
        const clash = userRecord(deps, { userName: 'ada' });
        assert.equal(await store.createUser(clash, userEvent(deps, 'user.created', clash)), 'user_name_taken');
        assert.equal(await store.getUser(clash.subject), null);
        assert.equal(await auditLength(store), before + 1, 'refused creations write nothing');
        assert.deepEqual(await store.getUser(ada.subject), ada, 'the existing user is left as it was');
        // userName is unique per realm; users without one never clash.
        await addUser(deps, { realm: 'management', userName: 'ada' });
        await addUser(deps);
        await addUser(deps);
        assert.equal((await store.listUsers({ limit: 10 })).length, 4);
      }));

    test('listUsers filters by realm, status, group, email, userName, externalId and text, ordered by subject, paged with after and limit', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const made: UserRecord[] = [];
        const add = async (over: Partial<UserRecord>) => {
          clock.advance(1);
          made.push(await addUser(deps, over));
          return made.at(-1) as UserRecord;
        };
        const ada = await add({ name: 'Ada Lovelace', email: 'ada@example.com', userName: 'ada', externalId: 'x-ada', groups: ['ops'] });
        const bob = await add({ name: 'Bob', email: 'bob@corp.example', groups: ['devops'] });
        const cy = await add({ name: 'Cy 100%_sure', userName: 'CYRIL', groups: ['ops.eu'], status: 'disabled', disabledAt: clock.now() });
        const dee = await add({ realm: 'management', name: 'Dee', email: 'ada@example.com', groups: ['ops'] });
        const eve = await add({ name: 'ÉVE', email: null, groups: [] });
        const subjects = (users: readonly UserRecord[]) => users.map((u) => u.subject);
        const list = async (filter: Omit<Parameters<Store['listUsers']>[0], 'limit'>) =>
          subjects(await store.listUsers({ limit: 100, ...filter }));
        assert.deepEqual(await list({}), subjects(made), 'ordered by subject (creation order)');
        assert.deepEqual(await list({ realm: 'application' }), subjects([ada, bob, cy, eve]));
        assert.deepEqual(await list({ realm: 'management' }), subjects([dee]));
        assert.deepEqual(await list({ status: 'disabled' }), subjects([cy]));
        assert.deepEqual(await list({ status: 'active', realm: 'application' }), subjects([ada, bob, eve]));
        assert.deepEqual(await list({ group: 'ops' }), subjects([ada, dee]), 'a group matches by its whole name, not a part');
        assert.deepEqual(await list({ group: 'op' }), []);
        assert.deepEqual(await list({ group: 'ops', realm: 'application' }), subjects([ada]));
        assert.deepEqual(await list({ email: 'ada@example.com' }), subjects([ada, dee]));
        assert.deepEqual(await list({ email: 'ADA@example.com' }), [], 'email is exact');
        assert.deepEqual(await list({ userName: 'ada' }), subjects([ada]));
        assert.deepEqual(await list({ userName: 'cyril' }), [], 'userName is exact');
        assert.deepEqual(await list({ externalId: 'x-ada' }), subjects([ada]));
        assert.deepEqual(await list({ externalId: 'x-' }), []);
        // text: a substring of the name, email or userName, ASCII letters without case.
        assert.deepEqual(await list({ text: 'LOVE' }), subjects([ada]));
        assert.deepEqual(await list({ text: 'CORP.EX' }), subjects([bob]));
        assert.deepEqual(await list({ text: 'cyr' }), subjects([cy]), 'the userName is searched');
        assert.deepEqual(await list({ text: 'ada@' }), subjects([ada, dee]));
        assert.deepEqual(await list({ text: 'ada@', realm: 'management' }), subjects([dee]));
        assert.deepEqual(await list({ text: '%_' }), subjects([cy]), '% and _ are plain characters, not wildcards');
        assert.deepEqual(await list({ text: '_' }), subjects([cy]));
        assert.deepEqual(await list({ text: 'o%' }), []);
        assert.deepEqual(await list({ text: 'éve' }), [], 'only ASCII letters are compared without case');
        assert.deepEqual(await list({ text: 'ÉVE' }), subjects([eve]));
        assert.deepEqual(await list({ text: 'nobody' }), []);
        // Paging: after a subject, at most `limit`.
        assert.deepEqual(subjects(await store.listUsers({ limit: 2 })), subjects([ada, bob]));
        assert.deepEqual(subjects(await store.listUsers({ limit: 2, after: bob.subject })), subjects([cy, dee]));
        assert.deepEqual(subjects(await store.listUsers({ limit: 2, after: dee.subject })), subjects([eve]));
        assert.deepEqual(subjects(await store.listUsers({ limit: 2, after: eve.subject })), []);
        assert.deepEqual(
          subjects(await store.listUsers({ limit: 1, after: ada.subject, realm: 'application', group: 'ops.eu' })),
          subjects([cy]),
        );
      }));

    test('the subject of a first credential gets a user (active, no attributes): bootstrap, enrollment, pairing and link alike; an existing user is kept', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const admin = await bootstrapAdmin(deps);
        assert.deepEqual(
          await store.getUser(admin.device.subject),
          defaultUser({ subject: admin.device.subject, realm: 'management', now: admin.device.createdAt }),
        );
        const { device } = await enrollDevice(deps, 'application');
        assert.deepEqual(
          await store.getUser(device.subject),
          defaultUser({ subject: device.subject, realm: 'application', now: device.createdAt }),
        );
        // A second device of a subject that has a user (with attributes) leaves it as it is.
        clock.advance(1000);
        const ada = await addUser(deps, { name: 'Ada', nameSource: 'operator' });
        clock.advance(1000);
        const second = { ...deviceRecord(deps, 'application'), subject: ada.subject };
        assert.equal(await store.enrollDevice(second, enrolledEvent(deps, second)), 'enrolled');
        assert.deepEqual(await store.getUser(ada.subject), ada);
        // Pairing.
        const intent = await pairingIntent(deps, newId('subject', deps.clock, deps.random), 'application');
        const paired = { ...deviceRecord(deps, 'application'), subject: intent.subject };
        const completed = await store.completePairing(
          { id: intent.id, codeDigest: intent.codeDigest, now: clock.now(), device: paired },
          auditDraft(deps, 'pairing.completed', { data: { intent_id: intent.id } }),
        );
        assert.equal(completed.kind, 'completed');
        assert.deepEqual(
          await store.getUser(intent.subject),
          defaultUser({ subject: intent.subject, realm: 'application', now: paired.createdAt }),
        );
        // A link.
        const link = await addLink(deps, { realm: 'management' });
        assert.deepEqual(
          await store.getUser(link.subject),
          defaultUser({ subject: link.subject, realm: 'management', now: link.createdAt }),
        );
        // A bootstrap token consumed at the store.
        const boot = {
          id: newId('bootstrap', clock, deps.random),
          digest: sha256Hex('svcb_testkit'),
          createdAt: clock.now(),
          expiresAt: clock.now() + minutes(10),
        };
        await store.issueBootstrapToken(boot, auditDraft(deps, 'bootstrap.issued', {}));
        const bootDevice = deviceRecord(deps, 'management');
        const consumed = await store.consumeBootstrapToken(
          { digest: boot.digest, now: clock.now(), device: bootDevice },
          enrolledEvent(deps, bootDevice),
        );
        assert.equal(consumed.kind, 'enrolled');
        assert.equal((await store.getUser(bootDevice.subject))?.status, 'active');
      }));

    test('createLink with a user (just-in-time) creates it with its attributes; a link to a disabled user is `user_disabled`, nothing written', () =>
      ctx.world(async ({ deps, store }) => {
        const subject = newId('subject', deps.clock, deps.random);
        const jit = userRecord(deps, {
          subject,
          name: 'Ada',
          nameSource: 'provider:corp',
          email: 'ada@example.com',
          emailSource: 'provider:corp',
        });
        const link = linkRecord(deps, { subject });
        assert.equal(await store.createLink(link, linkedEvent(deps, link), undefined, jit), 'created');
        assert.deepEqual(await store.getUser(subject), jit);
        // A second link of the subject with another user keeps the first one.
        const again = linkRecord(deps, { subject });
        assert.equal(await store.createLink(again, linkedEvent(deps, again), undefined, { ...jit, name: 'Other' }), 'created');
        assert.equal((await store.getUser(subject))?.name, 'Ada');
        // A disabled user gets no new link, with or without a pairing intent.
        await setStatus(deps, subject, 'disabled');
        const before = await auditLength(store);
        const refused = linkRecord(deps, { subject });
        assert.equal(await store.createLink(refused, linkedEvent(deps, refused)), 'user_disabled');
        const intent = await pairingIntent(deps, subject, 'application');
        const viaIntent = linkRecord(deps, { subject });
        assert.equal(
          await store.createLink(viaIntent, linkedEvent(deps, viaIntent), {
            id: intent.id,
            codeDigest: intent.codeDigest,
            now: deps.clock.now(),
          }),
          'user_disabled',
        );
        assert.equal(await store.getLink(refused.id), null);
        assert.equal(await store.getLink(viaIntent.id), null);
        assert.equal((await store.getPairingIntent(intent.id))?.completedAt, null, 'the intent stays live');
        assert.equal(await auditLength(store), before + 2, 'only the intent (and its creator, a user) was written');
      }));

    test('createSession answers `device_inactive` or `user_disabled` (nothing written) and records the sign-in as lastSignInAt', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        clock.advance(5000);
        const { session } = await createStoreSession(deps, device);
        assert.equal((await store.getUser(device.subject))?.lastSignInAt, session.createdAt);
        await setStatus(deps, device.subject, 'disabled');
        const before = await auditLength(store);
        const id = newId('session', deps.clock, deps.random);
        const pair = mintPair(deps, id);
        const refused = newSessionRecord({ id, device, now: clock.now(), expiresAt: clock.now() + minutes(60), pair: pair.digests });
        const event = auditDraft(deps, 'session.created', { sessionId: id });
        assert.equal(await store.createSession(refused, pair.digests, event), 'user_disabled');
        assert.equal(await store.getSession(id), null);
        assert.equal(await auditLength(store), before);
        assert.equal((await store.getUser(device.subject))?.lastSignInAt, session.createdAt, 'a refused sign-in is not recorded');
        await setStatus(deps, device.subject, 'active');
        clock.advance(5000);
        const later = await createStoreSession(deps, device);
        assert.equal((await store.getUser(device.subject))?.lastSignInAt, later.session.createdAt);
      }));

    test("the bearer check reads the session's user attributes with it, fresh after each change, and null once the user is gone", () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        const { session, pair } = await createStoreSession(deps, device);
        const check = () => store.findSessionByAccessDigest(session.id, pair.digests.accessDigest);
        assert.deepEqual((await check())?.user, NO_ATTRIBUTES);
        const changed = await store.changeUser({ subject: device.subject, now: clock.now() }, (current) => ({
          kind: 'update',
          user: {
            ...current,
            name: 'Ada',
            nameSource: 'operator',
            email: 'ada@example.com',
            emailVerified: true,
            emailSource: 'operator',
            groups: ['dev', 'ops'],
            groupsSource: 'operator',
          },
          revokeSessions: null,
          events: [userEvent(deps, 'user.updated', current)],
        }));
        assert.equal(changed.kind, 'updated');
        assert.deepEqual((await check())?.user, { name: 'Ada', email: 'ada@example.com', emailVerified: true, groups: ['dev', 'ops'] });
        assert.equal((await check())?.revokedAt, null, 'an update without revokeSessions revokes nothing');
        assert.equal((await store.getSession(session.id))?.id, session.id);
        await store.changeUser({ subject: device.subject, now: clock.now() }, () => ({ kind: 'remove', events: [] }));
        const after = await check();
        assert.equal(after?.user, null, 'no user: null');
        assert.equal(after?.revokedReason, 'user_removed');
      }));

    test('changeUser update writes the user and its events in order; `none` and an unknown subject write nothing', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const ada = await addUser(deps, { userName: 'ada' });
        clock.advance(1000);
        const before = await auditLength(store);
        const next: UserRecord = { ...ada, name: 'Ada', nameSource: 'operator', userName: 'ada.l', updatedAt: clock.now() };
        const events = [userEvent(deps, 'user.updated', ada), userEvent(deps, 'user.disabled', ada)];
        let seen: unknown;
        const outcome = await store.changeUser({ subject: ada.subject, now: clock.now() }, (current, context) => {
          seen = { current, context };
          return { kind: 'update', user: next, revokeSessions: null, events };
        });
        assert.deepEqual(seen, { current: ada, context: { otherActiveManagementUsers: 0 } });
        assert.deepEqual(outcome, { kind: 'updated', user: next, revokedSessions: 0, burnedIntents: 0 });
        assert.deepEqual(await store.getUser(ada.subject), next);
        const appended = (await allEvents(store)).slice(before);
        assert.deepEqual(
          appended.map((e) => e.id),
          events.map((e) => e.id),
          'the events, in order',
        );
        assert.equal(verifyAuditChain(await allEvents(store)).ok, true);
        // The old userName is free again; the new one is taken.
        await addUser(deps, { userName: 'ada' });
        assert.equal(
          await store.createUser(userRecord(deps, { userName: 'ada.l' }), userEvent(deps, 'user.created', ada)),
          'user_name_taken',
        );
        const length = await auditLength(store);
        assert.deepEqual(await store.changeUser({ subject: ada.subject, now: clock.now() }, () => ({ kind: 'none' })), {
          kind: 'none',
          user: next,
        });
        let called = false;
        const unknown = await store.changeUser({ subject: 'sub_01KAQ00000000000000000000Z', now: clock.now() }, () => {
          called = true;
          return { kind: 'none' };
        });
        assert.deepEqual(unknown, { kind: 'unknown' });
        assert.equal(called, false, 'no decision without a user');
        assert.equal(await auditLength(store), length);
      }));

    test("changeUser refuses an update taking another user's userName (`user_name_taken`), and a throwing decision rolls everything back", () =>
      ctx.world(async ({ deps, store, clock }) => {
        await addUser(deps, { userName: 'taken' });
        const { device } = await enrollDevice(deps, 'application');
        const { session } = await createStoreSession(deps, device);
        const current = (await store.getUser(device.subject)) as UserRecord;
        const before = await auditLength(store);
        const taken = await store.changeUser({ subject: device.subject, now: clock.now() }, (u) => ({
          kind: 'update',
          user: { ...u, userName: 'taken' },
          revokeSessions: 'user_disabled',
          events: [userEvent(deps, 'user.updated', u)],
        }));
        assert.deepEqual(taken, { kind: 'user_name_taken' });
        const refusal = new Error('refused by the decision');
        await assert.rejects(
          store.changeUser({ subject: device.subject, now: clock.now() }, () => {
            throw refusal;
          }),
          (e: unknown) => e === refusal,
        );
        assert.deepEqual(await store.getUser(device.subject), current);
        assert.equal((await store.getSession(session.id))?.revokedAt, null);
        assert.equal(await auditLength(store), before, 'no event');
        // The store still works after the rollback.
        await setStatus(deps, device.subject, 'disabled');
        assert.equal((await store.getSession(session.id))?.revokedReason, 'user_disabled');
      }));

    test('changeUser with revokeSessions revokes every live session of the subject (devices and links) with that reason, and only those', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        const second = { ...deviceRecord(deps, 'application'), subject: device.subject };
        await store.enrollDevice(second, enrolledEvent(deps, second));
        const link = await addLink(deps, { subject: device.subject });
        const a = await createStoreSession(deps, device);
        const b = await createStoreSession(deps, second);
        const l = await linkSession(deps, link);
        assert.equal(l.outcome.kind, 'created');
        const ended = await createStoreSession(deps, device);
        await store.revokeSession(
          { sessionId: ended.session.id, now: clock.now(), reason: 'logout' },
          auditDraft(deps, 'session.revoked', {}),
        );
        const other = await enrollDevice(deps, 'application');
        const bystander = await createStoreSession(deps, other.device);
        // Cached by the bearer check first, where a store caches: the revocation must still show.
        assert.equal((await store.findSessionByAccessDigest(a.session.id, a.pair.digests.accessDigest))?.revokedAt, null);
        clock.advance(1000);
        const outcome = await setStatus(deps, device.subject, 'disabled');
        assert.equal(outcome.kind === 'updated' && outcome.revokedSessions, 3);
        for (const id of [a.session.id, b.session.id, l.session.id]) {
          const s = await store.getSession(id);
          assert.equal(s?.revokedAt, clock.now());
          assert.equal(s?.revokedReason, 'user_disabled');
        }
        assert.equal((await store.findSessionByAccessDigest(a.session.id, a.pair.digests.accessDigest))?.revokedReason, 'user_disabled');
        assert.equal((await store.getSession(ended.session.id))?.revokedReason, 'logout', 'an ended session keeps its reason');
        assert.equal((await store.getSession(bystander.session.id))?.revokedAt, null);
        assert.deepEqual(await store.listActiveSessions({ now: clock.now(), subject: device.subject }), []);
        // Devices and links stay: a disabled user may be enabled again.
        assert.equal((await store.getDevice(device.id))?.removedAt, null);
        assert.equal((await store.getLink(link.id))?.removedAt, null);
      }));

    test('changeUser remove marks the devices and links removed, revokes the live sessions (user_removed) and deletes the user, with its events', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device } = await enrollDevice(deps, 'application');
        const link = await addLink(deps, { subject: device.subject });
        const a = await createStoreSession(deps, device);
        const l = await linkSession(deps, link);
        const other = await enrollDevice(deps, 'application');
        const bystander = await createStoreSession(deps, other.device);
        clock.advance(1000);
        const before = await auditLength(store);
        const event = userEvent(deps, 'user.removed', (await store.getUser(device.subject)) as UserRecord);
        const outcome = await store.changeUser({ subject: device.subject, now: clock.now() }, () => ({ kind: 'remove', events: [event] }));
        assert.deepEqual(outcome, { kind: 'removed', revokedSessions: 2, removedDevices: 1, removedLinks: 1, burnedIntents: 0 });
        assert.equal(await store.getUser(device.subject), null);
        assert.equal((await store.getDevice(device.id))?.removedAt, clock.now());
        assert.equal((await store.getLink(link.id))?.removedAt, clock.now());
        for (const id of [a.session.id, l.session.id]) assert.equal((await store.getSession(id))?.revokedReason, 'user_removed');
        assert.equal((await store.getSession(bystander.session.id))?.revokedAt, null);
        assert.equal((await store.getDevice(other.device.id))?.removedAt, null);
        assert.deepEqual(
          (await allEvents(store)).slice(before).map((e) => e.id),
          [event.id],
        );
        assert.equal(await store.findDeviceByPublicKey(device.publicKey), null);
        assert.deepEqual((await linkSession(deps, link)).outcome, { kind: 'link_removed' });
        assert.deepEqual(await store.changeUser({ subject: device.subject, now: clock.now() }, () => ({ kind: 'remove', events: [] })), {
          kind: 'unknown',
        });
      }));

    test('otherActiveManagementUsers counts only the other active management users holding an active device or a live link', () =>
      ctx.world(async ({ deps, store }) => {
        const context = async (subject: string) => {
          let seen: number | undefined;
          await store.changeUser({ subject, now: deps.clock.now() }, (_, c) => {
            seen = c.otherActiveManagementUsers;
            return { kind: 'none' };
          });
          return seen;
        };
        const self = (await enrollDevice(deps, 'management')).device;
        assert.equal(await context(self.subject), 0, 'alone');
        await enrollDevice(deps, 'management'); // counts: a device
        const viaLink = await addLink(deps, { realm: 'management' }); // counts: a live link
        const removed = (await enrollDevice(deps, 'management')).device; // its only device removed: does not count
        await store.removeDevice({ deviceId: removed.id, now: deps.clock.now() }, auditDraft(deps, 'device.removed', {}));
        const unlinked = await addLink(deps, { realm: 'management' }); // its only link removed: does not count
        await store.removeLink({ linkId: unlinked.id, now: deps.clock.now() }, auditDraft(deps, 'link.removed', {}));
        const disabled = (await enrollDevice(deps, 'management')).device; // disabled: does not count
        await setStatus(deps, disabled.subject, 'disabled');
        await addUser(deps, { realm: 'management' }); // no credential: does not count
        await enrollDevice(deps, 'application'); // another realm: does not count
        const twoDevices = (await enrollDevice(deps, 'management')).device; // counted once
        const more = { ...deviceRecord(deps, 'management'), subject: twoDevices.subject };
        await store.enrollDevice(more, enrolledEvent(deps, more));
        assert.equal(await context(self.subject), 3);
        assert.equal(await context(viaLink.subject), 3, 'itself excluded, the first admin counted');
        assert.equal(await context(disabled.subject), 4);
        const app = (await enrollDevice(deps, 'application')).device;
        assert.equal(await context(app.subject), 0, 'an application user: 0');
      }));

    test(`${RACERS} concurrent disables of the last ${RACERS} management users (the decision refusing the last) leave exactly one active`, () =>
      ctx.world(async (w) => {
        const stores = await peers(w);
        const admins: string[] = [];
        for (let i = 0; i < RACERS; i++) admins.push((await bootstrapAdmin(w.deps)).device.subject);
        const { values, codes } = await settle(
          admins.map((subject, i) =>
            updateUser(w.depsFor(stores[i % stores.length] ?? w.store), {
              subject,
              attributes: { status: 'disabled' },
              actor: ACTOR,
              source: 'operator',
            }),
          ),
        );
        assert.equal(values.length, RACERS - 1);
        assert.deepEqual(codes, ['last_management_user']);
        const active = await w.store.listUsers({ realm: 'management', status: 'active', limit: 1000 });
        assert.equal(active.length, 1);
        assert.equal((await eventTypes(w.store)).filter((t) => t === 'user.disabled').length, RACERS - 1);
        assert.equal(verifyAuditChain(await allEvents(w.store)).ok, true);
      }));

    test('sign-ins racing the disabling of their user never leave a live session for it', () =>
      ctx.world(async (w) => {
        const stores = await peers(w);
        const { device } = await enrollDevice(w.deps, 'application');
        const link = await addLink(w.deps, { subject: device.subject });
        // Started in this order: sign-ins before the disable and after it, on both connections.
        const attempts = Array.from({ length: RACERS }, (_, i): (() => Promise<unknown>) => {
          if (i === RACERS / 2) return () => setStatus(w.deps, device.subject, 'disabled');
          const deps = w.depsFor(stores[i % stores.length] ?? w.store);
          return i % 3 === 0 ? () => linkSession(deps, link) : () => createStoreSession(deps, device);
        });
        const results = await Promise.allSettled(attempts.map((attempt) => attempt()));
        assert.equal(results[RACERS / 2]?.status, 'fulfilled', 'the disable is done');
        assert.equal((await w.store.getUser(device.subject))?.status, 'disabled');
        assert.deepEqual(await w.store.listActiveSessions({ now: w.clock.now(), subject: device.subject }), []);
      }));

    test('a disable committed through one connection is seen by the next sign-in and bearer check on another', () =>
      ctx.world(async (w) => {
        const peer = await w.peer();
        if (peer === null) return;
        const { device } = await enrollDevice(w.deps, 'application');
        const peerDeps = w.depsFor(peer);
        const { session, pair } = await createStoreSession(peerDeps, device);
        assert.equal((await peer.findSessionByAccessDigest(session.id, pair.digests.accessDigest))?.revokedAt, null);
        await setStatus(w.deps, device.subject, 'disabled');
        assert.equal((await peer.findSessionByAccessDigest(session.id, pair.digests.accessDigest))?.revokedReason, 'user_disabled');
        await assert.rejects(createStoreSession(peerDeps, device), /: user_disabled$/);
      }));

    test("a disabled user's link sign-in is `user_disabled` and its pairing `user_disabled`: nothing written", () =>
      ctx.world(async ({ deps, store, clock }) => {
        const link = await addLink(deps, {});
        await setStatus(deps, link.subject, 'disabled');
        const before = await auditLength(store);
        let refreshed = false;
        const { outcome, session } = await linkSession(deps, link, () => {
          refreshed = true;
          return null;
        });
        assert.deepEqual(outcome, { kind: 'user_disabled' });
        assert.equal(refreshed, false, 'no refresh for a disabled user');
        assert.equal(await store.getSession(session.id), null);
        assert.equal((await store.getLink(link.id))?.lastUsedAt, null, 'the link is not used');
        const intent = await pairingIntent(deps, link.subject, 'application');
        const device = { ...deviceRecord(deps, 'application'), subject: link.subject };
        const completion = await store.completePairing(
          { id: intent.id, codeDigest: intent.codeDigest, now: clock.now(), device },
          auditDraft(deps, 'pairing.completed', { data: { intent_id: intent.id } }),
        );
        assert.deepEqual(completion, { kind: 'user_disabled' });
        assert.equal(await store.getDevice(device.id), null);
        assert.deepEqual(await store.getPairingIntent(intent.id), intent, 'the intent stays live');
        assert.equal(await auditLength(store), before + 2, 'only the intent (and its creator, a user) was written');
        assert.equal((await store.getUser(link.subject))?.lastSignInAt, null);
      }));

    test("attack: a disabled admin's own intent, prepared before the disable, enrolls nothing: the disable burns every live intent by or for them", () =>
      ctx.world(async ({ deps, store, clock }) => {
        const admin = await intentCreator(deps);
        const other = await intentCreator(deps);
        const forNewcomer = await pairingIntent(deps, newId('subject', deps.clock, deps.random), 'management', admin);
        const forAdmin = await pairingIntent(deps, admin, 'management', other);
        const unrelated = await pairingIntent(deps, newId('subject', deps.clock, deps.random), 'application', other);
        assert.equal((await store.getUser(forNewcomer.subject))?.status, 'active', "the new subject's user comes with its intent");
        clock.advance(1000);
        const before = await auditLength(store);
        const disabled = await setStatus(deps, admin, 'disabled');
        assert.equal(disabled.kind === 'updated' ? disabled.burnedIntents : null, 2, 'the intents by and for the admin');
        assert.equal(await auditLength(store), before + 1, 'the disable appends its own events only');
        assert.equal((await store.getPairingIntent(forNewcomer.id))?.burnedAt, clock.now());
        assert.equal((await store.getPairingIntent(forAdmin.id))?.burnedAt, clock.now());
        assert.deepEqual(await store.getPairingIntent(unrelated.id), unrelated, "another admin's intent stays live");
        const device = { ...deviceRecord(deps, 'management'), subject: forNewcomer.subject };
        const complete = (intent: PairingIntentRecord, d = device) =>
          store.completePairing(
            { id: intent.id, codeDigest: intent.codeDigest, now: clock.now(), device: d },
            auditDraft(deps, 'pairing.completed', { data: { intent_id: intent.id } }),
          );
        assert.deepEqual(await complete(forNewcomer), { kind: 'invalid' });
        assert.deepEqual(await complete(forAdmin, { ...device, subject: admin }), { kind: 'invalid' });
        const link = linkRecord(deps, { subject: forNewcomer.subject, realm: 'management' });
        const linked = await store.createLink(link, linkedEvent(deps, link), {
          id: forNewcomer.id,
          codeDigest: forNewcomer.codeDigest,
          now: clock.now(),
        });
        assert.equal(linked, 'intent_invalid');
        // Enabled again, the admin's old intents stay burned.
        await setStatus(deps, admin, 'active');
        assert.deepEqual(await complete(forNewcomer), { kind: 'invalid' });
        assert.equal(await store.getDevice(device.id), null);
        assert.equal(await store.getLink(link.id), null);
      }));

    test('attack: an intent whose creator is disabled or gone completes nothing, even one the disable did not burn', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const admin = await intentCreator(deps);
        await setStatus(deps, admin, 'disabled');
        // Stored after the disable (no use case would): the completion itself refuses it.
        const byDisabled = await pairingIntent(deps, newId('subject', deps.clock, deps.random), 'management', admin);
        const byGone = await pairingIntent(deps, newId('subject', deps.clock, deps.random), 'management', 'sub_01KAQ0000000000000000GONE');
        const complete = (intent: PairingIntentRecord) => {
          const device = { ...deviceRecord(deps, 'management'), subject: intent.subject };
          return store.completePairing(
            { id: intent.id, codeDigest: intent.codeDigest, now: clock.now(), device },
            auditDraft(deps, 'pairing.completed', { data: { intent_id: intent.id } }),
          );
        };
        const before = await auditLength(store);
        assert.deepEqual(await complete(byDisabled), { kind: 'user_disabled' });
        assert.deepEqual(await complete(byGone), { kind: 'invalid' });
        const link = (intent: PairingIntentRecord) => {
          const l = linkRecord(deps, { subject: intent.subject, realm: 'management' });
          return store.createLink(l, linkedEvent(deps, l), { id: intent.id, codeDigest: intent.codeDigest, now: clock.now() });
        };
        assert.equal(await link(byDisabled), 'user_disabled');
        assert.equal(await link(byGone), 'intent_invalid');
        assert.equal(await auditLength(store), before, 'nothing written');
        assert.equal((await store.getPairingIntent(byDisabled.id))?.completedAt, null);
        assert.deepEqual(await store.listDevices({ subject: byDisabled.subject }), []);
        assert.deepEqual(await store.listLinks({ subject: byGone.subject }), []);
      }));

    test('attack: a removed user does not come back through an intent prepared for them (or by them) before the removal', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { device: first } = await enrollDevice(deps, 'application');
        const subject = first.subject;
        const forUser = await pairingIntent(deps, subject, 'application');
        const linkForUser = await pairingIntent(deps, subject, 'application');
        const admin = await intentCreator(deps);
        const byAdmin = await pairingIntent(deps, newId('subject', deps.clock, deps.random), 'application', admin);
        clock.advance(1000);
        const removed = await store.changeUser({ subject, now: clock.now() }, (current) => ({
          kind: 'remove',
          events: [userEvent(deps, 'user.removed', current)],
        }));
        assert.equal(removed.kind === 'removed' ? removed.burnedIntents : null, 2);
        const gone = await store.changeUser({ subject: admin, now: clock.now() }, () => ({ kind: 'remove', events: [] }));
        assert.equal(gone.kind === 'removed' ? gone.burnedIntents : null, 1);
        const before = await auditLength(store);
        const device = { ...deviceRecord(deps, 'application'), subject };
        const completed = await store.completePairing(
          { id: forUser.id, codeDigest: forUser.codeDigest, now: clock.now(), device },
          auditDraft(deps, 'pairing.completed', { data: { intent_id: forUser.id } }),
        );
        assert.deepEqual(completed, { kind: 'invalid' });
        const link = linkRecord(deps, { subject });
        const linked = await store.createLink(link, linkedEvent(deps, link), {
          id: linkForUser.id,
          codeDigest: linkForUser.codeDigest,
          now: clock.now(),
        });
        assert.equal(linked, 'intent_invalid');
        const other = { ...deviceRecord(deps, 'application'), subject: byAdmin.subject };
        const byRemovedAdmin = await store.completePairing(
          { id: byAdmin.id, codeDigest: byAdmin.codeDigest, now: clock.now(), device: other },
          auditDraft(deps, 'pairing.completed', { data: { intent_id: byAdmin.id } }),
        );
        assert.deepEqual(byRemovedAdmin, { kind: 'invalid' });
        assert.equal(await store.getUser(subject), null, 'the removed user is not recreated');
        assert.equal(await store.getDevice(device.id), null);
        assert.equal(await store.getLink(link.id), null);
        assert.equal(await auditLength(store), before, 'nothing written');
      }));

    test("createLinkSession's refresh writes the user and its events after the sign-in's, in the same transaction; a throwing refresh writes nothing", () =>
      ctx.world(async ({ deps, store, clock }) => {
        const link = await addLink(deps, {});
        clock.advance(1000);
        let given: UserRecord | null | undefined;
        let refreshEvent: AuditEventDraft | undefined;
        const before = await auditLength(store);
        const first = await linkSession(deps, link, (current) => {
          given = current;
          if (current === null) return null;
          refreshEvent = userEvent(deps, 'user.updated', current);
          return {
            user: {
              ...current,
              name: 'Ada',
              nameSource: 'provider:corp',
              groups: ['dev'],
              groupsSource: 'provider:corp',
              updatedAt: clock.now(),
            },
            events: [refreshEvent],
          };
        });
        assert.deepEqual(first.outcome, { kind: 'created' });
        assert.deepEqual(
          given,
          defaultUser({ subject: link.subject, realm: link.realm, now: link.createdAt }),
          'called with the user as stored',
        );
        const user = await store.getUser(link.subject);
        assert.equal(user?.name, 'Ada');
        assert.deepEqual(user?.groups, ['dev']);
        assert.equal(user?.lastSignInAt, clock.now());
        assert.equal(user?.updatedAt, clock.now());
        assert.deepEqual(await eventTypes(store).then((t) => t.slice(before)), ['provider.signin', 'session.created', 'user.updated']);
        assert.equal((await allEvents(store)).at(-1)?.id, refreshEvent?.id);
        assert.deepEqual((await store.findSessionByAccessDigest(first.session.id, first.pair.digests.accessDigest))?.user, {
          name: 'Ada',
          email: null,
          emailVerified: false,
          groups: ['dev'],
        });
        // null: only the sign-in is recorded.
        clock.advance(1000);
        const second = await linkSession(deps, link, () => null);
        assert.deepEqual(second.outcome, { kind: 'created' });
        assert.deepEqual(await store.getUser(link.subject), { ...user, lastSignInAt: clock.now() });
        // A refresh that throws: nothing at all.
        clock.advance(1000);
        const length = await auditLength(store);
        const refusal = new Error('bad claims');
        await assert.rejects(
          linkSession(deps, link, () => {
            throw refusal;
          }),
          (e: unknown) => e === refusal,
        );
        assert.equal(await auditLength(store), length);
        assert.equal((await store.getUser(link.subject))?.lastSignInAt, clock.now() - 1000);
        assert.equal((await store.getLink(link.id))?.lastUsedAt, clock.now() - 1000);
        assert.equal((await store.listActiveSessions({ now: clock.now(), subject: link.subject })).length, 2);
      }));

    test('listGroups lists group records and the names users carry, with member counts, sorted by realm then name', () =>
      ctx.world(async ({ deps, store }) => {
        const ops = groupRecord(deps, { name: 'ops' });
        const empty = groupRecord(deps, { name: 'auditors' });
        const mgmt = groupRecord(deps, { name: 'ops', realm: 'management' });
        for (const g of [ops, empty, mgmt])
          assert.equal(await store.saveGroup(g, auditDraft(deps, 'group.saved', { realm: g.realm })), 'saved');
        await addUser(deps, { groups: ['dev', 'ops'] });
        await addUser(deps, { groups: ['ops'] });
        await addUser(deps, { groups: ['zeta'] });
        await addUser(deps, { realm: 'management', groups: ['admins'] });
        const app = [
          { realm: 'application', name: 'auditors', id: empty.id, members: 0 },
          { realm: 'application', name: 'dev', id: null, members: 1 },
          { realm: 'application', name: 'ops', id: ops.id, members: 2 },
          { realm: 'application', name: 'zeta', id: null, members: 1 },
        ];
        const management = [
          { realm: 'management', name: 'admins', id: null, members: 1 },
          { realm: 'management', name: 'ops', id: mgmt.id, members: 0 },
        ];
        assert.deepEqual(await store.listGroups({ realm: 'application' }), app);
        assert.deepEqual(await store.listGroups({ realm: 'management' }), management);
        assert.deepEqual(await store.listGroups({}), [...app, ...management]);
        assert.deepEqual(await store.getGroup(ops.id), ops);
        assert.equal(await store.getGroup('grp_01KAQ00000000000000000000Z'), null);
      }));

    test('saveGroup inserts or replaces by id; another record of the realm with that name is `name_taken`, nothing written', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const ops = groupRecord(deps, { name: 'ops', externalId: 'dir-1' });
        const before = await auditLength(store);
        assert.equal(await store.saveGroup(ops, auditDraft(deps, 'group.saved', {})), 'saved');
        clock.advance(1000);
        const renamed = { ...ops, name: 'operations', updatedAt: clock.now() };
        assert.equal(await store.saveGroup(renamed, auditDraft(deps, 'group.saved', {})), 'saved');
        assert.deepEqual(await store.getGroup(ops.id), renamed);
        assert.equal(await store.saveGroup(renamed, auditDraft(deps, 'group.saved', {})), 'saved', 'saving unchanged is fine');
        assert.equal(await auditLength(store), before + 3);
        const clash = groupRecord(deps, { name: 'operations' });
        assert.equal(await store.saveGroup(clash, auditDraft(deps, 'group.saved', {})), 'name_taken');
        assert.equal(await store.getGroup(clash.id), null);
        assert.equal(await auditLength(store), before + 3);
        assert.equal(
          await store.saveGroup(groupRecord(deps, { name: 'operations', realm: 'management' }), auditDraft(deps, 'group.saved', {})),
          'saved',
        );
        assert.equal(
          await store.saveGroup(groupRecord(deps, { name: 'ops' }), auditDraft(deps, 'group.saved', {})),
          'saved',
          'the old name is free',
        );
      }));

    test("deleteGroup deletes the record and takes its name out of every user of the realm (not the other realm's), with its event", () =>
      ctx.world(async ({ deps, store, clock }) => {
        const ops = groupRecord(deps, { name: 'ops' });
        await store.saveGroup(ops, auditDraft(deps, 'group.saved', {}));
        const both = await addUser(deps, { groups: ['dev', 'ops'], groupsSource: 'scim' });
        const only = await addUser(deps, { groups: ['ops'], groupsSource: 'scim' });
        const near = await addUser(deps, { groups: ['ops.eu'], groupsSource: 'scim' });
        const elsewhere = await addUser(deps, { realm: 'management', groups: ['ops'], groupsSource: 'scim' });
        // A session of `both`, checked first (cached where a store caches): the bearer check must follow.
        const device = { ...deviceRecord(deps, 'application'), subject: both.subject };
        await store.enrollDevice(device, enrolledEvent(deps, device));
        const { session, pair } = await createStoreSession(deps, device);
        assert.deepEqual((await store.findSessionByAccessDigest(session.id, pair.digests.accessDigest))?.user?.groups, ['dev', 'ops']);
        clock.advance(1000);
        const before = await auditLength(store);
        assert.equal(await store.deleteGroup({ id: ops.id, now: clock.now() }, auditDraft(deps, 'group.removed', {})), true);
        assert.equal(await store.getGroup(ops.id), null);
        const after = async (u: UserRecord) => (await store.getUser(u.subject)) as UserRecord;
        assert.deepEqual((await after(both)).groups, ['dev']);
        assert.equal((await after(both)).groupsSource, 'scim');
        assert.equal((await after(both)).updatedAt, clock.now());
        assert.deepEqual((await after(only)).groups, []);
        assert.equal((await after(only)).groupsSource, null, 'no groups left: no source');
        assert.deepEqual(await after(near), near);
        assert.deepEqual(await after(elsewhere), elsewhere);
        assert.deepEqual((await store.findSessionByAccessDigest(session.id, pair.digests.accessDigest))?.user?.groups, ['dev']);
        assert.equal(await auditLength(store), before + 1);
        assert.equal(await store.deleteGroup({ id: ops.id, now: clock.now() }, auditDraft(deps, 'group.removed', {})), false);
        assert.equal(await auditLength(store), before + 1);
      }));

    test('SCIM tokens: used by digest (lastUsedAt set), listed oldest first, revoked once, and a revoked token is not usable', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const token = (name: string): ScimTokenRecord => ({
          id: newId('scimToken', deps.clock, deps.random),
          digest: sha256Hex(`svcs_${name}`),
          name,
          createdAt: clock.now(),
          createdBy: 'sub_01KAQ00000000000000000000A',
          lastUsedAt: null,
          revokedAt: null,
        });
        const before = await auditLength(store);
        const okta = token('okta');
        await store.createScimToken(okta, auditDraft(deps, 'scim_token.created', {}));
        clock.advance(1000);
        const entra = token('entra');
        await store.createScimToken(entra, auditDraft(deps, 'scim_token.created', {}));
        assert.equal(await auditLength(store), before + 2);
        assert.deepEqual(await store.listScimTokens(), [okta, entra]);
        clock.advance(1000);
        assert.deepEqual(await store.useScimToken({ digest: okta.digest, now: clock.now() }), { ...okta, lastUsedAt: clock.now() });
        assert.equal(await store.useScimToken({ digest: sha256Hex('svcs_unknown'), now: clock.now() }), null);
        assert.equal(await auditLength(store), before + 2, 'a use is not an audit event');
        clock.advance(1000);
        assert.equal(await store.revokeScimToken({ id: okta.id, now: clock.now() }, auditDraft(deps, 'scim_token.revoked', {})), true);
        assert.equal(await store.revokeScimToken({ id: okta.id, now: clock.now() }, auditDraft(deps, 'scim_token.revoked', {})), false);
        assert.equal(
          await store.revokeScimToken(
            { id: 'sct_01KAQ00000000000000000000Z', now: clock.now() },
            auditDraft(deps, 'scim_token.revoked', {}),
          ),
          false,
        );
        assert.equal(await auditLength(store), before + 3);
        assert.equal(await store.useScimToken({ digest: okta.digest, now: clock.now() }), null, 'a revoked token is not usable');
        assert.equal((await store.useScimToken({ digest: entra.digest, now: clock.now() }))?.id, entra.id);
        assert.deepEqual(await store.listScimTokens(), [
          { ...okta, lastUsedAt: clock.now() - 1000, revokedAt: clock.now() },
          { ...entra, lastUsedAt: clock.now() },
        ]);
      }));

    test('a SCIM token flood is not a write flood: lastUsedAt is written at most once a minute per token, and an unknown or revoked token writes nothing', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const token: ScimTokenRecord = {
          id: newId('scimToken', deps.clock, deps.random),
          digest: sha256Hex('svcs_flood'),
          name: 'flood',
          createdAt: clock.now(),
          createdBy: null,
          lastUsedAt: null,
          revokedAt: null,
        };
        await store.createScimToken(token, auditDraft(deps, 'scim_token.created', {}));
        const first = clock.now();
        assert.equal((await store.useScimToken({ digest: token.digest, now: first }))?.lastUsedAt, first, 'the first use is recorded');
        clock.advance(SCIM_TOKEN_USE_RESOLUTION_MS - 1);
        const within = await store.useScimToken({ digest: token.digest, now: clock.now() });
        assert.equal(within?.id, token.id, 'the token is still accepted within the minute');
        assert.equal(within?.lastUsedAt, first, 'a use within the minute is not written');
        assert.equal((await store.listScimTokens())[0]?.lastUsedAt, first);
        clock.advance(1);
        assert.equal(
          (await store.useScimToken({ digest: token.digest, now: clock.now() }))?.lastUsedAt,
          clock.now(),
          'a minute later the use is recorded',
        );
        assert.equal(await store.useScimToken({ digest: sha256Hex('svcs_unknown'), now: clock.now() }), null);
        await store.revokeScimToken({ id: token.id, now: clock.now() }, auditDraft(deps, 'scim_token.revoked', {}));
        clock.advance(SCIM_TOKEN_USE_RESOLUTION_MS);
        assert.equal(await store.useScimToken({ digest: token.digest, now: clock.now() }), null, 'a revoked token is refused');
        const [after] = await store.listScimTokens();
        assert.equal(after?.lastUsedAt, clock.now() - SCIM_TOKEN_USE_RESOLUTION_MS, 'a revoked token use writes nothing');
      }));
  });
}

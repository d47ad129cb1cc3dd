import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type AuthDeps, auditDraft, createChallenge, createScimToken, digestToken, newId, verifyAuditChain } from '@svc/core';
import { type ControlStateRow, type DeviceRecord, defaultUser, type ExportOptions, type Store } from '@svc/core/store';
import type { FakeClock } from '../fake-clock.js';
import { allEvents, authenticates, bootstrapAdmin, createStoreSession, enrollDevice, minutes, rotateAtStore, signIn } from '../fixtures.js';
import type { SuiteContext } from '../harness.js';

/** Every row an export of `store` yields, in its order. */
export async function collectState(store: Store, opts: ExportOptions): Promise<ControlStateRow[]> {
  const rows: ControlStateRow[] = [];
  for await (const row of await store.exportState(opts)) rows.push(row);
  return rows;
}

/** An async iterable over `rows` (what `importState` takes). */
export async function* rowsOf(rows: readonly ControlStateRow[]): AsyncGenerator<ControlStateRow> {
  yield* rows;
}

/** What a populated store holds that a test signs in with after a move. */
export interface PopulatedState {
  readonly bootstrapToken: string;
  readonly usedChallengeId: string;
  readonly access: string;
  readonly refresh: string;
}

/**
 * Fills `deps.store` with some of everything: a management admin (its bootstrap token used), a
 * signed-in and rotated session, a revoked application session, a user with groups, a group
 * record, a SCIM token, a passkey-like link with a counter, a flow, a pairing intent, a used and
 * an unused challenge, a DPoP replay record.
 */
export async function populateControlState(deps: AuthDeps, fake: FakeClock): Promise<PopulatedState> {
  const { store, clock } = deps;
  await store.initProject({ projectId: 'prj_01KAQ00000000000000000000A', createdAt: clock.now() });
  const admin = await bootstrapAdmin(deps);
  const first = await signIn(deps, admin.key, 'management');
  fake.advance(1000);
  const rotated = await rotateAtStore(deps, { refresh: first.refresh_token, realm: 'management', graceMs: 10_000 });
  assert.equal(rotated.outcome.kind, 'rotated');
  const app = await enrollDevice(deps, 'application');
  const appSession = await createStoreSession(deps, app.device);
  await store.revokeSession(
    { sessionId: appSession.session.id, now: clock.now(), reason: 'logout' },
    auditDraft(deps, 'session.revoked', { sessionId: appSession.session.id, data: { reason: 'logout' } }),
  );
  const subject = newId('subject', clock, deps.random);
  const user = {
    ...defaultUser({ subject, realm: 'application', now: clock.now() }),
    name: 'Ann Example',
    nameSource: 'operator' as const,
    email: 'ann@example.com',
    emailVerified: true,
    emailSource: 'operator' as const,
    groups: ['dev', 'ops'],
    groupsSource: 'operator' as const,
  };
  assert.equal(await store.createUser(user, auditDraft(deps, 'user.created', { realm: 'application', subject })), 'created');
  const groupId = newId('group', clock, deps.random);
  await store.saveGroup(
    { id: groupId, realm: 'application', name: 'ops', externalId: 'ext-ops', createdAt: clock.now(), updatedAt: clock.now() },
    auditDraft(deps, 'group.saved', { realm: 'application', data: { group_id: groupId } }),
  );
  await createScimToken(deps, { name: 'entra', actor: { via: 'cli', subject: null, session: null } });
  const linkId = newId('link', clock, deps.random);
  assert.equal(
    await store.createLink(
      {
        id: linkId,
        realm: 'application',
        subject,
        provider: 'passkey',
        issuer: 'webauthn:localhost',
        externalSubject: 'credential-1',
        credentialData: '{"publicKey":"pQECAyYgASFYIA"}',
        counter: 7,
        name: 'laptop',
        createdAt: clock.now(),
        lastUsedAt: null,
        removedAt: null,
      },
      auditDraft(deps, 'link.created', { realm: 'application', subject, deviceId: linkId, data: { provider: 'passkey' } }),
    ),
    'created',
  );
  await store.createFlow({
    id: newId('flow', clock, deps.random),
    provider: 'passkey',
    realm: 'application',
    intent: 'signin',
    subject: null,
    pairingIntentId: null,
    state: '{"challenge":"c"}',
    createdAt: clock.now(),
    expiresAt: clock.now() + minutes(5),
  });
  await store.createPairingIntent(
    {
      id: newId('intent', clock, deps.random),
      realm: 'management',
      subject: admin.device.subject,
      name: 'phone',
      codeDigest: 'a'.repeat(64),
      createdAt: clock.now(),
      expiresAt: clock.now() + minutes(10),
      createdBy: admin.device.subject,
      failures: 1,
      completedAt: null,
      burnedAt: null,
      deviceId: null,
      preparedByNode: null,
    },
    auditDraft(deps, 'pairing.prepared', { realm: 'management', subject: admin.device.subject }),
  );
  const used = await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
  assert.notEqual(await store.consumeChallenge({ id: used.id, now: clock.now() }), null);
  await createChallenge(deps, { publicKey: admin.key.publicKey, realm: 'management' });
  assert.equal(await store.useDpopProof({ key: 'b'.repeat(64), expiresAt: clock.now() + minutes(1), now: clock.now() }), true);
  return { bootstrapToken: admin.bootstrapToken, usedChallengeId: used.id, access: rotated.next.access, refresh: rotated.next.refresh };
}

/** exportState, importState: moving the control state between stores. */
export function controlStateSuite(ctx: SuiteContext): void {
  const withEmpty = async (fn: (target: Store) => Promise<void>): Promise<void> => {
    const target = await ctx.factory.open();
    try {
      await fn(target);
    } finally {
      await (ctx.factory.close ? ctx.factory.close(target) : target.close());
    }
  };

  describe('control state export and import', () => {
    test('an export imported into an empty store exports identically, and its sessions, chain and single-use state carry over', () =>
      ctx.world(async ({ deps, depsFor, clock }) => {
        const populated = await populateControlState(deps, clock);
        const exported = await collectState(deps.store, { sessions: true });
        assert.ok(exported.some((r) => r.table === 'sessions') && exported.some((r) => r.table === 'dpop_proofs'));
        await withEmpty(async (target) => {
          const outcome = await target.importState(rowsOf(exported));
          assert.equal(outcome.kind, 'imported');
          assert.deepEqual(await collectState(target, { sessions: true }), exported);
          const chain = verifyAuditChain(await allEvents(target));
          assert.ok(chain.ok);
          assert.deepEqual(await target.auditHead(), await deps.store.auditHead());
          const moved = depsFor(target);
          // The signed-in session still authenticates, and its refresh token still rotates.
          assert.equal(await authenticates(moved, populated.access, 'management'), true);
          const next = await rotateAtStore(moved, { refresh: populated.refresh, realm: 'management', graceMs: 10_000 });
          assert.equal(next.outcome.kind, 'rotated');
          // A new event continues the copied chain.
          await target.appendAuditEvent(auditDraft(moved, 'signin.failed', { data: { reason: 'test' } }));
          assert.ok(verifyAuditChain(await allEvents(target)).ok);
        });
      }));

    test('used single-use things stay used after a move: the bootstrap token, the challenge, the DPoP proof', () =>
      ctx.world(async ({ deps, depsFor, clock }) => {
        const populated = await populateControlState(deps, clock);
        await withEmpty(async (target) => {
          await target.importState(rowsOf(await collectState(deps.store, { sessions: true })));
          const moved = depsFor(target);
          const device: DeviceRecord = {
            id: newId('device', moved.clock, moved.random),
            publicKey: 'c'.repeat(64),
            realm: 'management',
            subject: newId('subject', moved.clock, moved.random),
            name: 'late',
            createdAt: moved.clock.now(),
            removedAt: null,
          };
          const outcome = await target.consumeBootstrapToken(
            { digest: digestToken(populated.bootstrapToken), now: moved.clock.now(), device },
            auditDraft(moved, 'device.enrolled', {}),
          );
          assert.equal(outcome.kind, 'used');
          assert.equal(await target.consumeChallenge({ id: populated.usedChallengeId, now: moved.clock.now() }), null);
          assert.equal(
            await target.useDpopProof({ key: 'b'.repeat(64), expiresAt: moved.clock.now() + 1000, now: moved.clock.now() }),
            false,
          );
        });
      }));

    test('without sessions, no session row is copied: the tokens are refused, every device and user is still there', () =>
      ctx.world(async ({ deps, depsFor, clock }) => {
        const populated = await populateControlState(deps, clock);
        const exported = await collectState(deps.store, { sessions: false });
        assert.deepEqual(
          exported.filter((r) => ['sessions', 'retired_refresh_tokens', 'challenges', 'flows', 'dpop_proofs'].includes(r.table)),
          [],
        );
        await withEmpty(async (target) => {
          await target.importState(rowsOf(exported));
          assert.equal(await authenticates(depsFor(target), populated.access, 'management'), false);
          assert.deepEqual(await target.listDevices({}), await deps.store.listDevices({}));
          assert.deepEqual(await target.listUsers({ limit: 100 }), await deps.store.listUsers({ limit: 100 }));
          assert.deepEqual(await target.listLinks({}), await deps.store.listLinks({}));
        });
      }));

    test('an import into a store that holds control state is refused and writes nothing', () =>
      ctx.world(async ({ deps, clock }) => {
        await populateControlState(deps, clock);
        const exported = await collectState(deps.store, { sessions: true });
        await withEmpty(async (target) => {
          await target.initProject({ projectId: 'prj_01KAQ00000000000000000000B', createdAt: 1 });
          const before = await collectState(target, { sessions: true });
          const outcome = await target.importState(rowsOf(exported));
          assert.deepEqual(outcome, { kind: 'not_empty', table: 'project' });
          assert.deepEqual(await collectState(target, { sessions: true }), before);
        });
      }));

    test('a row that does not fit rolls the whole import back', () =>
      ctx.world(async ({ deps, clock }) => {
        await populateControlState(deps, clock);
        const exported = await collectState(deps.store, { sessions: true });
        const last = exported.at(-1) as ControlStateRow;
        const bad = [...exported, { table: last.table, row: { ...last.row, smuggled: 'x' } } as ControlStateRow];
        await withEmpty(async (target) => {
          await assert.rejects(target.importState(rowsOf(bad)), TypeError);
          assert.deepEqual(await collectState(target, { sessions: true }), []);
          // ... and an import afterwards still finds the store empty.
          assert.equal((await target.importState(rowsOf(exported))).kind, 'imported');
        });
      }));
  });
}

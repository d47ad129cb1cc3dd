import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type AuthDeps,
  finishProviderFlow,
  listLinks,
  type Principal,
  type ProviderIntent,
  type Realm,
  rotateRefreshToken,
  startProviderFlow,
  type TokenPairJson,
  unlinkIdentity,
} from '@svc/core';
import { allEvents, authenticate, authenticates, bootstrapAdmin, enrollDevice, minutes, rejectsWithCode, signIn } from '../fixtures.js';
import type { SuiteContext } from '../harness.js';
import { createTestProvider, type TestProof, type TestProvider } from '../test-provider.js';

const ORIGIN = 'https://app.example.com';
const ISSUER = 'https://login.example.com';

/** Begins a ceremony and finishes it with what the browser claims: the whole round trip of the use cases. */
async function ceremony(
  deps: AuthDeps,
  provider: TestProvider,
  input: {
    readonly realm?: Realm;
    readonly intent?: ProviderIntent;
    readonly principal?: Principal | null;
    readonly finishPrincipal?: Principal | null;
    readonly proof: Omit<TestProof, 'nonce'>;
  },
) {
  const started = await startProviderFlow(deps, {
    provider,
    realm: input.realm ?? 'application',
    intent: input.intent ?? 'signin',
    principal: input.principal ?? null,
    origin: ORIGIN,
  });
  return finishProviderFlow(deps, {
    provider,
    flowId: started.flowId,
    request: provider.proof(started.reply, input.proof),
    origin: ORIGIN,
    principal: input.finishPrincipal === undefined ? (input.principal ?? null) : input.finishPrincipal,
  });
}

function pairOf(r: Awaited<ReturnType<typeof finishProviderFlow>>): TokenPairJson {
  assert.equal(r.outcome, 'session');
  return (r as { pair: TokenPairJson }).pair;
}

/** An application subject with a device session, and its principal. */
async function appPrincipal(deps: AuthDeps): Promise<Principal> {
  const { key } = await enrollDevice(deps, 'application');
  return authenticate(deps, (await signIn(deps, key, 'application')).access_token, 'application');
}

async function adminPrincipal(deps: AuthDeps): Promise<Principal> {
  const admin = await bootstrapAdmin(deps);
  return authenticate(deps, (await signIn(deps, admin.key, 'management')).access_token, 'management');
}

async function failures(deps: AuthDeps): Promise<(string | number | boolean | null | undefined)[]> {
  return (await allEvents(deps.store)).filter((e) => e.type === 'provider.signin_failed').map((e) => e.data.reason);
}

/** Provider sign-in and linking through core's use cases, with a test provider behind the ProviderHandle boundary. */
export function providerSuite(ctx: SuiteContext): void {
  describe('provider sign-in and linking (use cases)', () => {
    test('a linked identity signs in: an ordinary session whose device is the link, amr fed, audited', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider();
        const principal = await appPrincipal(deps);
        const linked = await ceremony(deps, provider, { intent: 'link', principal, proof: { subject: 'ann' } });
        assert.equal(linked.outcome, 'linked');
        const link = (linked as { link: { id: string; subject: string; issuer: string } }).link;
        assert.equal(link.subject, principal.subject);
        assert.equal(link.issuer, ISSUER);
        const pair = pairOf(await ceremony(deps, provider, { proof: { subject: 'ann' } }));
        const p = await authenticate(deps, pair.access_token, 'application');
        assert.equal(p.subject, principal.subject);
        assert.equal(p.device, link.id);
        assert.deepEqual(p.claims.amr, ['fed']);
        // Same rotation as any session, and the amr stays.
        const next = await rotateRefreshToken(deps, { refreshToken: pair.refresh_token, realm: 'application' });
        assert.deepEqual((await authenticate(deps, next.access_token, 'application')).claims.amr, ['fed']);
        const types = (await allEvents(store)).map((e) => e.type);
        assert.deepEqual(types.slice(-4, -1), ['link.created', 'provider.signin', 'session.created']);
        const begin = provider.calls.begin[0];
        assert.equal(begin?.callbackUrl, `${ORIGIN}/.svc/auth/v1/providers/corp/callback`);
        assert.equal(begin?.subject, principal.subject);
      }));

    test('a passkey session says amr hwk user; the stored credential is handed to the provider at sign-in', () =>
      ctx.world(async ({ deps }) => {
        const provider = createTestProvider({ name: 'passkey', kind: 'webauthn', policy: { allowedIssuers: ['webauthn:example.com'] } });
        const principal = await appPrincipal(deps);
        await ceremony(deps, provider, { intent: 'link', principal, proof: { subject: 'cred-1', counter: 1 } });
        const pair = pairOf(await ceremony(deps, provider, { proof: { subject: 'cred-1', counter: 2, credentialId: 'cred-1' } }));
        assert.deepEqual((await authenticate(deps, pair.access_token, 'application')).claims.amr, ['hwk', 'user']);
        assert.deepEqual(provider.calls.finish.at(-1)?.credential, { id: 'cred-1', data: { publicKey: 'pk-of-cred-1' }, counter: 1 });
        // Linking again: the ceremony is told which credentials the subject already has.
        await startProviderFlow(deps, { provider, realm: 'application', intent: 'link', principal, origin: ORIGIN });
        assert.deepEqual(provider.calls.begin.at(-1)?.existingCredentials, ['cred-1']);
      }));

    test('a hostile provider that verifies one stored credential but reports another identity is refused', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider({
          name: 'passkey',
          kind: 'webauthn',
          policy: { allowedIssuers: ['webauthn:example.com'], jit: { enabled: true, emailDomains: [] } },
        });
        const ann = await appPrincipal(deps);
        const eve = await appPrincipal(deps);
        await ceremony(deps, provider, { intent: 'link', principal: ann, proof: { subject: 'cred-ann', counter: 1 } });
        await ceremony(deps, provider, { intent: 'link', principal: eve, proof: { subject: 'cred-eve', counter: 1 } });
        for (const subject of ['cred-eve', 'cred-new']) {
          await rejectsWithCode(
            ceremony(deps, provider, { proof: { subject, counter: 2, credentialId: 'cred-ann' } }),
            'invalid_credential',
          );
        }
        assert.equal((await store.listLinks({})).length, 2);
        assert.deepEqual(await failures(deps), ['identity_not_credential', 'identity_not_credential']);
      }));

    test('cloned authenticator: a signature counter that does not advance is refused, audited, and creates no session', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const provider = createTestProvider({ name: 'passkey', kind: 'webauthn', policy: { allowedIssuers: ['webauthn:example.com'] } });
        const principal = await appPrincipal(deps);
        await ceremony(deps, provider, { intent: 'link', principal, proof: { subject: 'cred-1', counter: 5 } });
        pairOf(await ceremony(deps, provider, { proof: { subject: 'cred-1', counter: 6, credentialId: 'cred-1' } }));
        const before = (await store.listActiveSessions({ now: clock.now() })).length;
        for (const counter of [6, 3]) {
          await rejectsWithCode(
            ceremony(deps, provider, { proof: { subject: 'cred-1', counter, credentialId: 'cred-1' } }),
            'invalid_credential',
          );
        }
        assert.equal((await store.listActiveSessions({ now: clock.now() })).length, before);
        assert.deepEqual(await failures(deps), ['counter_regressed', 'counter_regressed']);
      }));

    test('a flow is single use: finishing it again is invalid_flow', () =>
      ctx.world(async ({ deps }) => {
        const provider = createTestProvider({ policy: { jit: { enabled: true, emailDomains: [] } } });
        const started = await startProviderFlow(deps, {
          provider,
          realm: 'application',
          intent: 'signin',
          principal: null,
          origin: ORIGIN,
        });
        const request = provider.proof(started.reply, { subject: 'ann' });
        const finish = () => finishProviderFlow(deps, { provider, flowId: started.flowId, request, origin: ORIGIN, principal: null });
        pairOf(await finish());
        await rejectsWithCode(finish(), 'invalid_flow');
        await rejectsWithCode(
          finishProviderFlow(deps, { provider, flowId: 'not-a-flow', request, origin: ORIGIN, principal: null }),
          'invalid_flow',
        );
      }));

    test('50 concurrent finishes of one flow create exactly one session', () =>
      ctx.world(async (w) => {
        const provider = createTestProvider({ policy: { jit: { enabled: true, emailDomains: [] } } });
        const peer = await w.peer();
        const all = Array.from({ length: 50 }, (_, i) => (i % 2 === 1 && peer !== null ? w.depsFor(peer) : w.deps));
        const started = await startProviderFlow(w.deps, {
          provider,
          realm: 'application',
          intent: 'signin',
          principal: null,
          origin: ORIGIN,
        });
        const request = provider.proof(started.reply, { subject: 'ann' });
        const results = await Promise.allSettled(
          all.map((deps) => finishProviderFlow(deps, { provider, flowId: started.flowId, request, origin: ORIGIN, principal: null })),
        );
        assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
        assert.ok(results.every((r) => r.status === 'fulfilled' || (r.reason as { code?: string }).code === 'invalid_flow'));
        assert.equal((await w.store.listActiveSessions({ now: w.clock.now(), realm: 'application' })).length, 1);
        assert.equal((await w.store.listLinks({})).length, 1);
      }));

    test('a flow expires after 10 minutes', () =>
      ctx.world(async ({ deps, clock }) => {
        const provider = createTestProvider({ policy: { jit: { enabled: true, emailDomains: [] } } });
        const start = () => startProviderFlow(deps, { provider, realm: 'application', intent: 'signin', principal: null, origin: ORIGIN });
        const late = await start();
        assert.equal(late.expiresAt, clock.now() + minutes(10));
        const inTime = await start();
        clock.advance(minutes(10) - 1);
        const finish = (s: typeof late) =>
          finishProviderFlow(deps, {
            provider,
            flowId: s.flowId,
            request: provider.proof(s.reply, { subject: 'ann' }),
            origin: ORIGIN,
            principal: null,
          });
        pairOf(await finish(inTime));
        clock.advance(1);
        await rejectsWithCode(finish(late), 'invalid_flow');
      }));

    test('a flow begun with one provider cannot be finished with another', () =>
      ctx.world(async ({ deps }) => {
        const corp = createTestProvider({ policy: { jit: { enabled: true, emailDomains: [] } } });
        const other = createTestProvider({ name: 'other', policy: { jit: { enabled: true, emailDomains: [] } } });
        const started = await startProviderFlow(deps, {
          provider: corp,
          realm: 'application',
          intent: 'signin',
          principal: null,
          origin: ORIGIN,
        });
        await rejectsWithCode(
          finishProviderFlow(deps, {
            provider: other,
            flowId: started.flowId,
            request: corp.proof(started.reply, { subject: 'ann' }),
            origin: ORIGIN,
            principal: null,
          }),
          'invalid_flow',
        );
        assert.deepEqual(await failures(deps), ['flow_of_other_provider']);
      }));

    test('a realm the provider does not serve is refused at the start, and at the finish when the policy changed meanwhile', () =>
      ctx.world(async ({ deps }) => {
        const provider = createTestProvider();
        await rejectsWithCode(
          startProviderFlow(deps, { provider, realm: 'management', intent: 'signin', principal: null, origin: ORIGIN }),
          'invalid_request',
        );
        const started = await startProviderFlow(deps, {
          provider,
          realm: 'application',
          intent: 'signin',
          principal: null,
          origin: ORIGIN,
        });
        const narrowed = createTestProvider({ policy: { realms: ['management'] } });
        await rejectsWithCode(
          finishProviderFlow(deps, {
            provider: narrowed,
            flowId: started.flowId,
            request: provider.proof(started.reply, { subject: 'ann' }),
            origin: ORIGIN,
            principal: null,
          }),
          'invalid_credential',
        );
      }));

    test('a management-realm link needs an existing management principal: none, or an application one, is refused', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider({ policy: { realms: ['management', 'application'] } });
        const app = await appPrincipal(deps);
        for (const principal of [null, app]) {
          await rejectsWithCode(
            startProviderFlow(deps, { provider, realm: 'management', intent: 'link', principal, origin: ORIGIN }),
            'invalid_token',
          );
        }
        const admin = await adminPrincipal(deps);
        const linked = await ceremony(deps, provider, {
          realm: 'management',
          intent: 'link',
          principal: admin,
          proof: { subject: 'root' },
        });
        assert.equal(linked.outcome, 'linked');
        const pair = pairOf(await ceremony(deps, provider, { realm: 'management', proof: { subject: 'root' } }));
        assert.equal((await authenticate(deps, pair.access_token, 'management')).subject, admin.subject);
        assert.equal((await store.listLinks({ realm: 'management' })).length, 1);
      }));

    test("linking to another realm's subject is refused: the principal must be of the flow's realm", () =>
      ctx.world(async ({ deps }) => {
        const provider = createTestProvider({ policy: { realms: ['management', 'application'] } });
        const admin = await adminPrincipal(deps);
        await rejectsWithCode(
          startProviderFlow(deps, { provider, realm: 'application', intent: 'link', principal: admin, origin: ORIGIN }),
          'invalid_token',
        );
      }));

    test('a link is finished only by the principal who began it', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider();
        const ann = await appPrincipal(deps);
        const eve = await appPrincipal(deps);
        for (const finishPrincipal of [eve, null]) {
          await rejectsWithCode(
            ceremony(deps, provider, { intent: 'link', principal: ann, finishPrincipal, proof: { subject: 'ann' } }),
            'invalid_token',
          );
        }
        assert.deepEqual(await store.listLinks({}), []);
        assert.deepEqual(await failures(deps), ['principal_mismatch', 'principal_mismatch']);
      }));

    test("an identity linked in the application realm does not sign in to the management realm (another realm's subject)", () =>
      ctx.world(async ({ deps }) => {
        const provider = createTestProvider({ policy: { realms: ['management', 'application'] } });
        const app = await appPrincipal(deps);
        await ceremony(deps, provider, { intent: 'link', principal: app, proof: { subject: 'ann' } });
        await rejectsWithCode(ceremony(deps, provider, { realm: 'management', proof: { subject: 'ann' } }), 'invalid_credential');
        assert.deepEqual(await failures(deps), ['not_linked']);
      }));

    test('a hostile provider: an identity at a disallowed issuer, or a malformed subject or claims, is refused before anything is written', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const provider = createTestProvider({ policy: { jit: { enabled: true, emailDomains: [] } } });
        const app = await appPrincipal(deps);
        const sessions = (await store.listActiveSessions({ now: clock.now() })).length;
        const proofs: Omit<TestProof, 'nonce'>[] = [
          { subject: 'ann', issuer: 'https://evil.example.net' },
          { subject: 'ann\nadmin' },
          { subject: '' },
          { subject: 'x'.repeat(256) },
          { subject: 'ann', claims: { email: 'a\u202Eb@example.com' } },
          { subject: 'ann', claims: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`c${i}`, true])) },
        ];
        for (const proof of proofs) {
          await rejectsWithCode(ceremony(deps, provider, { proof }), 'invalid_credential');
          await rejectsWithCode(ceremony(deps, provider, { intent: 'link', principal: app, proof }), 'invalid_credential');
        }
        assert.deepEqual(await store.listLinks({}), []);
        assert.equal((await store.listActiveSessions({ now: clock.now() })).length, sessions);
        assert.deepEqual(new Set(await failures(deps)), new Set(['identity_refused']));
      }));

    test('a proof the provider cannot verify is refused as invalid_credential and audited', () =>
      ctx.world(async ({ deps }) => {
        const provider = createTestProvider();
        const started = await startProviderFlow(deps, {
          provider,
          realm: 'application',
          intent: 'signin',
          principal: null,
          origin: ORIGIN,
        });
        await rejectsWithCode(
          finishProviderFlow(deps, {
            provider,
            flowId: started.flowId,
            request: { query: {}, body: { nonce: 'forged', subject: 'ann' } },
            origin: ORIGIN,
            principal: null,
          }),
          'invalid_credential',
        );
        assert.deepEqual(await failures(deps), ['provider_refused']);
      }));

    test('an unlinked identity is refused unless just-in-time provisioning is on', () =>
      ctx.world(async ({ deps, store }) => {
        await rejectsWithCode(ceremony(deps, createTestProvider(), { proof: { subject: 'ann' } }), 'invalid_credential');
        await rejectsWithCode(
          startProviderFlow(deps, {
            provider: createTestProvider(),
            realm: 'application',
            intent: 'signup',
            principal: null,
            origin: ORIGIN,
          }),
          'invalid_request',
        );
        assert.deepEqual(await store.listLinks({}), []);
        assert.deepEqual(await failures(deps), ['not_linked']);
      }));

    test('just-in-time provisioning: a verified email in an allowed domain gets a new subject, its link and a session; the next sign-in reuses them', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider({ policy: { jit: { enabled: true, emailDomains: ['Example.com'] } } });
        const claims = { email: 'ann@example.com', email_verified: true };
        const first = await authenticate(
          deps,
          pairOf(await ceremony(deps, provider, { proof: { subject: 'ann', claims } })).access_token,
          'application',
        );
        assert.match(first.subject, /^sub_/);
        const second = await authenticate(
          deps,
          pairOf(await ceremony(deps, provider, { proof: { subject: 'ann', claims } })).access_token,
          'application',
        );
        assert.equal(second.subject, first.subject);
        assert.equal(second.device, first.device);
        const links = await store.listLinks({});
        assert.equal(links.length, 1);
        assert.equal(links[0]?.name, 'ann@example.com');
        const created = (await allEvents(store)).filter((e) => e.type === 'link.created');
        assert.deepEqual(
          created.map((e) => e.data.via),
          ['jit'],
        );
      }));

    test('just-in-time provisioning refuses an unverified email, another domain, and a missing email when domains are set', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider({ policy: { jit: { enabled: true, emailDomains: ['example.com'] } } });
        const refused: Readonly<Record<string, string | boolean>>[] = [
          { email: 'ann@example.com', email_verified: false },
          { email: 'ann@example.com' },
          { email: 'ann@evil.example.net', email_verified: true },
          { email: 'ann@notexample.com', email_verified: true },
          {},
        ];
        for (const claims of refused)
          await rejectsWithCode(ceremony(deps, provider, { proof: { subject: 'ann', claims } }), 'invalid_credential');
        assert.deepEqual(await store.listLinks({}), []);
        // Without domains: any identity whose email, if any, is verified.
        const open = createTestProvider({ policy: { jit: { enabled: true, emailDomains: [] } } });
        await rejectsWithCode(
          ceremony(deps, open, { proof: { subject: 'bob', claims: { email: 'bob@x.org', email_verified: false } } }),
          'invalid_credential',
        );
        pairOf(await ceremony(deps, open, { proof: { subject: 'bob', claims: { email: 'bob@x.org', email_verified: true } } }));
      }));

    test('just-in-time provisioning never applies in the management realm', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider({ policy: { realms: ['management'], jit: { enabled: true, emailDomains: [] } } });
        await rejectsWithCode(ceremony(deps, provider, { realm: 'management', proof: { subject: 'ann' } }), 'invalid_credential');
        await rejectsWithCode(
          startProviderFlow(deps, { provider, realm: 'management', intent: 'signup', principal: null, origin: ORIGIN }),
          'invalid_request',
        );
        assert.deepEqual(await store.listLinks({}), []);
      }));

    test('signup: a passkey gets a new subject, its link (with its counter) and a session; the same credential cannot sign up twice', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider({
          name: 'passkey',
          kind: 'webauthn',
          policy: { allowedIssuers: ['webauthn:example.com'], jit: { enabled: true, emailDomains: [] } },
        });
        const pair = pairOf(await ceremony(deps, provider, { intent: 'signup', proof: { subject: 'cred-9', counter: 0 } }));
        const p = await authenticate(deps, pair.access_token, 'application');
        const [link] = await store.listLinks({ subject: p.subject });
        assert.equal(link?.counter, 0);
        assert.equal(link?.credentialData, '{"publicKey":"pk-of-cred-9"}');
        await rejectsWithCode(ceremony(deps, provider, { intent: 'signup', proof: { subject: 'cred-9', counter: 0 } }), 'already_linked');
        // And it signs in (0 and 0: an authenticator without a counter).
        pairOf(await ceremony(deps, provider, { proof: { subject: 'cred-9', counter: 0, credentialId: 'cred-9' } }));
      }));

    test('an identity already linked cannot be linked again in the same realm', () =>
      ctx.world(async ({ deps }) => {
        const provider = createTestProvider();
        const ann = await appPrincipal(deps);
        const eve = await appPrincipal(deps);
        await ceremony(deps, provider, { intent: 'link', principal: ann, proof: { subject: 'ann' } });
        await rejectsWithCode(ceremony(deps, provider, { intent: 'link', principal: eve, proof: { subject: 'ann' } }), 'already_linked');
      }));

    test('unlinking revokes the sessions it signed in; a removed link signs in no more; an application principal sees and removes only its own links', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider();
        const ann = await appPrincipal(deps);
        const eve = await appPrincipal(deps);
        const annLink = await ceremony(deps, provider, { intent: 'link', principal: ann, proof: { subject: 'ann' } });
        await ceremony(deps, provider, { intent: 'link', principal: eve, proof: { subject: 'eve' } });
        const linkId = (annLink as { link: { id: string } }).link.id;
        const pair = pairOf(await ceremony(deps, provider, { proof: { subject: 'ann' } }));
        assert.deepEqual(
          (await listLinks(deps, { principal: ann, realm: 'management' })).map((l) => l.id),
          [linkId],
        );
        assert.equal((await listLinks(deps, { principal: null })).length, 2);
        await rejectsWithCode(unlinkIdentity(deps, { principal: eve, linkId }), 'not_found');
        await rejectsWithCode(unlinkIdentity(deps, { principal: null, linkId: 'lnk_nope' }), 'invalid_request');
        assert.deepEqual(await unlinkIdentity(deps, { principal: ann, linkId }), { link_id: linkId, removed: true, revoked_sessions: 1 });
        assert.equal(await authenticates(deps, pair.access_token, 'application'), false);
        assert.equal((await store.getSession(pair.session_id))?.revokedReason, 'link_removed');
        await rejectsWithCode(unlinkIdentity(deps, { principal: null, linkId }), 'not_found');
        await rejectsWithCode(ceremony(deps, provider, { proof: { subject: 'ann' } }), 'invalid_credential');
        const removed = (await allEvents(store)).filter((e) => e.type === 'link.removed');
        assert.deepEqual(
          removed.map((e) => [e.deviceId, e.data.by_subject]),
          [[linkId, ann.subject]],
        );
      }));

    test('linking through a pairing intent is refused for now, and an origin that is not an origin is refused', () =>
      ctx.world(async ({ deps }) => {
        const provider = createTestProvider();
        await rejectsWithCode(
          startProviderFlow(deps, {
            provider,
            realm: 'application',
            intent: 'link',
            principal: null,
            pairing: { intentId: 'int_x', code: 'ABCD-EFGH' },
            origin: ORIGIN,
          }),
          'invalid_request',
        );
        for (const origin of ['https://app.example.com/', 'javascript:alert(1)', 'https://app.example.com/x']) {
          await rejectsWithCode(
            startProviderFlow(deps, { provider, realm: 'application', intent: 'signin', principal: null, origin }),
            'invalid_request',
          );
        }
      }));
  });
}

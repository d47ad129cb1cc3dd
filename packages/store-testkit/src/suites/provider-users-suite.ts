import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type AuthDeps,
  addUser,
  finishProviderFlow,
  type Principal,
  type ProviderIntent,
  startProviderFlow,
  type TokenPairJson,
  unlinkIdentity,
  updateUser,
} from '@svc/core';
import { allEvents, authenticate, enrollDevice, rejectsWithCode, signIn } from '../fixtures.js';
import type { SuiteContext } from '../harness.js';
import { createTestProvider, type TestProof, type TestProvider } from '../test-provider.js';

// Who a provider's sign-in says the person is (#27): claims mapped onto the user at each
// sign-in, just-in-time users (groups, sign-up by invitation), one person one user (found by
// the (issuer, subject) link, by verified email only when the operator says so), the name typed
// at passkey sign-up, and disabled users refused. Through core's use cases and the store.

const ORIGIN = 'https://app.example.com';
const OPERATOR = { via: 'cli', subject: null, session: null } as const;

async function ceremony(
  deps: AuthDeps,
  provider: TestProvider,
  input: {
    readonly intent?: ProviderIntent;
    readonly principal?: Principal | null;
    readonly proof: Omit<TestProof, 'nonce'>;
    readonly displayName?: unknown;
  },
) {
  const started = await startProviderFlow(deps, {
    provider,
    realm: 'application',
    intent: input.intent ?? 'signin',
    principal: input.principal ?? null,
    origin: ORIGIN,
  });
  return finishProviderFlow(deps, {
    provider,
    flowId: started.flowId,
    request: provider.proof(started.reply, input.proof),
    origin: ORIGIN,
    principal: input.principal ?? null,
    ...(input.displayName === undefined ? {} : { displayName: input.displayName }),
  });
}

function pairOf(r: Awaited<ReturnType<typeof finishProviderFlow>>): TokenPairJson {
  assert.equal(r.outcome, 'session');
  return (r as { pair: TokenPairJson }).pair;
}

async function appPrincipal(deps: AuthDeps): Promise<Principal> {
  const { key } = await enrollDevice(deps, 'application');
  return authenticate(deps, (await signIn(deps, key, 'application')).access_token, 'application');
}

async function eventsOf(deps: AuthDeps, type: string) {
  return (await allEvents(deps.store)).filter((e) => e.type === type);
}

async function lastFailure(deps: AuthDeps) {
  return (await eventsOf(deps, 'provider.signin_failed')).at(-1)?.data.reason;
}

const ann = { email: 'ann@example.com', email_verified: true, name: 'Ann Example' } as const;

/** The provider side of users: claims, JIT users, linking rules, display names, disabled users. */
export function providerUsersSuite(ctx: SuiteContext): void {
  describe('provider sign-in and users', () => {
    test("the identity provider's claims become the user's attributes at sign-in, owned by the provider, and reach the principal", () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider();
        const principal = await appPrincipal(deps);
        await ceremony(deps, provider, { intent: 'link', principal, proof: { subject: 'ann' } });
        const pair = pairOf(await ceremony(deps, provider, { proof: { subject: 'ann', claims: ann } }));
        const user = await store.getUser(principal.subject);
        assert.equal(user?.name, 'Ann Example');
        assert.equal(user?.nameSource, 'provider:corp');
        assert.equal(user?.email, 'ann@example.com');
        assert.equal(user?.emailVerified, true);
        assert.equal(user?.emailSource, 'provider:corp');
        const claims = (await authenticate(deps, pair.access_token, 'application')).claims;
        assert.equal(claims.email, 'ann@example.com');
        assert.equal(claims.email_verified, true);
        assert.equal(claims.name, 'Ann Example');
        const updated = (await eventsOf(deps, 'user.updated')).at(-1);
        assert.equal(updated?.data.via, 'provider');
        assert.equal(updated?.data.provider, 'corp');
      }));

    test('the next sign-in reflects a changed name and email; what the operator set stays the operator’s', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider();
        const principal = await appPrincipal(deps);
        await ceremony(deps, provider, { intent: 'link', principal, proof: { subject: 'ann' } });
        pairOf(await ceremony(deps, provider, { proof: { subject: 'ann', claims: ann } }));
        pairOf(
          await ceremony(deps, provider, {
            proof: { subject: 'ann', claims: { email: 'ann.b@Bücher.example', email_verified: false, name: 'Ann B' } },
          }),
        );
        let user = await store.getUser(principal.subject);
        assert.equal(user?.name, 'Ann B');
        assert.equal(user?.email, 'ann.b@xn--bcher-kva.example', 'an internationalised domain is kept in its A-label form');
        assert.equal(user?.emailVerified, false);
        await updateUser(deps, { subject: principal.subject, attributes: { name: 'Dr Ann' }, actor: OPERATOR, source: 'operator' });
        pairOf(await ceremony(deps, provider, { proof: { subject: 'ann', claims: ann } }));
        user = await store.getUser(principal.subject);
        assert.equal(user?.name, 'Dr Ann');
        assert.equal(user?.nameSource, 'operator');
        assert.equal(user?.email, 'ann@example.com');
        // A claim that fails its check is left out, never passed on.
        pairOf(await ceremony(deps, provider, { proof: { subject: 'ann', claims: { ...ann, email: 'not an address' } } }));
        assert.equal((await store.getUser(principal.subject))?.email, null, 'the provider owned the email and no longer vouches for one');
      }));

    test('groups come from the configured claim (an array or a separated string), filtered by the prefix', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider({ policy: { groupsClaim: 'groups', groupPrefix: 'app-' } });
        const principal = await appPrincipal(deps);
        await ceremony(deps, provider, { intent: 'link', principal, proof: { subject: 'ann' } });
        const pair = pairOf(
          await ceremony(deps, provider, {
            proof: { subject: 'ann', claims: { groups: ['app-ops', 'payroll', 'app-Not Valid', 'app-dev', 'app-ops'] } },
          }),
        );
        let user = await store.getUser(principal.subject);
        assert.deepEqual(user?.groups, ['dev', 'ops']);
        assert.equal(user?.groupsSource, 'provider:corp');
        assert.deepEqual((await authenticate(deps, pair.access_token, 'application')).claims.groups, ['dev', 'ops']);
        pairOf(await ceremony(deps, provider, { proof: { subject: 'ann', claims: { groups: 'app-audit, app-dev other' } } }));
        user = await store.getUser(principal.subject);
        assert.deepEqual(user?.groups, ['audit', 'dev']);
        // A provider that names no groups claim never touches groups.
        const other = createTestProvider({ name: 'other', policy: { allowedIssuers: ['https://other.example'] } });
        await ceremony(deps, other, { intent: 'link', principal, proof: { subject: 'ann2' } });
        pairOf(await ceremony(deps, other, { proof: { subject: 'ann2', claims: { groups: ['app-root'] } } }));
        assert.deepEqual((await store.getUser(principal.subject))?.groups, ['audit', 'dev']);
      }));

    test('a hostile provider cannot pass a group that is not printable text, nor an array of something else', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider({ policy: { groupsClaim: 'groups' } });
        const principal = await appPrincipal(deps);
        await ceremony(deps, provider, { intent: 'link', principal, proof: { subject: 'ann' } });
        for (const groups of [['ops\u202e'], [7], Array.from({ length: 201 }, (_, i) => `g${i}`)]) {
          await rejectsWithCode(
            ceremony(deps, provider, { proof: { subject: 'ann', claims: { groups } as unknown as Record<string, string> } }),
            'invalid_credential',
          );
          assert.equal(await lastFailure(deps), 'identity_refused');
        }
        assert.deepEqual((await store.getUser(principal.subject))?.groups, []);
      }));

    test('a just-in-time user is created with its attributes, the default groups and the link, in one step, audited as a new subject', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider({ policy: { jit: { enabled: true, emailDomains: [], groups: ['staff'] } } });
        const pair = pairOf(await ceremony(deps, provider, { proof: { subject: 'ann', claims: ann } }));
        const principal = await authenticate(deps, pair.access_token, 'application');
        const user = await store.getUser(principal.subject);
        assert.equal(user?.status, 'active');
        assert.equal(user?.name, 'Ann Example');
        assert.deepEqual(user?.groups, ['staff']);
        assert.equal(user?.groupsSource, 'operator');
        assert.deepEqual(principal.claims.groups, ['staff']);
        const created = (await eventsOf(deps, 'link.created')).at(-1);
        assert.equal(created?.data.via, 'jit');
        assert.equal(created?.data.new_subject, true);
        assert.equal(created?.data.user_groups, 'staff');
        assert.equal((await store.listLinks({ subject: principal.subject }))[0]?.name, 'ann@example.com');
        // The new user is audited as created (what it was created with, by which provider), just before its link.
        const events = (await allEvents(store)).filter((e) => e.subject === principal.subject);
        const userCreated = events.find((e) => e.type === 'user.created');
        assert.deepEqual(
          [userCreated?.data.via, userCreated?.data.provider, userCreated?.data.groups, userCreated?.data.email],
          ['jit', provider.policy.name, 'staff', 'ann@example.com'],
        );
        assert.equal(
          events.indexOf(userCreated as (typeof events)[number]) + 1,
          events.findIndex((e) => e.type === 'link.created'),
        );
      }));

    test('sign-up by invitation: a new user starts disabled, its first sign-in is refused user_disabled until an operator enables it', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider({ policy: { jit: { enabled: true, emailDomains: [], status: 'disabled' } } });
        await rejectsWithCode(ceremony(deps, provider, { proof: { subject: 'ann', claims: ann } }), 'user_disabled');
        assert.equal(await lastFailure(deps), 'user_disabled');
        const [link] = await store.listLinks({});
        assert.ok(link, 'the link was created with the user');
        const user = await store.getUser(link.subject);
        assert.equal(user?.status, 'disabled');
        assert.equal(user?.email, 'ann@example.com');
        assert.equal((await eventsOf(deps, 'link.created')).at(-1)?.data.user_status, 'disabled');
        assert.equal((await eventsOf(deps, 'session.created')).length, 0);
        // Again: the same user, still refused; no second user.
        await rejectsWithCode(ceremony(deps, provider, { proof: { subject: 'ann', claims: ann } }), 'user_disabled');
        assert.equal((await store.listUsers({ realm: 'application', limit: 10 })).length, 1);
        await updateUser(deps, { subject: link.subject, attributes: { status: 'active' }, actor: OPERATOR, source: 'operator' });
        const pair = pairOf(await ceremony(deps, provider, { proof: { subject: 'ann', claims: ann } }));
        assert.equal((await authenticate(deps, pair.access_token, 'application')).subject, link.subject);
      }));

    test('a disabled user cannot sign in through any provider (OIDC, passkey): refused user_disabled, audited, no session', () =>
      ctx.world(async ({ deps }) => {
        const oidc = createTestProvider();
        const passkey = createTestProvider({ name: 'passkey', kind: 'webauthn', policy: { allowedIssuers: ['webauthn:example.com'] } });
        const principal = await appPrincipal(deps);
        await ceremony(deps, oidc, { intent: 'link', principal, proof: { subject: 'ann' } });
        await ceremony(deps, passkey, { intent: 'link', principal, proof: { subject: 'cred-1', counter: 1 } });
        await updateUser(deps, { subject: principal.subject, attributes: { status: 'disabled' }, actor: OPERATOR, source: 'operator' });
        const sessions = (await eventsOf(deps, 'session.created')).length;
        await rejectsWithCode(ceremony(deps, oidc, { proof: { subject: 'ann', claims: ann } }), 'user_disabled');
        assert.equal(await lastFailure(deps), 'user_disabled');
        assert.equal((await eventsOf(deps, 'provider.signin_failed')).at(-1)?.subject, principal.subject, 'the refused user is named');
        await rejectsWithCode(
          ceremony(deps, passkey, { proof: { subject: 'cred-1', counter: 2, credentialId: 'cred-1' } }),
          'user_disabled',
        );
        assert.equal(await lastFailure(deps), 'user_disabled');
        assert.equal((await eventsOf(deps, 'session.created')).length, sessions);
      }));

    test('an identity is found by its link, never by email: a verified email equal to a user’s does not link unless the operator turned it on', () =>
      ctx.world(async ({ deps, store }) => {
        const existing = await addUser(deps, {
          realm: 'application',
          attributes: { email: 'ann@example.com', email_verified: true },
          actor: OPERATOR,
          source: 'operator',
        });
        const provider = createTestProvider();
        await rejectsWithCode(ceremony(deps, provider, { proof: { subject: 'ann', claims: ann } }), 'invalid_credential');
        assert.equal(await lastFailure(deps), 'not_linked');
        const jit = createTestProvider({ name: 'jit', policy: { jit: { enabled: true, emailDomains: [] } } });
        const pair = pairOf(await ceremony(deps, jit, { proof: { subject: 'ann', claims: ann } }));
        assert.notEqual((await authenticate(deps, pair.access_token, 'application')).subject, existing.subject);
        assert.equal((await store.listLinks({ subject: existing.subject })).length, 0);
      }));

    test('linking by verified email: the one user with that verified email gets the link, audited via verified_email', () =>
      ctx.world(async ({ deps, store }) => {
        const existing = await addUser(deps, {
          realm: 'application',
          attributes: { email: 'ann@example.com', email_verified: true, name: 'Ann (HR)' },
          actor: OPERATOR,
          source: 'operator',
        });
        const provider = createTestProvider({ policy: { linkByVerifiedEmail: true, jit: { enabled: true, emailDomains: [] } } });
        const pair = pairOf(await ceremony(deps, provider, { proof: { subject: 'ann', claims: ann } }));
        assert.equal((await authenticate(deps, pair.access_token, 'application')).subject, existing.subject);
        const created = (await eventsOf(deps, 'link.created')).at(-1);
        assert.equal(created?.data.via, 'verified_email');
        assert.equal(created?.data.email, 'ann@example.com');
        assert.equal(created?.subject, existing.subject);
        // The operator's name stays; the next sign-in uses the link.
        assert.equal((await store.getUser(existing.subject))?.name, 'Ann (HR)');
        pairOf(await ceremony(deps, provider, { proof: { subject: 'ann', claims: ann } }));
        assert.equal((await eventsOf(deps, 'link.created')).length, 1);
      }));

    test('linking by email: an unverified email never links, on either side (pre-registration takeover)', () =>
      ctx.world(async ({ deps, store }) => {
        const victim = await addUser(deps, {
          realm: 'application',
          attributes: { email: 'ann@example.com', email_verified: true },
          actor: OPERATOR,
          source: 'operator',
        });
        const provider = createTestProvider({ policy: { linkByVerifiedEmail: true } });
        // The identity provider does not vouch for the address: not linked.
        await rejectsWithCode(
          ceremony(deps, provider, { proof: { subject: 'mallory', claims: { email: 'ann@example.com', email_verified: false } } }),
          'invalid_credential',
        );
        assert.equal((await store.listLinks({ subject: victim.subject })).length, 0);
        // A user who holds the address unverified (typed in first) never receives a verified identity's link.
        const squatter = await addUser(deps, {
          realm: 'application',
          attributes: { email: 'bob@example.com', email_verified: false },
          actor: OPERATOR,
          source: 'operator',
        });
        await rejectsWithCode(
          ceremony(deps, provider, { proof: { subject: 'bob', claims: { email: 'bob@example.com', email_verified: true } } }),
          'invalid_credential',
        );
        assert.equal(await lastFailure(deps), 'not_linked');
        assert.equal((await store.listLinks({ subject: squatter.subject })).length, 0);
      }));

    test('linking by email refuses an address two users hold, and a user who already has an identity at that issuer', () =>
      ctx.world(async ({ deps }) => {
        const provider = createTestProvider({ policy: { linkByVerifiedEmail: true, jit: { enabled: true, emailDomains: [] } } });
        for (let i = 0; i < 2; i++) {
          await addUser(deps, {
            realm: 'application',
            attributes: { email: 'twin@example.com', email_verified: true },
            actor: OPERATOR,
            source: 'operator',
          });
        }
        await rejectsWithCode(
          ceremony(deps, provider, { proof: { subject: 'twin', claims: { email: 'twin@example.com', email_verified: true } } }),
          'invalid_credential',
        );
        assert.equal(await lastFailure(deps), 'email_owner_ambiguous');
        // Ann, known to the operator, signs in (linked by her verified email); the issuer later gives her address to a new subject.
        await addUser(deps, {
          realm: 'application',
          attributes: { email: ann.email, email_verified: true },
          actor: OPERATOR,
          source: 'operator',
        });
        pairOf(await ceremony(deps, provider, { proof: { subject: 'ann-1', claims: ann } }));
        await rejectsWithCode(ceremony(deps, provider, { proof: { subject: 'ann-2', claims: ann } }), 'invalid_credential');
        assert.equal(await lastFailure(deps), 'email_owner_has_issuer_link');
      }));

    test('pre-hijack: an account whose email only another identity provider vouched for never receives a link by email', () =>
      ctx.world(async ({ deps, store }) => {
        // Mallory signs up through a lax provider that "verifies" Ann's address.
        const lax = createTestProvider({
          name: 'lax',
          policy: { allowedIssuers: ['https://lax.example.net'], jit: { enabled: true, emailDomains: [] } },
        });
        pairOf(await ceremony(deps, lax, { proof: { subject: 'mallory', claims: ann } }));
        const [mallory] = await store.listUsers({ realm: 'application', email: ann.email, limit: 10 });
        assert.equal(mallory?.emailSource, 'provider:lax');
        // Ann's first sign-in through the company's provider, which links by verified email.
        const corp = createTestProvider({ policy: { linkByVerifiedEmail: true, jit: { enabled: true, emailDomains: [] } } });
        pairOf(await ceremony(deps, corp, { proof: { subject: 'ann', claims: ann } }));
        const annLink = await store.findLiveLink({
          realm: 'application',
          issuer: corp.policy.allowedIssuers[0] as string,
          externalSubject: 'ann',
        });
        assert.ok(annLink !== null);
        assert.notEqual(annLink.subject, mallory?.subject, "Ann's sign-in did not land in Mallory's account");
      }));

    test('a disabled user is not reached by linking by email either', () =>
      ctx.world(async ({ deps, store }) => {
        const existing = await addUser(deps, {
          realm: 'application',
          attributes: { email: 'ann@example.com', email_verified: true, status: 'disabled' },
          actor: OPERATOR,
          source: 'operator',
        });
        const provider = createTestProvider({ policy: { linkByVerifiedEmail: true } });
        await rejectsWithCode(ceremony(deps, provider, { proof: { subject: 'ann', claims: ann } }), 'user_disabled');
        assert.equal((await store.listLinks({ subject: existing.subject })).length, 0);
      }));

    test('a removed link does not make the next sign-in a new person: refused without JIT; with JIT a new subject, audited as one', () =>
      ctx.world(async ({ deps, store }) => {
        const provider = createTestProvider();
        const principal = await appPrincipal(deps);
        const linked = await ceremony(deps, provider, { intent: 'link', principal, proof: { subject: 'ann' } });
        const linkId = (linked as { link: { id: string } }).link.id;
        await unlinkIdentity(deps, { principal: null, linkId });
        await rejectsWithCode(ceremony(deps, provider, { proof: { subject: 'ann', claims: ann } }), 'invalid_credential');
        assert.equal(await lastFailure(deps), 'not_linked');
        assert.equal((await store.listUsers({ realm: 'application', limit: 10 })).length, 1);
        const jit = createTestProvider({ policy: { jit: { enabled: true, emailDomains: [] } } });
        const pair = pairOf(await ceremony(deps, jit, { proof: { subject: 'ann', claims: ann } }));
        const subject = (await authenticate(deps, pair.access_token, 'application')).subject;
        assert.notEqual(subject, principal.subject);
        const created = (await eventsOf(deps, 'link.created')).at(-1);
        assert.equal(created?.data.via, 'jit');
        assert.equal(created?.data.new_subject, true);
        assert.equal(created?.subject, subject);
      }));

    test('passkey sign-up keeps the name the person typed as their own (source self); later sign-ins keep it', () =>
      ctx.world(async ({ deps, store }) => {
        const passkey = createTestProvider({
          name: 'passkeys',
          kind: 'webauthn',
          policy: { allowedIssuers: ['webauthn:example.com'], jit: { enabled: true, emailDomains: [] } },
        });
        const pair = pairOf(
          await ceremony(deps, passkey, {
            intent: 'signup',
            proof: { subject: 'cred-1', counter: 0 },
            displayName: '  Zoë Ångström 山田 ',
          }),
        );
        const principal = await authenticate(deps, pair.access_token, 'application');
        const user = await store.getUser(principal.subject);
        assert.equal(user?.name, 'Zoë Ångström 山田');
        assert.equal(user?.nameSource, 'self');
        assert.equal(principal.claims.name, 'Zoë Ångström 山田');
        const [link] = await store.listLinks({ subject: principal.subject });
        assert.equal(link?.name, 'Zoë Ångström 山田', 'svc auth links shows the name, not the provider module');
        pairOf(await ceremony(deps, passkey, { proof: { subject: 'cred-1', counter: 1, credentialId: 'cred-1' } }));
        assert.equal((await store.getUser(principal.subject))?.name, 'Zoë Ångström 山田');
        // A second passkey the person adds is labelled with their name too.
        const added = await ceremony(deps, passkey, { intent: 'link', principal, proof: { subject: 'cred-2', counter: 0 } });
        assert.equal((added as { link: { name: string } }).link.name, 'Zoë Ångström 山田');
      }));

    test('a display name is checked (refused, nothing created) and only taken at sign-up', () =>
      ctx.world(async ({ deps, store }) => {
        const passkey = createTestProvider({
          name: 'passkeys',
          kind: 'webauthn',
          policy: { allowedIssuers: ['webauthn:example.com'], jit: { enabled: true, emailDomains: [] } },
        });
        for (const displayName of ['', 'Eve\u202eevil', 'x'.repeat(129), 7]) {
          await rejectsWithCode(
            ceremony(deps, passkey, { intent: 'signup', proof: { subject: 'cred-1', counter: 0 }, displayName }),
            'invalid_request',
          );
        }
        await rejectsWithCode(
          ceremony(deps, passkey, { intent: 'signin', proof: { subject: 'cred-1', counter: 0 }, displayName: 'Ann' }),
          'invalid_request',
        );
        assert.equal((await store.listLinks({})).length, 0);
        assert.equal((await store.listUsers({ realm: 'application', limit: 10 })).length, 0);
      }));
  });
}

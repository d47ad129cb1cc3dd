import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { makePrincipal, type Principal } from '../src/principal.js';
import type { ExternalIdentity, ProviderPolicy } from '../src/provider.js';
import {
  BUNDLED_PASSKEY_PACKAGE,
  jitRefusal,
  providerAmr,
  providerOutageOf,
  providerStartRefusal,
  refusalMayBeOutage,
  refusalOutageOf,
  SVC_PUBLISHER_KEY,
} from '../src/provider-decisions.js';
import { checkProviderIdentity } from '../src/provider-policy.js';
import { isCounterAdvance, isFlowConsumable } from '../src/store-rules.js';

const ISSUER = 'https://login.example.com';
const T = Date.UTC(2026, 10, 22, 10, 0, 0, 0);

const policy = (over: Partial<ProviderPolicy> = {}): ProviderPolicy => ({
  name: 'corp',
  realms: ['application'],
  allowedIssuers: [ISSUER],
  jit: { enabled: false, emailDomains: [] },
  ...over,
});

const identity = (over: Partial<ExternalIdentity> = {}): ExternalIdentity => ({ issuer: ISSUER, subject: 'ann', claims: {}, ...over });

const principal = (realm: Principal['realm']): Principal =>
  makePrincipal({
    subject: 'sub_01KAQ0000000000000000000S1',
    realm,
    session: 'ses_01KAQ0000000000000000000S1',
    device: 'dev_01KAQ0000000000000000000D1',
    claims: { amr: ['ed25519'], auth_time: '2026-11-22T10:00:00.000Z', exp: '2026-11-22T10:15:00.000Z' },
  });

describe('checkProviderIdentity: every provider answer is checked before use', () => {
  test('an answer within the policy is accepted', () => {
    assert.equal(
      checkProviderIdentity(policy(), 'application', identity({ claims: { email: 'ann@example.com', email_verified: true } })),
      null,
    );
  });

  test('a disallowed issuer is refused', () => {
    assert.match(
      checkProviderIdentity(policy(), 'application', identity({ issuer: 'https://evil.example.net' })) ?? '',
      /issuer is not allowed/,
    );
  });

  test('a realm the provider does not serve is refused', () => {
    assert.match(checkProviderIdentity(policy(), 'management', identity()) ?? '', /management realm/);
  });

  test('a subject that is empty, too long, or holds control or bidi characters is refused (forged audit lines)', () => {
    for (const subject of ['', 'x'.repeat(256), 'ann\nadmin', 'ann\u0000', 'a\u202Eb', 42 as unknown as string]) {
      assert.match(checkProviderIdentity(policy(), 'application', identity({ subject })) ?? '', /subject/, JSON.stringify(subject));
    }
    assert.equal(checkProviderIdentity(policy(), 'application', identity({ subject: 'x'.repeat(255) })), null);
  });

  test('claims must be few, named in lowercase, and strings or booleans of bounded printable text', () => {
    const refused: unknown[] = [
      Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`c${i}`, true])),
      { Email: 'a' },
      { email: 'x'.repeat(257) },
      { email: 'a\u001b[2Jb' },
      { n: 3 },
      { o: { nested: true } },
      null,
      ['a'],
    ];
    for (const claims of refused) {
      assert.notEqual(
        checkProviderIdentity(policy(), 'application', identity({ claims: claims as ExternalIdentity['claims'] })),
        null,
        JSON.stringify(claims),
      );
    }
    assert.equal(
      checkProviderIdentity(
        policy(),
        'application',
        identity({ claims: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`c${i}`, ''])) }),
      ),
      null,
    );
  });

  test('a hostile answer that is not an object is refused, not thrown', () => {
    assert.notEqual(checkProviderIdentity(policy(), 'application', null as unknown as ExternalIdentity), null);
  });
});

describe('providerStartRefusal: who may begin which ceremony where', () => {
  test('a realm the provider does not serve is refused for every intent', () => {
    for (const intent of ['signin', 'link', 'signup'] as const) {
      assert.equal(
        providerStartRefusal(policy(), { realm: 'management', intent, principal: principal('management') }),
        'realm_not_allowed',
      );
    }
  });

  test('a management-realm link always needs a management principal', () => {
    const both = policy({ realms: ['management', 'application'] });
    assert.equal(providerStartRefusal(both, { realm: 'management', intent: 'link', principal: null }), 'principal_required');
    assert.equal(
      providerStartRefusal(both, { realm: 'management', intent: 'link', principal: principal('application') }),
      'principal_of_other_realm',
    );
    assert.equal(providerStartRefusal(both, { realm: 'management', intent: 'link', principal: principal('management') }), null);
  });

  test("linking to another realm's subject is refused", () => {
    const both = policy({ realms: ['management', 'application'] });
    assert.equal(
      providerStartRefusal(both, { realm: 'application', intent: 'link', principal: principal('management') }),
      'principal_of_other_realm',
    );
  });

  test('signup only with just-in-time provisioning on, and never in the management realm', () => {
    const jit = { enabled: true, emailDomains: [] };
    assert.equal(providerStartRefusal(policy(), { realm: 'application', intent: 'signup', principal: null }), 'signup_not_allowed');
    assert.equal(providerStartRefusal(policy({ jit }), { realm: 'application', intent: 'signup', principal: null }), null);
    assert.equal(
      providerStartRefusal(policy({ jit, realms: ['management'] }), { realm: 'management', intent: 'signup', principal: null }),
      'signup_not_allowed',
    );
  });

  test('signin needs no principal', () => {
    assert.equal(providerStartRefusal(policy(), { realm: 'application', intent: 'signin', principal: null }), null);
  });
});

describe('jitRefusal: just-in-time provisioning only where the configuration explicitly allows it', () => {
  const on = (emailDomains: string[] = []) => policy({ jit: { enabled: true, emailDomains } });
  const verified = (email: string) => identity({ claims: { email, email_verified: true } });

  test('off by default', () => {
    assert.equal(jitRefusal(policy(), 'application', verified('ann@example.com')), 'jit_disabled');
  });

  test('never in the management realm', () => {
    assert.equal(jitRefusal(on(), 'management', verified('ann@example.com')), 'jit_not_in_realm');
  });

  test('with domains: a verified email in one of them, compared without case', () => {
    assert.equal(jitRefusal(on(['Example.COM']), 'application', verified('Ann@example.com')), null);
    assert.equal(jitRefusal(on(['example.com']), 'application', verified('ann@evil.example.net')), 'email_domain_not_allowed');
    assert.equal(jitRefusal(on(['example.com']), 'application', verified('ann@sub.example.com')), 'email_domain_not_allowed');
    assert.equal(jitRefusal(on(['example.com']), 'application', verified('example.com')), 'email_domain_not_allowed');
    assert.equal(
      jitRefusal(on(['example.com']), 'application', identity({ claims: { email: 'ann@example.com', email_verified: false } })),
      'email_not_verified',
    );
    assert.equal(
      jitRefusal(on(['example.com']), 'application', identity({ claims: { email: 'ann@example.com', email_verified: 'true' } })),
      'email_not_verified',
    );
    assert.equal(jitRefusal(on(['example.com']), 'application', identity()), 'email_not_verified');
  });

  test('without domains: any identity whose email, if it has one, is verified', () => {
    assert.equal(jitRefusal(on(), 'application', identity()), null);
    assert.equal(jitRefusal(on(), 'application', verified('ann@anywhere.org')), null);
    assert.equal(jitRefusal(on(), 'application', identity({ claims: { email: 'ann@anywhere.org' } })), 'email_not_verified');
  });
});

describe('session amr and the counter and flow rules', () => {
  test('a passkey session of the bundled WebAuthn package signed by the project key says hwk user, any other provider fed (RFC 8176)', () => {
    assert.deepEqual(providerAmr({ packageName: BUNDLED_PASSKEY_PACKAGE, signerKey: SVC_PUBLISHER_KEY }), ['hwk', 'user']);
    assert.deepEqual(providerAmr({ packageName: BUNDLED_PASSKEY_PACKAGE, signerKey: SVC_PUBLISHER_KEY.toUpperCase() }), ['hwk', 'user']);
    assert.deepEqual(providerAmr({ packageName: '@svc/provider-oidc', signerKey: SVC_PUBLISHER_KEY }), ['fed']);
  });

  test('a provider cannot choose its amr: the bundled package name signed by another key, or no verified signer, is fed', () => {
    const other = 'ab'.repeat(32);
    assert.deepEqual(providerAmr({ packageName: BUNDLED_PASSKEY_PACKAGE, signerKey: other }), ['fed']);
    assert.deepEqual(providerAmr({ packageName: BUNDLED_PASSKEY_PACKAGE, signerKey: null }), ['fed']);
    assert.deepEqual(providerAmr({ packageName: 'acme-passkeys', signerKey: other }), ['fed']);
  });

  test('a provider process that ended, hangs or was closed is an outage; its identity provider down is one of the identity provider; a refusal is not', () => {
    const failed = (reason: string, providerCode?: string) => ({ code: 'provider_failed', reason, providerCode });
    for (const reason of ['crashed', 'timeout', 'closed', 'oversized'])
      assert.equal(providerOutageOf(failed(reason)), 'unavailable', reason);
    assert.equal(providerOutageOf(failed('provider_error', 'discovery_failed')), 'identity_provider');
    assert.equal(providerOutageOf(failed('provider_error', 'response_refused')), null);
    assert.equal(providerOutageOf(failed('provider_error')), null);
    assert.equal(providerOutageOf(failed('malformed_answer')), null);
    assert.equal(providerOutageOf(new Error('timeout')), null, 'only the stable fields count, never a message');
    assert.equal(providerOutageOf({ code: 'store_unavailable', reason: 'timeout' }), null);
    assert.equal(providerOutageOf(null), null);
  });

  test("a refusal not marked as the user's fault may be an identity provider's outage: the provider's health decides; a definite refusal never", () => {
    const refused = (providerCode?: string) => ({ code: 'provider_failed', reason: 'provider_error', providerCode });
    // The OIDC provider's token request to an IdP that went down ends in response_refused.
    assert.equal(refusalMayBeOutage(refused('response_refused')), true);
    assert.equal(refusalMayBeOutage(refused('not_verified')), true, "any code the provider does not mark as the user's");
    assert.equal(refusalMayBeOutage(refused()), true, 'no code at all');
    for (const definite of ['provider_error', 'code_refused', 'invalid_flow_state']) {
      assert.equal(refusalMayBeOutage(refused(definite)), false, definite);
    }
    assert.equal(refusalMayBeOutage({ code: 'provider_failed', reason: 'malformed_answer' }), false, 'a malformed answer is no outage');
    assert.equal(refusalMayBeOutage({ code: 'provider_failed', reason: 'timeout' }), false, 'an outage already known is not asked again');
    assert.equal(refusalMayBeOutage(new Error('response_refused')), false, 'only the stable fields count, never a message');
    assert.equal(refusalMayBeOutage(null), false);
    assert.equal(refusalOutageOf({ status: 'down', detail: 'discovery failed' }), 'identity_provider');
    assert.equal(refusalOutageOf({ status: 'degraded' }), null);
    assert.equal(refusalOutageOf({ status: 'ok' }), null);
    assert.equal(refusalOutageOf(null), null, 'a health call that failed or timed out leaves the refusal');
  });

  test("the project publisher key in core is keys/svc-publisher.pub, the key the bundled providers' signatures verify with", () => {
    const file = new URL('../../../keys/svc-publisher.pub', import.meta.url);
    assert.equal(readFileSync(file, 'utf8').trim().toLowerCase(), SVC_PUBLISHER_KEY);
  });

  test('cloned authenticator: the counter must strictly increase, unless both are 0; a credential without one stays without', () => {
    assert.equal(isCounterAdvance(41, 42), true);
    assert.equal(isCounterAdvance(42, 42), false);
    assert.equal(isCounterAdvance(42, 7), false);
    assert.equal(isCounterAdvance(0, 0), true);
    assert.equal(isCounterAdvance(0, 1), true);
    assert.equal(isCounterAdvance(1, 0), false);
    assert.equal(isCounterAdvance(null, null), true);
    assert.equal(isCounterAdvance(null, 3), false);
    assert.equal(isCounterAdvance(3, null), false);
  });

  test('a flow is consumable once, before it expires, and not when dated beyond the clock skew', () => {
    const flow = { createdAt: T, expiresAt: T + 600_000, consumedAt: null };
    assert.equal(isFlowConsumable(flow, T + 599_999), true);
    assert.equal(isFlowConsumable(flow, T + 600_000), false);
    assert.equal(isFlowConsumable({ ...flow, consumedAt: T + 1 }, T + 2), false);
    assert.equal(isFlowConsumable(flow, T - 1000), true);
    assert.equal(isFlowConsumable(flow, T - 1001), false);
  });
});

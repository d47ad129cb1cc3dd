import type { Principal } from './principal.js';
import type { ExternalIdentity, ProviderIntent, ProviderPolicy } from './provider.js';
import type { Realm } from './realm.js';

// The service's rules for provider ceremonies, pure: who may begin which ceremony in which
// realm, when just-in-time provisioning applies, and what a provider session's `amr` says.
// The use cases (use-cases/provider-flow.ts) read the store and call these.

/** How long a provider ceremony may take, from `begin` to `finish`: 10 minutes. */
export const PROVIDER_FLOW_TTL_SECONDS = 600;

/**
 * Why a ceremony may not begin, or null when it may: the provider must serve the realm; `link`
 * needs a signed-in principal of that same realm (so a management-realm link always needs an
 * existing management principal, and nobody links to another realm's subject); `signup` needs
 * just-in-time provisioning switched on, in the application realm only.
 *
 * @example
 * providerStartRefusal(policy, { realm: 'management', intent: 'signup', principal: null }); // 'signup_not_allowed'
 */
export function providerStartRefusal(
  policy: ProviderPolicy,
  input: { readonly realm: Realm; readonly intent: ProviderIntent; readonly principal: Principal | null },
): 'realm_not_allowed' | 'principal_required' | 'principal_of_other_realm' | 'signup_not_allowed' | null {
  if (!policy.realms.includes(input.realm)) return 'realm_not_allowed';
  switch (input.intent) {
    case 'signin':
      return null;
    case 'link':
      if (input.principal === null) return 'principal_required';
      return input.principal.realm === input.realm ? null : 'principal_of_other_realm';
    case 'signup':
      return input.realm === 'application' && policy.jit.enabled ? null : 'signup_not_allowed';
  }
}

/**
 * Why just-in-time provisioning of a new subject for `identity` is refused, or null when the
 * configuration explicitly allows it: application realm only, `:provider/jit` on, and the email
 * verified: with `:provider/jit-email-domains` set, a verified email in one of them (compared
 * without case); without, any identity whose email, if it has one, is verified.
 *
 * @example
 * jitRefusal({ ...policy, jit: { enabled: true, emailDomains: ['example.com'] } }, 'application',
 *   { issuer, subject, claims: { email: 'ann@example.com', email_verified: true } }); // null
 */
export function jitRefusal(
  policy: ProviderPolicy,
  realm: Realm,
  identity: ExternalIdentity,
): 'jit_not_in_realm' | 'jit_disabled' | 'email_not_verified' | 'email_domain_not_allowed' | null {
  if (realm !== 'application') return 'jit_not_in_realm';
  if (!policy.jit.enabled) return 'jit_disabled';
  const email = identity.claims.email;
  const verified = identity.claims.email_verified === true;
  if (policy.jit.emailDomains.length === 0) {
    return email === undefined || verified ? null : 'email_not_verified';
  }
  if (typeof email !== 'string' || !verified) return 'email_not_verified';
  const at = email.lastIndexOf('@');
  const domain = at < 1 ? '' : email.slice(at + 1).toLowerCase();
  return policy.jit.emailDomains.some((d) => d.toLowerCase() === domain) ? null : 'email_domain_not_allowed';
}

/**
 * What a provider session's `amr` says (RFC 8176): a passkey is a hardware-bound key with a
 * user gesture (`["hwk", "user"]`); any other provider vouches for an identity at an external
 * issuer (`["fed"]`).
 *
 * @example
 * providerAmr('webauthn'); // ['hwk', 'user']
 */
export function providerAmr(kind: string): readonly string[] {
  return kind === 'webauthn' ? ['hwk', 'user'] : ['fed'];
}

import type { Principal } from './principal.js';
import type { ExternalIdentity, ProviderHealth, ProviderIntent, ProviderPolicy } from './provider.js';
import type { Realm } from './realm.js';
import type { UserRecord } from './store.js';
import { defaultUser } from './store-rows.js';
import type { ProvidedAttributes } from './use-cases/users.js';

// The service's rules for provider ceremonies, pure: who may begin which ceremony in which
// realm, when just-in-time provisioning applies, what a provider session's `amr` says, and
// which provider failures are outages rather than refusals.
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
 * The user a just-in-time sign-in creates with its new subject (in the link's transaction: the
 * store's `createLink` with its 4th argument): the identity provider's attributes, owned by it
 * (`provider:<name>`, refreshed at each sign-in); the name the person typed at sign-up, when
 * given, as their own (`self`: no provider's refresh replaces it); the configured groups
 * (`:provider/jit-groups`, as the operator's); and the configured status: `disabled` waits for
 * an operator to enable it (`:provider/jit-status`, sign-up by invitation).
 *
 * @example
 * jitUser(policy, { subject: 'sub_...', realm: 'application', now, attributes: { email: 'ann@example.com', emailVerified: true }, displayName: null });
 */
export function jitUser(
  policy: ProviderPolicy,
  input: {
    readonly subject: string;
    readonly realm: Realm;
    readonly now: number;
    readonly attributes: ProvidedAttributes;
    readonly displayName: string | null;
  },
): UserRecord {
  const source = `provider:${policy.name}` as const;
  const { attributes: a, displayName } = input;
  const groups = policy.jit.groups ?? [];
  const disabled = policy.jit.status === 'disabled';
  return Object.freeze({
    ...defaultUser(input),
    name: displayName ?? a.name ?? null,
    nameSource: displayName !== null ? 'self' : a.name !== undefined ? source : null,
    email: a.email ?? null,
    emailVerified: a.email !== undefined && a.emailVerified === true,
    emailSource: a.email !== undefined ? source : null,
    ...(groups.length > 0
      ? { groups: Object.freeze([...groups]), groupsSource: 'operator' as const }
      : a.groups !== undefined
        ? { groups: a.groups, groupsSource: source }
        : {}),
    status: disabled ? 'disabled' : 'active',
    disabledAt: disabled ? input.now : null,
  });
}

/**
 * The verified email by which an identity with no link may be linked to an existing user
 * (`:provider/link-by-verified-email`), or null when it may not: the option on, the application
 * realm, a sign-in, and an email the identity provider says is verified. An unverified email
 * never links.
 *
 * @example
 * emailToLinkBy({ ...policy, linkByVerifiedEmail: true }, 'application', 'signin', { email: 'ann@example.com', emailVerified: true }); // 'ann@example.com'
 */
export function emailToLinkBy(policy: ProviderPolicy, realm: Realm, intent: ProviderIntent, attributes: ProvidedAttributes): string | null {
  if (policy.linkByVerifiedEmail !== true || realm !== 'application' || intent !== 'signin') return null;
  return attributes.email !== undefined && attributes.emailVerified === true ? attributes.email : null;
}

/**
 * Whom an identity is linked to by its verified email, given the users of the realm with that
 * email: the one user whose email is verified and was set by an operator or the directory (a
 * user holding the address unverified, or verified only by an identity provider, e.g.
 * from another identity provider that did not vouch for it, never receives the link: that
 * would let whoever typed the address first take the person's next sign-in); `none` when no
 * user has it verified (the identity is then new: just-in-time rules apply); a refusal when
 * several do (`email_owner_ambiguous`), or when the one who does already has an identity at the
 * same issuer (`email_owner_has_issuer_link`: an issuer that moved an address to a new subject
 * may have given it to another person).
 *
 * @example
 * emailLinkOwner([ann], false); // { owner: ann }
 */
export function emailLinkOwner(
  candidates: readonly UserRecord[],
  ownerLinkedAtIssuer: (subject: string) => boolean,
): { readonly owner: UserRecord } | 'none' | 'email_owner_ambiguous' | 'email_owner_has_issuer_link' {
  // Only an address the operator or the company directory vouched for: one that an identity
  // provider verified (a just-in-time user's) may have been claimed first by whoever could get a
  // weaker provider to verify the victim's address (a pre-hijack), so it never receives a link.
  const verified = candidates.filter((u) => u.emailVerified && (u.emailSource === 'operator' || u.emailSource === 'scim'));
  const [owner, ...others] = verified;
  if (owner === undefined) return 'none';
  if (others.length > 0) return 'email_owner_ambiguous';
  return ownerLinkedAtIssuer(owner.subject) ? 'email_owner_has_issuer_link' : { owner };
}

/**
 * The project's own publisher key (`keys/svc-publisher.pub`, 64 lowercase hex digits): the key
 * that signs the bundled provider packages. A test keeps it equal to the file.
 */
export const SVC_PUBLISHER_KEY = '8e28bf57c7cde45f53411513dbe1baeee7a8034c39930273726146176c7ac718';

/** The bundled passkey provider: the one package whose sessions may say they used a hardware key. */
export const BUNDLED_PASSKEY_PACKAGE = '@svc/provider-webauthn';

/**
 * What a provider session's `amr` says (RFC 8176), decided from what the operator trusted, never
 * from what the provider says at run time (its `kind`): a passkey of the bundled WebAuthn
 * provider, whose package is signed by the project's own publisher key, is a hardware-bound
 * key with a user gesture (`["hwk", "user"]`). Any other provider, a third party's that
 * declares `webauthn` included, only vouches for an identity it established on its own
 * (`["fed"]`): svc cannot know how it checked it, so it never passes a passkey-only rule.
 * The package name and signer key come from the package verification (`verifyProviderPackage`).
 *
 * @example
 * providerAmr({ packageName: '@svc/provider-webauthn', signerKey: SVC_PUBLISHER_KEY }); // ['hwk', 'user']
 * providerAmr({ packageName: 'acme-passkeys', signerKey: acmeKey }); // ['fed']
 */
export function providerAmr(provider: { readonly packageName: string; readonly signerKey: string | null }): readonly string[] {
  const bundled = provider.packageName === BUNDLED_PASSKEY_PACKAGE && provider.signerKey?.toLowerCase() === SVC_PUBLISHER_KEY;
  return bundled ? ['hwk', 'user'] : ['fed'];
}

/** `Retry-After` of `503 provider_unavailable`: a crashed or stopped provider process is restarted within seconds. */
export const PROVIDER_UNAVAILABLE_RETRY_SECONDS = 5;

/** `Retry-After` of `502 identity_provider_unavailable`: an identity provider's outage lasts longer. */
export const IDENTITY_PROVIDER_RETRY_SECONDS = 30;

/**
 * The error codes a provider throws to say that its identity provider cannot be used (not that
 * the user's proof is wrong): the bundled OIDC provider's `discovery_failed` (the issuer is
 * unreachable, does not answer in time, or its discovery document names another issuer).
 */
export const IDENTITY_PROVIDER_FAILURE_CODES: readonly string[] = Object.freeze(['discovery_failed']);

/** The host's failures that mean the provider's process cannot answer now (`ProviderError.reason` of @svc/provider-host). */
const UNAVAILABLE_REASONS: ReadonlySet<string> = new Set(['crashed', 'timeout', 'closed', 'oversized']);

/**
 * Whether an error thrown by a provider call is an outage rather than a refusal of the user's
 * proof: `unavailable` when the confined process ended, did not answer in time, is being
 * restarted or was closed (the host's `provider_failed` with those reasons); `identity_provider`
 * when the provider says its identity provider cannot be used
 * ({@link IDENTITY_PROVIDER_FAILURE_CODES}); null for anything else (the provider refused the
 * proof, or answered malformed). An outage is answered 503 or 502 with `Retry-After`, and is
 * neither audited as a refusal nor counted as a failed attempt: the user did nothing wrong.
 * Read from the error's stable fields (`code`, `reason`, `providerCode`), never its message.
 *
 * @example
 * providerOutageOf(new ProviderError('passkeys', 'timeout', 'finish did not answer within 10000 ms')); // 'unavailable'
 */
export function providerOutageOf(error: unknown): 'unavailable' | 'identity_provider' | null {
  if (typeof error !== 'object' || error === null) return null;
  const e = error as { code?: unknown; reason?: unknown; providerCode?: unknown };
  if (e.code !== 'provider_failed' || typeof e.reason !== 'string') return null;
  if (UNAVAILABLE_REASONS.has(e.reason)) return 'unavailable';
  if (e.reason === 'provider_error' && typeof e.providerCode === 'string' && IDENTITY_PROVIDER_FAILURE_CODES.includes(e.providerCode)) {
    return 'identity_provider';
  }
  return null;
}

/**
 * The refusal codes that definitely say the user's proof or ceremony is wrong, whatever the
 * state of the provider's identity provider: the bundled OIDC provider's `provider_error` (the
 * IdP sent the browser back with an error), `code_refused` (the IdP's token endpoint answered
 * and refused the code or the client) and `invalid_flow_state` (the flow is not one it began).
 * A refusal with any other code, or none (`response_refused`: the callback or the token
 * response failed a check, which is also what a token request to an IdP that went down after
 * its discovery document was cached ends in), may be an outage in disguise.
 */
export const DEFINITE_REFUSAL_CODES: readonly string[] = Object.freeze(['provider_error', 'code_refused', 'invalid_flow_state']);

/**
 * Whether a provider's refused `finish` may be its identity provider's outage rather than the
 * user's wrong proof, so that the provider's `health()` must be asked before answering
 * ({@link refusalOutageOf}): a provider error (the host's `provider_failed` with reason
 * `provider_error`) whose `providerCode` is not one of {@link DEFINITE_REFUSAL_CODES}. An
 * outage already known (`providerOutageOf`), a malformed answer, or any other error is not.
 * Read from the error's stable fields, never its message.
 *
 * @example
 * refusalMayBeOutage({ code: 'provider_failed', reason: 'provider_error', providerCode: 'response_refused' }); // true
 * refusalMayBeOutage({ code: 'provider_failed', reason: 'provider_error', providerCode: 'code_refused' }); // false
 */
export function refusalMayBeOutage(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const e = error as { code?: unknown; reason?: unknown; providerCode?: unknown };
  if (e.code !== 'provider_failed' || e.reason !== 'provider_error') return false;
  return !(typeof e.providerCode === 'string' && DEFINITE_REFUSAL_CODES.includes(e.providerCode));
}

/**
 * What a refusal that may be an outage ({@link refusalMayBeOutage}) is, given what the
 * provider's own `health()` answered just after (a fresh check: the OIDC provider fetches its
 * issuer's discovery document anew): `identity_provider` when it reports `down` (answered `502
 * identity_provider_unavailable` with `Retry-After`, neither audited as a refusal nor counted
 * as a failed attempt); null otherwise (`ok`, `degraded`, or the health call itself failed or
 * timed out: `health` is then null), and the refusal stands.
 *
 * @example
 * refusalOutageOf({ status: 'down', detail: 'discovery failed' }); // 'identity_provider'
 * refusalOutageOf(null); // null: the health check failed, the refusal stands
 */
export function refusalOutageOf(health: ProviderHealth | null): 'identity_provider' | null {
  return typeof health === 'object' && health !== null && health.status === 'down' ? 'identity_provider' : null;
}

import type { AuditData } from '../audit.js';
import type { AuthDeps } from '../deps.js';
import { AuthError } from '../errors.js';
import { isIdOfKind, newId } from '../ids.js';
import type { Principal } from '../principal.js';
import type {
  ExternalIdentity,
  ProviderBeginResult,
  ProviderContext,
  ProviderFinishResult,
  ProviderHandle,
  ProviderHealth,
  ProviderIntent,
  ProviderJson,
  ProviderReply,
  ProviderRequest,
  StoredCredential,
} from '../provider.js';
import {
  emailLinkOwner,
  emailToLinkBy,
  IDENTITY_PROVIDER_RETRY_SECONDS,
  jitRefusal,
  jitUser,
  PROVIDER_FLOW_TTL_SECONDS,
  PROVIDER_UNAVAILABLE_RETRY_SECONDS,
  providerAmr,
  providerOutageOf,
  providerStartRefusal,
  refusalMayBeOutage,
  refusalOutageOf,
} from '../provider-decisions.js';
import { checkProviderIdentity } from '../provider-policy.js';
import { isRealm, type Realm } from '../realm.js';
import { type SessionClientInput, sessionClient } from '../session-client.js';
import type { FlowRecord, LinkRecord, PairingIntentRecord, UserRecord } from '../store.js';
import { defaultUser } from '../store-rows.js';
import { newSessionRecord } from '../store-rules.js';
import { digestToken, mintSessionToken } from '../tokens.js';
import { checkDisplayName } from '../users.js';
import type { LinkJson } from '../wire/links.js';
import type { TokenPairJson } from '../wire/management.js';
import { tokenPairToJson } from '../wire.js';
import { auditDraft } from './event.js';
import { linkToJson } from './links.js';
import { checkLinkPairing } from './pairing.js';
import { identityAttributesFromClaims, type ProvidedAttributes, refreshedUser } from './users.js';

/** The largest provider `state`, and the largest credential data, kept in the store (JSON text). */
export const PROVIDER_STATE_MAX_CHARS = 16_384;

const INTENTS: readonly ProviderIntent[] = ['signin', 'link', 'signup'];

/** Where a redirect-based provider sends the browser back. */
export function providerCallbackUrl(origin: string, name: string): string {
  return `${origin}/.svc/auth/v1/providers/${encodeURIComponent(name)}/callback`;
}

/** The gateway's public origin, exactly (`https://host[:port]`, no path): anything else is a bug of the caller. */
function checkOrigin(origin: unknown): string {
  let url: URL;
  try {
    url = new URL(String(origin));
  } catch {
    throw new AuthError('invalid_request', 'origin must be an http(s) origin');
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.origin !== origin) {
    throw new AuthError('invalid_request', 'origin must be an http(s) origin such as https://app.example.com');
  }
  return url.origin;
}

/** JSON text of a provider value, bounded; null when it is not JSON or too large. */
function boundedJson(value: unknown): string | null {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    return null;
  }
  return text === undefined || text.length > PROVIDER_STATE_MAX_CHARS ? null : text;
}

function checkReply(reply: unknown): ProviderReply | null {
  if (typeof reply !== 'object' || reply === null) return null;
  const r = reply as { kind?: unknown; body?: unknown; location?: unknown };
  if (r.kind === 'json' && boundedJson(r.body) !== null) return { kind: 'json', body: r.body as ProviderJson };
  if (r.kind === 'redirect' && typeof r.location === 'string') {
    try {
      const url = new URL(r.location);
      if (url.protocol === 'https:' || url.protocol === 'http:') return { kind: 'redirect', location: url.href };
    } catch {
      return null;
    }
  }
  return null;
}

/**
 * The answer to a provider outage (core's `providerOutageOf`): `503 provider_unavailable`, or
 * `502 identity_provider_unavailable` when its identity provider cannot be used, with
 * `Retry-After`, naming the provider module in a sentence of ours (never the provider's text,
 * which goes to the log only). Never audited as a refusal: the user did nothing wrong.
 */
function providerOutage(deps: AuthDeps, name: string, op: string, error: unknown, outage: 'unavailable' | 'identity_provider'): AuthError {
  deps.log.warn(
    { event: 'provider.unavailable', provider: name, op, outage, err: error instanceof Error ? error.message : String(error) },
    `provider ${name} is unavailable`,
  );
  if (outage === 'identity_provider') {
    return new AuthError(
      'identity_provider_unavailable',
      `the sign-in provider ${name} cannot reach its identity provider now; try again later`,
      {
        headers: { 'retry-after': String(IDENTITY_PROVIDER_RETRY_SECONDS) },
      },
    );
  }
  return new AuthError('provider_unavailable', `the sign-in provider ${name} is unavailable now; try again shortly`, {
    headers: { 'retry-after': String(PROVIDER_UNAVAILABLE_RETRY_SECONDS) },
  });
}

/**
 * The provider's own health, asked after a refusal that may be an outage (`refusalMayBeOutage`),
 * or null when the health call fails. Bounded by the handle: the provider host gives up on any
 * call, this one included, after its call timeout (10 s by default), so a hanging check never
 * hangs the request; the refusal then stands.
 */
async function freshHealth(deps: AuthDeps, provider: ProviderHandle): Promise<ProviderHealth | null> {
  try {
    return await provider.health();
  } catch (error) {
    deps.log.warn(
      { event: 'provider.health_failed', provider: provider.policy.name, err: error instanceof Error ? error.message : String(error) },
      'the provider health check after a refusal failed',
    );
    return null;
  }
}

/** The credential ids the subject already has with this provider (a passkey ceremony excludes them). */
async function existingCredentials(deps: AuthDeps, provider: ProviderHandle, realm: Realm, subject: string | null): Promise<string[]> {
  if (subject === null) return [];
  return (await deps.store.listLinks({ realm, subject, provider: provider.policy.name })).map((l) => l.externalSubject);
}

/**
 * Begins a provider ceremony: checks who may begin what (`providerStartRefusal`: the provider
 * serves the realm; `link` needs a signed-in principal of that realm, so a management-realm link
 * always needs an existing management principal; `signup` only where just-in-time provisioning
 * is on, in the application realm), asks the provider to `begin`, and keeps its state in a
 * single-use flow for {@link PROVIDER_FLOW_TTL_SECONDS}. The flow id goes back to the browser
 * (the gateway binds it with a cookie); the state never does. A provider that fails to begin,
 * or answers something unusable, is `503 provider_unavailable` (`502
 * identity_provider_unavailable` when its identity provider cannot be used), never a 500.
 *
 * With `pairing` (a link intent an admin prepared: `prepareLinkPairing`), `link` needs no
 * signed-in principal: the intent's one-time code, checked here (`checkLinkPairing`: wrong codes
 * counted, the fifth burns it), authorises linking a credential of this provider to the
 * intent's subject. The flow remembers the intent; finishing it uses the intent up.
 *
 * @example
 * const { flowId, reply } = await startProviderFlow(deps, { provider, realm: 'application', intent: 'signin', principal: null, origin: 'https://app.example.com' });
 */
export async function startProviderFlow(
  deps: AuthDeps,
  input: {
    readonly provider: ProviderHandle;
    readonly realm: Realm;
    readonly intent: ProviderIntent;
    readonly principal: Principal | null;
    readonly pairing?: { readonly intentId: string; readonly code: string };
    readonly origin: string;
  },
): Promise<{ readonly flowId: string; readonly reply: ProviderReply; readonly expiresAt: number }> {
  const { provider, realm, intent, principal } = input;
  const name = provider.policy.name;
  if (!isRealm(realm)) throw new AuthError('invalid_request', 'realm must be "management" or "application"');
  if (!INTENTS.includes(intent)) throw new AuthError('invalid_request', 'intent must be "signin", "link" or "signup"');
  const origin = checkOrigin(input.origin);
  let paired: PairingIntentRecord | null = null;
  if (input.pairing !== undefined) {
    if (intent !== 'link') throw new AuthError('invalid_request', 'a pairing intent is completed with intent "link"');
    if (!provider.policy.realms.includes(realm)) {
      throw new AuthError('invalid_request', `the provider ${name} does not serve the ${realm} realm`);
    }
    paired = await checkLinkPairing(deps, { intentId: input.pairing.intentId, code: input.pairing.code, provider: name, realm });
  }
  // The intent's code stands in for the principal a link otherwise needs.
  const refused = paired !== null ? null : providerStartRefusal(provider.policy, { realm, intent, principal });
  switch (refused) {
    case null:
      break;
    case 'realm_not_allowed':
      throw new AuthError('invalid_request', `the provider ${name} does not serve the ${realm} realm`);
    case 'signup_not_allowed':
      throw new AuthError('invalid_request', `the provider ${name} does not provision new subjects in the ${realm} realm`);
    case 'principal_required':
    case 'principal_of_other_realm':
      throw new AuthError('invalid_token', `linking a credential needs a signed-in principal of the ${realm} realm`, { realm });
  }
  const subject = paired !== null ? paired.subject : intent === 'link' && principal !== null ? principal.subject : null;
  const ctx: ProviderContext = {
    realm,
    intent,
    origin,
    callbackUrl: providerCallbackUrl(origin, name),
    subject,
    existingCredentials: await existingCredentials(deps, provider, realm, subject),
  };
  // A provider that cannot begin (whatever it failed with) is unavailable: never a 500.
  let begun: ProviderBeginResult;
  try {
    begun = await provider.begin(ctx);
  } catch (error) {
    throw providerOutage(deps, name, 'begin', error, providerOutageOf(error) ?? 'unavailable');
  }
  const state = boundedJson(begun?.state);
  const reply = checkReply(begun?.reply);
  if (state === null || reply === null) {
    deps.log.error({ event: 'provider.begin_invalid', provider: name }, 'the provider answered begin with something unusable');
    throw providerOutage(deps, name, 'begin', new Error('an unusable answer'), 'unavailable');
  }
  const now = deps.clock.now();
  const flow: FlowRecord = {
    id: newId('flow', deps.clock, deps.random),
    provider: name,
    realm,
    intent,
    subject,
    pairingIntentId: paired?.id ?? null,
    state,
    createdAt: now,
    expiresAt: now + PROVIDER_FLOW_TTL_SECONDS * 1000,
  };
  await deps.store.createFlow(flow);
  return { flowId: flow.id, reply, expiresAt: flow.expiresAt };
}

/** What finishing a provider ceremony led to: a session (sign-in, sign-up), or a new link. */
export type ProviderFlowOutcome =
  | { readonly outcome: 'session'; readonly pair: TokenPairJson }
  | { readonly outcome: 'linked'; readonly link: LinkJson };

function checkCredential(
  credential: unknown,
  identity: ExternalIdentity,
): { credential: StoredCredential | null; data: string | null } | null {
  if (credential === null || credential === undefined) return { credential: null, data: null };
  if (typeof credential !== 'object') return null;
  const c = credential as { id?: unknown; data?: unknown; counter?: unknown };
  // The link is keyed by the identity's subject: a credential under another id would be kept
  // under the wrong key.
  if (c.id !== identity.subject) return null;
  const counter = c.counter ?? null;
  if (counter !== null && !(Number.isSafeInteger(counter) && (counter as number) >= 0)) return null;
  const data = boundedJson(c.data ?? null);
  if (data === null) return null;
  return { credential: { id: c.id, data: (c.data ?? null) as ProviderJson, counter: counter as number | null }, data };
}

/**
 * Finishes a provider ceremony. Uses up the flow (single use, the same provider, not expired),
 * hands the provider the stored credential the request names, lets it `finish`, and then checks
 * its answer before acting on it (`checkProviderIdentity`: allowed issuer, served realm, subject
 * and claims well formed). Then, by the flow's intent:
 * - `signin`: the live link of (realm, issuer, subject) signs in: an ordinary session whose
 *   device is the link id, its `amr` saying how (`providerAmr`), the credential's signature
 *   counter strictly advancing (a regression, a cloned authenticator, is refused); with no link,
 *   just-in-time provisioning where the configuration allows it (`jitRefusal`): a new subject,
 *   its link and the session; otherwise refused;
 * - `signup`: a new subject, its link and a session, where provisioning is allowed;
 * - `link`: the identity is linked to the principal who began the flow (who must be the one
 *   finishing it).
 * Every refusal after the flow is found is audited as `provider.signin_failed`; a sign-in as
 * `provider.signin` with `session.created`, a new link as `link.created`. A provider outage
 * (`providerOutageOf`: its process ended or hangs, its identity provider cannot be used) is
 * `503 provider_unavailable` or `502 identity_provider_unavailable`, not a refusal; the flow is
 * used up all the same, so the browser begins again. A refused `finish` that may be an outage
 * in disguise (`refusalMayBeOutage`: a code not marked as the user's fault, such as the OIDC
 * provider's `response_refused` when the IdP went down after its discovery document was cached)
 * asks the provider's `health()` (bounded by the host's call timeout): `down` makes it `502
 * identity_provider_unavailable` (`refusalOutageOf`), anything else leaves it the refusal.
 *
 * @example
 * const r = await finishProviderFlow(deps, { provider, flowId, request: { query: {}, body }, origin, principal: null });
 * if (r.outcome === 'session') setCookies(r.pair);
 */
export async function finishProviderFlow(
  deps: AuthDeps,
  input: {
    readonly provider: ProviderHandle;
    readonly flowId: unknown;
    readonly request: ProviderRequest;
    readonly origin: string;
    readonly principal: Principal | null;
    readonly client?: SessionClientInput;
    /**
     * The name the person typed at sign-up (the sign-in page's `display_name`, the service's own
     * field, never the provider's): checked with `checkDisplayName`, kept as the new user's name
     * (source `self`). Only for a `signup` flow.
     */
    readonly displayName?: unknown;
  },
): Promise<ProviderFlowOutcome> {
  const { provider, principal } = input;
  const name = provider.policy.name;
  const origin = checkOrigin(input.origin);
  if (!isIdOfKind(input.flowId, 'flow')) throw new AuthError('invalid_flow', 'flow_id must be a flow id (flw_...)');
  let displayName: string | null = null;
  if (input.displayName !== undefined) {
    const checked = checkDisplayName(input.displayName);
    if ('problem' in checked) throw new AuthError('invalid_request', `display_name: ${checked.problem}`);
    displayName = checked.name;
  }
  const flowId = input.flowId;
  const now = deps.clock.now();
  const fail = async (
    code: 'invalid_credential' | 'invalid_flow' | 'invalid_token' | 'already_linked' | 'invalid_pairing_intent' | 'user_disabled',
    reason: string,
    detail: string,
    flow: FlowRecord | null,
    extra: AuditData = {},
    /** The subject refused, when known beyond the flow's (a disabled user's sign-in). */
    subject?: string,
  ): Promise<AuthError> => {
    await deps.store.appendAuditEvent(
      auditDraft(deps, 'provider.signin_failed', {
        realm: flow?.realm ?? null,
        subject: subject ?? flow?.subject ?? null,
        at: now,
        data: { provider: name, reason, flow_id: flowId, intent: flow?.intent ?? null, ...extra },
      }),
    );
    deps.log.warn({ event: 'provider.signin_failed', provider: name, reason }, 'provider sign-in refused');
    return new AuthError(code, detail, code === 'invalid_token' && flow !== null ? { realm: flow.realm } : {});
  };

  const flow = await deps.store.consumeFlow({ id: flowId, now });
  if (flow === null) throw await fail('invalid_flow', 'flow_unknown_expired_or_used', 'unknown, expired or already finished flow', null);
  if (flow.provider !== name) throw await fail('invalid_flow', 'flow_of_other_provider', 'the flow was begun with another provider', flow);
  const { realm, intent } = flow;
  if (displayName !== null && intent !== 'signup') {
    throw new AuthError('invalid_request', 'display_name is only for a sign-up: it names the new user');
  }
  // The policy may have changed since the flow began: checked again.
  if (!provider.policy.realms.includes(realm)) {
    throw await fail('invalid_credential', 'realm_not_allowed', `the provider ${name} does not serve the ${realm} realm`, flow);
  }
  const paired = flow.pairingIntentId === null ? null : await deps.store.getPairingIntent(flow.pairingIntentId);
  if (flow.pairingIntentId !== null && (paired === null || paired.subject !== flow.subject || paired.realm !== realm)) {
    throw await fail('invalid_flow', 'pairing_intent_gone', 'the link intent this flow completes is gone', flow);
  }
  if (intent === 'link' && paired === null && (principal === null || principal.realm !== realm || principal.subject !== flow.subject)) {
    throw await fail('invalid_token', 'principal_mismatch', 'a link must be finished by the principal who began it', flow);
  }

  // The stored credential the request names (a passkey assertion's id), under this provider.
  let stored: LinkRecord | null = null;
  let credentialId: string | null;
  try {
    credentialId = await provider.credentialIdOf(input.request);
  } catch (error) {
    const outage = providerOutageOf(error);
    if (outage !== null) throw providerOutage(deps, name, 'credentialIdOf', error, outage);
    deps.log.warn({ event: 'provider.credential_id_failed', provider: name, err: (error as Error)?.message }, 'the provider failed');
    throw await fail('invalid_credential', 'provider_refused', 'the provider could not read the credential', flow);
  }
  if (typeof credentialId === 'string' && credentialId.length >= 1 && credentialId.length <= 255) {
    for (const issuer of provider.policy.allowedIssuers) {
      const link = await deps.store.findLiveLink({ realm, issuer, externalSubject: credentialId });
      if (link !== null && link.provider === name) {
        stored = link;
        break;
      }
    }
  }
  let storedCredential: StoredCredential | null = null;
  if (stored !== null) {
    const data = stored.credentialData === null ? null : (JSON.parse(stored.credentialData) as ProviderJson);
    storedCredential = { id: stored.externalSubject, data, counter: stored.counter };
  }
  const ctx: ProviderContext = {
    realm,
    intent,
    origin,
    callbackUrl: providerCallbackUrl(origin, name),
    subject: flow.subject,
    existingCredentials: await existingCredentials(deps, provider, realm, flow.subject),
  };
  let result: ProviderFinishResult;
  try {
    result = await provider.finish(ctx, {
      state: JSON.parse(flow.state) as ProviderJson,
      request: input.request,
      credential: storedCredential,
    });
  } catch (error) {
    // An outage (the process ended or hangs, the identity provider is down) is not the user's
    // wrong proof: no refusal audited, no failed attempt counted (a 5xx never is).
    const outage = providerOutageOf(error) ?? (refusalMayBeOutage(error) ? refusalOutageOf(await freshHealth(deps, provider)) : null);
    if (outage !== null) throw providerOutage(deps, name, 'finish', error, outage);
    deps.log.warn({ event: 'provider.finish_failed', provider: name, err: (error as Error)?.message }, 'the provider refused the proof');
    throw await fail('invalid_credential', 'provider_refused', 'the provider could not verify the credential', flow);
  }
  const identity = result?.identity;
  const refused = identity === undefined ? 'no identity' : checkProviderIdentity(provider.policy, realm, identity);
  if (refused !== null) {
    throw await fail('invalid_credential', 'identity_refused', `the provider's answer was refused: ${refused}`, flow);
  }
  const checked = checkCredential(result.credential, identity);
  if (checked === null) {
    throw await fail('invalid_credential', 'credential_malformed', "the provider's credential was refused: malformed or too large", flow);
  }
  const facts = { issuer: identity.issuer, external_subject: identity.subject };
  // Who the identity provider says the person is, checked like an operator's input: what fails
  // a check is left out (and logged), never passed on. Written to the user at each sign-in.
  const mapped = identityAttributesFromClaims(identity.claims, {
    groupsClaim: provider.policy.groupsClaim ?? null,
    groupPrefix: provider.policy.groupPrefix ?? null,
  });
  if (mapped.dropped.length > 0) {
    deps.log.warn(
      { event: 'provider.claims_dropped', provider: name, dropped: mapped.dropped },
      'claims that failed their check were left out',
    );
  }
  const attributes = mapped.attributes;

  const linked = await deps.store.findLiveLink({ realm, issuer: identity.issuer, externalSubject: identity.subject });
  // What `svc auth links` shows for the credential: the email, the name typed at sign-up, the
  // provider's name for the person, else the provider module.
  const linkName = attributes.email ?? displayName ?? attributes.name ?? name;
  const newLink = (subject: string, label = linkName): LinkRecord => ({
    id: newId('link', deps.clock, deps.random),
    realm,
    subject,
    provider: name,
    issuer: identity.issuer,
    externalSubject: identity.subject,
    credentialData: checked.data,
    counter: checked.credential?.counter ?? null,
    name: label,
    createdAt: now,
    lastUsedAt: null,
    removedAt: null,
  });
  const createLink = async (
    link: LinkRecord,
    by: Principal | null,
    how: { readonly via?: 'jit' | 'verified_email'; readonly user?: UserRecord; readonly data?: AuditData } = {},
  ): Promise<LinkRecord | null> => {
    // A just-in-time user is created with its link, audited first (its attributes, by whom: the provider).
    const userCreated =
      how.user === undefined
        ? []
        : [
            auditDraft(deps, 'user.created', {
              realm,
              subject: link.subject,
              at: now,
              data: {
                via: 'jit',
                provider: name,
                by_subject: null,
                by_session: null,
                name: how.user.name,
                email: how.user.email,
                email_verified: how.user.emailVerified,
                groups: how.user.groups.join(','),
                status: how.user.status,
              },
            }),
          ];
    const created = await deps.store.createLink(
      link,
      [
        ...userCreated,
        auditDraft(deps, 'link.created', {
          realm,
          subject: link.subject,
          deviceId: link.id,
          at: now,
          data: {
            provider: name,
            ...facts,
            via: how.via ?? (paired !== null ? 'pairing' : intent === 'link' ? 'principal' : 'jit'),
            by_subject: paired?.createdBy ?? by?.subject ?? null,
            by_session: by?.session ?? null,
            ...(paired === null ? {} : { intent_id: paired.id }),
            ...how.data,
          },
        }),
      ],
      paired === null ? undefined : { id: paired.id, codeDigest: paired.codeDigest, now },
      how.user,
    );
    if (created === 'intent_invalid') {
      throw await fail('invalid_pairing_intent', 'pairing_intent_used', 'the link intent was completed, burned or expired meanwhile', flow);
    }
    if (created === 'already_linked') return null;
    if (created === 'user_disabled')
      throw await fail('user_disabled', 'user_disabled', 'the user is disabled: an operator must enable them', flow, facts, link.subject);
    deps.log.info({ event: 'link.created', link_id: link.id, provider: name, realm }, 'identity linked');
    return link;
  };

  const signIn = (link: LinkRecord, counter: number | null | 'unchanged') =>
    signInWithLink(deps, { provider, link, counter, now, flow, client: input.client, fail, facts, attributes });

  if (intent === 'link') {
    if (linked !== null) throw await fail('already_linked', 'already_linked', 'that identity is already linked in this realm', flow, facts);
    // A credential without a name of its own (a passkey) is labelled with its user's name.
    const owner = attributes.email === undefined && attributes.name === undefined ? await deps.store.getUser(flow.subject as string) : null;
    const link = await createLink(newLink(flow.subject as string, owner?.name ?? linkName), paired === null ? principal : null);
    if (link === null) throw await fail('already_linked', 'already_linked', 'that identity is already linked in this realm', flow, facts);
    if (paired === null) return { outcome: 'linked', link: linkToJson(link) };
    // Completing an admin's link intent signs its holder in with the new credential, as a first
    // sign-in with a new passkey does: the counter the ceremony reported was stored with the link.
    return { outcome: 'session', pair: await signIn(link, 'unchanged') };
  }

  let link: LinkRecord | null = linked !== null && linked.provider === name ? linked : null;
  // The provider verified the credential the request named: the identity it reports must be that credential's.
  if (stored !== null && link?.id !== stored.id) {
    throw await fail('invalid_credential', 'identity_not_credential', "the provider's answer does not match the credential", flow, facts);
  }
  if (intent === 'signup' && linked !== null) {
    throw await fail('already_linked', 'already_linked', 'that identity is already linked in this realm', flow, facts);
  }
  let counter: number | null | 'unchanged' = checked.credential?.counter ?? null;
  if (link === null && linked === null) {
    // An identity is found by its (issuer, subject) link, never by email, unless the operator
    // turned on linking by verified email for this provider.
    const email = emailToLinkBy(provider.policy, realm, intent, attributes);
    if (email !== null) {
      const candidates = await deps.store.listUsers({ realm, email, limit: 10 });
      let found = emailLinkOwner(candidates, () => false);
      if (typeof found === 'object') {
        const ownerLinks = await deps.store.listLinks({ realm, subject: found.owner.subject });
        const atIssuer = ownerLinks.some((l) => l.issuer === identity.issuer);
        found = emailLinkOwner(candidates, () => atIssuer);
      }
      if (found === 'email_owner_ambiguous' || found === 'email_owner_has_issuer_link') {
        throw await fail('invalid_credential', found, 'the credential is not linked', flow, { ...facts, email });
      }
      if (found !== 'none') {
        link = await createLink(newLink(found.owner.subject), null, { via: 'verified_email', data: { email } });
        if (link !== null) counter = 'unchanged';
        link ??= await deps.store.findLiveLink({ realm, issuer: identity.issuer, externalSubject: identity.subject });
        if (link === null || link.provider !== name)
          throw await fail('invalid_credential', 'not_linked', 'the credential is not linked', flow, facts);
      }
    }
  }
  if (link === null) {
    if (linked !== null) throw await fail('invalid_credential', 'linked_with_other_provider', 'the credential is not linked', flow, facts);
    const jit = jitRefusal(provider.policy, realm, identity);
    if (jit !== null)
      throw await fail('invalid_credential', intent === 'signin' ? 'not_linked' : jit, 'the credential is not linked', flow, {
        ...facts,
        jit,
      });
    const subject = newId('subject', deps.clock, deps.random);
    const user = jitUser(provider.policy, { subject, realm, now, attributes, displayName });
    // A new person: said so in the audit trail (an identity whose link was removed comes back
    // as a new subject only this way, with JIT on).
    link = await createLink(newLink(subject), null, {
      user,
      data: { new_subject: true, user_status: user.status, ...(user.groups.length > 0 ? { user_groups: user.groups.join(',') } : {}) },
    });
    // The counter this ceremony reported was just stored with the new link.
    if (link !== null) counter = 'unchanged';
    // A concurrent first sign-in of the same identity linked it first: sign in with that link.
    link ??= await deps.store.findLiveLink({ realm, issuer: identity.issuer, externalSubject: identity.subject });
    if (link === null || link.provider !== name)
      throw await fail('invalid_credential', 'not_linked', 'the credential is not linked', flow, facts);
  }
  return { outcome: 'session', pair: await signIn(link, counter) };
}

async function signInWithLink(
  deps: AuthDeps,
  input: {
    readonly provider: ProviderHandle;
    readonly link: LinkRecord;
    readonly counter: number | null | 'unchanged';
    readonly now: number;
    readonly flow: FlowRecord;
    readonly client: SessionClientInput | undefined;
    readonly facts: AuditData;
    /** What the identity provider says about the person: written to the user in the session's transaction. */
    readonly attributes: ProvidedAttributes;
    readonly fail: (
      code: 'invalid_credential' | 'user_disabled',
      reason: string,
      detail: string,
      flow: FlowRecord,
      extra?: AuditData,
      subject?: string,
    ) => Promise<AuthError>;
  },
): Promise<TokenPairJson> {
  const { link, now, provider } = input;
  const s = deps.settings;
  const sessionId = newId('session', deps.clock, deps.random);
  const access = mintSessionToken('access', sessionId, deps.random);
  const refresh = mintSessionToken('refresh', sessionId, deps.random);
  const amr = providerAmr(provider);
  const session = newSessionRecord({
    id: sessionId,
    device: link,
    now,
    expiresAt: now + s.sessionMaxLifetimeSeconds * 1000,
    pair: { accessExpiresAt: now + s.accessTokenTtlSeconds * 1000, refreshExpiresAt: now + s.refreshTokenTtlSeconds * 1000 },
    client: sessionClient(input.client),
    amr,
  });
  const common = { realm: link.realm, subject: link.subject, deviceId: link.id, sessionId, at: now };
  const outcome = await deps.store.createLinkSession(
    {
      session,
      pair: {
        accessDigest: digestToken(access),
        refreshDigest: digestToken(refresh),
        accessExpiresAt: session.accessExpiresAt,
        refreshExpiresAt: session.refreshExpiresAt,
      },
      counter: input.counter,
      now,
      // The identity provider's attributes, refreshed at each sign-in (only those unset or owned
      // by this provider: `refreshedUser`), in the session's transaction.
      refresh: (current) => {
        const base = current ?? defaultUser({ subject: link.subject, realm: link.realm, now });
        const refreshed = refreshedUser(deps, base, input.attributes, provider.policy.name, now);
        return refreshed ?? (current === null ? { user: base, events: [] } : null);
      },
    },
    [
      auditDraft(deps, 'provider.signin', {
        ...common,
        data: { provider: provider.policy.name, ...input.facts, intent: input.flow.intent, flow_id: input.flow.id },
      }),
      auditDraft(deps, 'session.created', { ...common, data: { amr: amr.join(' '), link_id: link.id, provider: provider.policy.name } }),
    ],
  );
  switch (outcome.kind) {
    case 'created':
      deps.log.info({ event: 'session.created', session_id: sessionId, link_id: link.id, realm: link.realm }, 'session created');
      return tokenPairToJson(session, access, refresh, now);
    case 'link_removed':
      throw await input.fail('invalid_credential', 'link_removed', 'the credential is not linked', input.flow, input.facts);
    case 'counter_regressed':
      throw await input.fail(
        'invalid_credential',
        'counter_regressed',
        "the authenticator's signature counter did not advance: it may be cloned",
        input.flow,
        { ...input.facts, stored_counter: outcome.stored, presented_counter: input.counter === 'unchanged' ? null : input.counter },
      );
    case 'user_disabled':
      throw await input.fail(
        'user_disabled',
        'user_disabled',
        'the user is disabled: an operator must enable them',
        input.flow,
        { ...input.facts, link_id: link.id },
        link.subject,
      );
  }
}

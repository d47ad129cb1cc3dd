import { type EdnMap, type EdnValue, isKeyword } from './edn-model.js';
import type { ConfigProblem } from './errors.js';
import type { ProviderPolicy } from './provider.js';
import type { Realm } from './realm.js';
import { groupNameProblem, type UserStatus } from './users.js';

// A provider module's `:config` holds two kinds of keys: the service's policy for it
// (`:provider/...`, read here into core's `ProviderPolicy`, enforced by the service) and the
// provider's own keys (`:oidc/...`, `:webauthn/...`), which svc passes to the confined provider
// as JSON after resolving secret references. The policy never reaches the provider: a hostile
// package cannot widen the realms it may sign in to by reading its own configuration.

/** A provider module of `:svc/modules`: one that activates `:svc/auth-provider`. */
export interface ProviderModuleConfig {
  /** The module alias: the route segment (`/.svc/auth/v1/providers/<alias>/...`) and the policy's name. */
  readonly alias: string;
  /** The pinned, signed package it runs. */
  readonly package: string;
  /** The service's policy for it, from the `:provider/...` keys (defaults filled in). */
  readonly policy: ProviderPolicy;
  /** The rest of its `:config`: the provider's own keys, secret references unresolved (see {@link providerSettingsJson}). */
  readonly settings: EdnMap;
}

/** One `:provider/...` key of a provider module's `:config`: its default and meaning (the docs table comes from here). */
export interface ProviderPolicySetting {
  readonly key: string;
  readonly default: string;
  readonly allowed: string;
  readonly meaning: string;
}

/** Every policy key a provider module's `:config` takes, with its default and meaning. */
export const PROVIDER_POLICY_SETTINGS: readonly ProviderPolicySetting[] = [
  {
    key: ':provider/realms',
    default: '`["application"]`',
    allowed: '`"application"`, `"management"`',
    meaning: 'the realms the provider may sign in to or link credentials in (a non-empty vector)',
  },
  {
    key: ':provider/allowed-issuers',
    default: 'the issuer the provider is configured for',
    allowed: 'a vector of strings',
    meaning:
      'the issuers whose identities the provider may return; anything else is refused. The default is the value of the provider\'s own `:<ns>/issuer` key (e.g. `:oidc/issuer`) and `"webauthn:<rp id>"` for `:webauthn/rp-id`; without either, no issuer is allowed',
  },
  {
    key: ':provider/label',
    default: 'none: "your identity provider", or "a passkey" for a passkey provider',
    allowed: 'a string of 1 to 64 characters such as "Acme SSO"',
    meaning: 'what the sign-in page calls the provider: its button says "Sign in with Acme SSO"; the module alias is never shown to people',
  },
  {
    key: ':provider/jit',
    default: 'false',
    allowed: 'true, false',
    meaning:
      'just-in-time provisioning: a first sign-in creates a new application-realm subject. Refused with the management realm: a management link always needs an existing management principal',
  },
  {
    key: ':provider/jit-email-domains',
    default: '`[]`',
    allowed: 'a vector of domain names',
    meaning:
      'with `:provider/jit`, only identities with a verified email in one of these domains are provisioned; empty: any verified email',
  },
  {
    key: ':provider/jit-groups',
    default: '`[]`',
    allowed: 'a vector of group names (`[a-z0-9][a-z0-9._-]{0,63}`)',
    meaning:
      "with `:provider/jit`, the groups a new user starts in (kept as the operator's: the provider's sign-ins do not change them). Refused beside `:provider/groups-claim`: a user's groups come from one place",
  },
  {
    key: ':provider/jit-status',
    default: '`:active`',
    allowed: '`:active`, `:disabled`',
    meaning:
      'with `:provider/jit`, the status a new user starts with: `:disabled` is sign-up by invitation: the first sign-in creates the user and is refused `403 user_disabled` until an operator enables them',
  },
  {
    key: ':provider/groups-claim',
    default: 'none',
    allowed: 'a claim name such as `"groups"`',
    meaning:
      "the claim holding the user's groups (an array of strings, or one space- or comma-separated string), refreshed at each sign-in while the provider owns the user's groups; none: groups do not come from this provider",
  },
  {
    key: ':provider/group-prefix',
    default: 'none',
    allowed: 'a string such as `"app-"`',
    meaning:
      'with `:provider/groups-claim`, only groups starting with this prefix are kept, the prefix removed (`app-ops` becomes `ops`); a group that is not a valid name after that is left out',
  },
  {
    key: ':provider/link-by-verified-email',
    default: 'false',
    allowed: 'true, false',
    meaning:
      "an identity with no link whose VERIFIED email equals exactly one existing user's email in the realm, set verified by an operator or the company directory, is linked to that user (audited `link.created` via `verified_email`); an unverified email never links. Off, an identity is only ever found by its (issuer, subject) link. Application realm only; trust the identity provider's `email_verified` before turning it on",
  },
];

/** The policy keys, by name. */
const POLICY_KEYS: ReadonlySet<string> = new Set(PROVIDER_POLICY_SETTINGS.map((s) => s.key));

/** A module alias usable as a URL path segment of the provider routes. */
export const PROVIDER_ALIAS = /^[a-z0-9][a-z0-9-]{0,62}$/;

const REALMS: readonly Realm[] = ['application', 'management'];
const DOMAIN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

function hasControlCharacter(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

/** The issuers a provider is configured for, from its own keys: the default of `:provider/allowed-issuers`. */
function configuredIssuers(settings: EdnMap): string[] {
  const out: string[] = [];
  for (const [k, v] of settings) {
    if (typeof v !== 'string' || v === '') continue;
    if (/^:[a-z0-9.-]+\/issuer$/.test(k)) out.push(v);
    else if (k === ':webauthn/rp-id') out.push(`webauthn:${v}`);
  }
  return [...new Set(out)];
}

/**
 * Reads a provider module's `:config` into its policy and its own settings, reporting every
 * problem (file, key, expected) into `problems`. `key` is the module's `:config` key as messages
 * name it, e.g. `:svc/modules :oidc :config`.
 *
 * @example
 * const { policy, settings } = readProviderModuleConfig('oidc', module.config, { file, key: ':svc/modules :oidc :config' }, problems);
 */
export function readProviderModuleConfig(
  alias: string,
  config: EdnMap,
  where: { readonly file: string; readonly key: string },
  problems: ConfigProblem[],
): { policy: ProviderPolicy; settings: EdnMap } {
  const bad = (k: string, message: string) => problems.push({ file: where.file, key: `${where.key} ${k}`, message });
  const settings = new Map<string, EdnValue>();
  for (const [k, v] of config) {
    if (k.startsWith(':provider/')) {
      if (!POLICY_KEYS.has(k)) bad(k, `unknown provider policy key; expected one of ${[...POLICY_KEYS].join(', ')}`);
    } else settings.set(k, v);
  }
  const strings = (k: string, valid: (s: string) => boolean, what: string, nonEmpty: boolean): string[] | null => {
    const v = config.get(k);
    if (v === undefined) return null;
    if (!Array.isArray(v) || (nonEmpty && v.length === 0) || !v.every((x: EdnValue) => typeof x === 'string' && valid(x))) {
      bad(k, `expected a ${nonEmpty ? 'non-empty ' : ''}vector of ${what}, found ${describeShort(v)}`);
      return null;
    }
    return [...new Set(v as string[])];
  };

  const realms = (strings(':provider/realms', (s) => (REALMS as readonly string[]).includes(s), '"application" or "management"', true) ?? [
    'application',
  ]) as Realm[];
  const allowedIssuers =
    strings(':provider/allowed-issuers', (s) => s.trim() !== '' && !hasControlCharacter(s), 'issuer strings', false) ??
    configuredIssuers(settings);
  const jitValue = config.get(':provider/jit');
  let jit = false;
  if (jitValue !== undefined) {
    if (typeof jitValue !== 'boolean') bad(':provider/jit', `expected true or false, found ${describeShort(jitValue)}`);
    else jit = jitValue;
  }
  if (jit && realms.includes('management')) {
    bad(
      ':provider/jit',
      'just-in-time provisioning is for the application realm only: a management-realm link always needs an existing management principal; remove "management" from :provider/realms or turn :provider/jit off',
    );
  }
  const emailDomains = (
    strings(':provider/jit-email-domains', (s) => DOMAIN.test(s.toLowerCase()), 'domain names such as "example.com"', false) ?? []
  ).map((s) => s.toLowerCase());
  const onlyWithJit = (k: string) => {
    if (config.has(k) && !jit) bad(k, 'only applies to just-in-time provisioning: set :provider/jit true, or remove this key');
  };
  const jitGroups = [
    ...(strings(':provider/jit-groups', (g) => groupNameProblem(g) === null, 'group names such as "staff"', false) ?? []),
  ].sort();
  onlyWithJit(':provider/jit-groups');
  let jitStatus: UserStatus = 'active';
  const statusValue = config.get(':provider/jit-status');
  if (statusValue !== undefined) {
    if (isKeyword(statusValue) && (statusValue.keyword === 'active' || statusValue.keyword === 'disabled')) jitStatus = statusValue.keyword;
    else bad(':provider/jit-status', `expected :active or :disabled, found ${describeShort(statusValue)}`);
  }
  onlyWithJit(':provider/jit-status');
  const text = (k: string, valid: (s: string) => boolean, what: string): string | null => {
    const v = config.get(k);
    if (v === undefined) return null;
    if (typeof v !== 'string' || !valid(v)) {
      bad(k, `expected ${what}, found ${describeShort(v)}`);
      return null;
    }
    return v;
  };
  const groupsClaim = text(':provider/groups-claim', (s) => /^[a-z][a-z0-9_]{0,63}$/.test(s), 'a claim name such as "groups"');
  const groupPrefix = text(
    ':provider/group-prefix',
    (s) => s.length >= 1 && s.length <= 64 && !hasControlCharacter(s),
    'a prefix of 1 to 64 printable characters such as "app-"',
  );
  if (groupPrefix !== null && !config.has(':provider/groups-claim')) {
    bad(':provider/group-prefix', 'only applies with :provider/groups-claim: name the claim holding the groups, or remove this key');
  }
  if (jitGroups.length > 0 && config.has(':provider/groups-claim')) {
    bad(
      ':provider/jit-groups',
      "a user's groups come from one place: the identity provider's claim (:provider/groups-claim) or the operator's default (:provider/jit-groups); remove one",
    );
  }
  const linkValue = config.get(':provider/link-by-verified-email');
  let linkByVerifiedEmail = false;
  if (linkValue !== undefined) {
    if (typeof linkValue !== 'boolean')
      bad(':provider/link-by-verified-email', `expected true or false, found ${describeShort(linkValue)}`);
    else linkByVerifiedEmail = linkValue;
  }
  if (linkByVerifiedEmail && realms.includes('management')) {
    bad(
      ':provider/link-by-verified-email',
      'linking by email is for the application realm only: a management-realm link always needs an existing management principal; remove "management" from :provider/realms or turn it off',
    );
  }
  const label = text(
    ':provider/label',
    (s) => s.trim() !== '' && [...s].length <= 64 && !hasControlCharacter(s),
    'a label of 1 to 64 characters without control characters, such as "Acme SSO"',
  );
  return {
    policy: {
      name: alias,
      label: label === null ? null : label.trim(),
      realms,
      allowedIssuers,
      jit: { enabled: jit, emailDomains: [...new Set(emailDomains)], groups: jitGroups, status: jitStatus },
      groupsClaim,
      groupPrefix,
      linkByVerifiedEmail,
    },
    settings,
  };
}

// Only type imports from config.ts (which reads provider modules with this file): no import cycle.
function describeShort(v: EdnValue): string {
  if (v === null) return 'nil';
  if (v instanceof Map) return 'a map';
  if (Array.isArray(v)) return 'a vector that is not one';
  if (typeof v === 'object' && 'keyword' in v) return `the keyword :${v.keyword}`;
  if (typeof v === 'object' && 'tag' in v) return `#${v.tag}`;
  return `${typeof v} ${JSON.stringify(typeof v === 'bigint' ? v.toString() : v)}`;
}

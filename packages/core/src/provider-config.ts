import type { EdnMap, EdnValue } from './edn-model.js';
import type { ConfigProblem } from './errors.js';
import type { ProviderPolicy } from './provider.js';
import type { Realm } from './realm.js';

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
  return {
    policy: { name: alias, realms, allowedIssuers, jit: { enabled: jit, emailDomains: [...new Set(emailDomains)] } },
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

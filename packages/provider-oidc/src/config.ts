import type { ProviderJson } from '@svc/core';

/** How the client proves itself at the token endpoint (RFC 6749 section 2.3.1, OIDC Core section 9). */
export type TokenEndpointAuth = 'client_secret_basic' | 'client_secret_post';

/** The OIDC module's `:config`, checked. */
export interface OidcConfig {
  /** The issuer identifier exactly as the OpenID Provider states it in its discovery document. */
  readonly issuer: string;
  readonly clientId: string;
  /** Resolved by the service from `#svc/secret "env:NAME"` or a file before it reaches the provider. */
  readonly clientSecret: string;
  readonly scopes: readonly string[];
  readonly tokenEndpointAuth: TokenEndpointAuth;
  /** True only for an `http:` issuer on a loopback address (a local test IdP): never for another host. */
  readonly insecureLoopback: boolean;
}

/** The scopes asked for when `oidc/scopes` is absent: enough for `sub`, `email`, `email_verified` and `name`. */
export const DEFAULT_SCOPES: readonly string[] = Object.freeze(['openid', 'email', 'profile']);

const KEYS = ['oidc/issuer', 'oidc/client-id', 'oidc/client-secret', 'oidc/scopes', 'oidc/token-endpoint-auth'] as const;
const AUTH_METHODS: readonly TokenEndpointAuth[] = ['client_secret_basic', 'client_secret_post'];
// A scope token is printable ASCII without space, quote or backslash (RFC 6749 section 3.3).
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/**
 * Whether a URL host names this machine: `localhost`, 127.0.0.0/8 or `[::1]`. Plain HTTP is
 * accepted only there, because nothing between the service and the IdP can read or change it.
 *
 * @example
 * isLoopbackHost('127.0.0.1'); // true
 * isLoopbackHost('login.example.com'); // false
 */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.toLowerCase();
  if (h === 'localhost' || h === '[::1]' || h === '::1') return true;
  return /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.test(h) && h.split('.').every((p) => Number(p) <= 255);
}

function isRecord(v: ProviderJson): v is { readonly [key: string]: ProviderJson } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function checkIssuer(v: ProviderJson | undefined, problems: string[]): { issuer: string; insecureLoopback: boolean } | null {
  if (typeof v !== 'string' || v.length === 0) {
    problems.push('oidc/issuer: required, the OpenID Provider issuer URL (e.g. "https://login.example.com")');
    return null;
  }
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    problems.push(`oidc/issuer: ${JSON.stringify(v)} is not a URL`);
    return null;
  }
  const before = problems.length;
  const loopback = isLoopbackHost(url.hostname);
  if (url.protocol === 'http:' && !loopback) problems.push(`oidc/issuer: ${v} must use https (plain http only for a loopback issuer)`);
  else if (url.protocol !== 'https:' && url.protocol !== 'http:') problems.push(`oidc/issuer: ${v} must be an https URL`);
  // OIDC Discovery section 2: an issuer has no query or fragment; credentials in it would leak.
  if (url.search !== '' || url.hash !== '' || v.includes('?') || v.includes('#'))
    problems.push(`oidc/issuer: ${v} must not have a query or fragment`);
  if (url.username !== '' || url.password !== '') problems.push('oidc/issuer: must not carry a user name or password');
  if (problems.length > before) return null;
  return { issuer: v, insecureLoopback: url.protocol === 'http:' && loopback };
}

/**
 * Checks the module's `:config` (keyword keys without the colon). `provider/*` keys are the
 * service's policy, not ours, so they are skipped; any other unknown key is a problem, since a
 * misspelt key would otherwise silently fall back to a default.
 *
 * @example
 * const { config, problems } = parseOidcConfig({ 'oidc/issuer': 'https://login.example.com', 'oidc/client-id': 'svc', 'oidc/client-secret': s });
 */
export function parseOidcConfig(raw: ProviderJson): { config: OidcConfig; problems: [] } | { config: null; problems: string[] } {
  if (!isRecord(raw)) return { config: null, problems: ['config: must be a map of :oidc/* keys'] };
  const problems: string[] = [];
  for (const key of Object.keys(raw)) {
    if (key.startsWith('provider/') || (KEYS as readonly string[]).includes(key)) continue;
    problems.push(`${key}: unknown key; expected one of ${KEYS.join(', ')}`);
  }
  const issuer = checkIssuer(raw['oidc/issuer'], problems);

  const clientId = raw['oidc/client-id'];
  if (typeof clientId !== 'string' || clientId.trim().length === 0) problems.push('oidc/client-id: required, a non-empty string');

  // The service resolved the secret reference already; never echo the value in a problem.
  const clientSecret = raw['oidc/client-secret'];
  if (typeof clientSecret !== 'string' || clientSecret.length === 0)
    problems.push('oidc/client-secret: required, a secret reference (#svc/secret "env:NAME" or a file) resolving to a non-empty value');

  let scopes = DEFAULT_SCOPES;
  const rawScopes = raw['oidc/scopes'];
  if (rawScopes !== undefined) {
    if (!Array.isArray(rawScopes) || rawScopes.length === 0 || !rawScopes.every((s) => typeof s === 'string' && SCOPE_TOKEN.test(s))) {
      problems.push('oidc/scopes: must be a non-empty list of scope names such as ["openid" "email" "profile"]');
    } else if (!rawScopes.includes('openid')) {
      problems.push('oidc/scopes: must include "openid" (without it there is no ID token to validate)');
    } else scopes = Object.freeze([...new Set(rawScopes as string[])]);
  }

  let tokenEndpointAuth: TokenEndpointAuth = 'client_secret_basic';
  const rawAuth = raw['oidc/token-endpoint-auth'];
  if (rawAuth !== undefined) {
    if (typeof rawAuth === 'string' && (AUTH_METHODS as readonly string[]).includes(rawAuth))
      tokenEndpointAuth = rawAuth as TokenEndpointAuth;
    else problems.push(`oidc/token-endpoint-auth: must be one of ${AUTH_METHODS.join(', ')}`);
  }

  if (problems.length > 0 || issuer === null) return { config: null, problems };
  return {
    config: {
      issuer: issuer.issuer,
      clientId: clientId as string,
      clientSecret: clientSecret as string,
      scopes,
      tokenEndpointAuth,
      insecureLoopback: issuer.insecureLoopback,
    },
    problems: [],
  };
}

import type { ProviderJson } from '@svc/core';

/** How strongly the relying party asks the authenticator to verify the user (PIN, biometrics). */
export type UserVerification = 'required' | 'preferred' | 'discouraged';

/** The module's `:config`, checked. */
export interface WebAuthnConfig {
  /** The relying party id: the registrable domain passkeys are bound to (`example.com`). */
  readonly rpId: string;
  /** The name the browser shows in its passkey dialog. */
  readonly rpName: string;
  /** The exact origins a ceremony may come from (`https://app.example.com`). */
  readonly origins: readonly string[];
  readonly userVerification: UserVerification;
  /** How long a begun ceremony may take, in milliseconds. */
  readonly timeoutMs: number;
}

export const DEFAULT_USER_VERIFICATION: UserVerification = 'preferred';
export const DEFAULT_TIMEOUT_SECONDS = 300;
/** The bounds of `webauthn/timeout-seconds`: long enough to find a security key, shorter than the service's 10-minute flow. */
export const MIN_TIMEOUT_SECONDS = 30;
export const MAX_TIMEOUT_SECONDS = 600;

const KEYS = ['webauthn/rp-id', 'webauthn/rp-name', 'webauthn/origins', 'webauthn/user-verification', 'webauthn/timeout-seconds'];
const USER_VERIFICATION: readonly string[] = ['required', 'preferred', 'discouraged'];
/** A DNS name of lowercase labels: what an RP id is (never an IP address, a port or a scheme). */
const DOMAIN = /^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))*$/;
const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;
/** Hosts a browser treats as a secure context over plain http. */
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1']);

function isRecord(v: ProviderJson): v is { readonly [key: string]: ProviderJson } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Why `origin` is not an acceptable WebAuthn origin, or null when it is. */
function originProblem(origin: string): string | null {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return `"${origin}" is not an origin such as "https://app.example.com"`;
  }
  // An origin is scheme, host and port only: the browser reports exactly that in clientDataJSON.
  if (url.origin !== origin)
    return `"${origin}" is not an origin (scheme://host[:port], no path or trailing slash; expected "${url.origin}")`;
  if (url.protocol === 'https:') return null;
  if (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname)) return null;
  return `"${origin}" must use https (plain http only for localhost or 127.0.0.1)`;
}

/** Whether `host` is `rpId` or a subdomain of it, as the browser requires of the RP id. */
function hostMatchesRpId(host: string, rpId: string): boolean {
  return host === rpId || host.endsWith(`.${rpId}`);
}

/**
 * Checks the module's `:config` (as JSON, keys without the colon). Returns the checked config
 * and every problem, each one line naming the key. The service's own `provider/*` keys are
 * its business and skipped here; any other unknown key is refused, so a typo is never
 * silently ignored.
 *
 * @example
 * const { config, problems } = readWebAuthnConfig({ 'webauthn/rp-id': 'example.com', 'webauthn/rp-name': 'Example',
 *   'webauthn/origins': ['https://example.com'] });
 */
export function readWebAuthnConfig(raw: ProviderJson): { config: WebAuthnConfig; problems: [] } | { config: null; problems: string[] } {
  if (!isRecord(raw)) return { config: null, problems: ['config: must be a map of :webauthn/* keys'] };
  const problems: string[] = [];
  for (const key of Object.keys(raw)) {
    if (key.startsWith('provider/')) continue;
    if (!KEYS.includes(key)) problems.push(`:${key}: unknown key; expected one of ${KEYS.map((k) => `:${k}`).join(', ')}`);
  }

  const rpId = raw['webauthn/rp-id'];
  if (typeof rpId !== 'string') problems.push(':webauthn/rp-id: required, a domain name such as "example.com"');
  else if (!DOMAIN.test(rpId) || IPV4.test(rpId))
    problems.push(`:webauthn/rp-id: "${rpId}" is not a lowercase domain name (no scheme, port or IP address)`);

  const rpName = raw['webauthn/rp-name'];
  if (typeof rpName !== 'string' || rpName.trim().length === 0 || rpName.length > 64)
    problems.push(':webauthn/rp-name: required, the name shown in the passkey dialog (1 to 64 characters)');

  const origins = raw['webauthn/origins'];
  const goodOrigins: string[] = [];
  if (!Array.isArray(origins) || origins.length === 0 || origins.length > 16)
    problems.push(':webauthn/origins: required, a vector of 1 to 16 origins such as ["https://app.example.com"]');
  else {
    for (const o of origins) {
      if (typeof o !== 'string') {
        problems.push(`:webauthn/origins: ${JSON.stringify(o)} is not a string`);
        continue;
      }
      const problem = originProblem(o);
      if (problem !== null) problems.push(`:webauthn/origins: ${problem}`);
      else if (typeof rpId === 'string' && !hostMatchesRpId(new URL(o).hostname, rpId))
        problems.push(`:webauthn/origins: "${o}" is not on the relying party id "${rpId}" (its host must be ${rpId} or a subdomain of it)`);
      else goodOrigins.push(o);
    }
  }

  const uv = raw['webauthn/user-verification'] ?? DEFAULT_USER_VERIFICATION;
  if (typeof uv !== 'string' || !USER_VERIFICATION.includes(uv))
    problems.push(`:webauthn/user-verification: ${JSON.stringify(uv)} is not one of "required", "preferred", "discouraged"`);

  const timeout = raw['webauthn/timeout-seconds'] ?? DEFAULT_TIMEOUT_SECONDS;
  if (typeof timeout !== 'number' || !Number.isInteger(timeout) || timeout < MIN_TIMEOUT_SECONDS || timeout > MAX_TIMEOUT_SECONDS)
    problems.push(
      `:webauthn/timeout-seconds: ${JSON.stringify(timeout)} is not an integer from ${MIN_TIMEOUT_SECONDS} to ${MAX_TIMEOUT_SECONDS}`,
    );

  if (problems.length > 0) return { config: null, problems };
  return {
    config: {
      rpId: rpId as string,
      rpName: rpName as string,
      origins: goodOrigins,
      userVerification: uv as UserVerification,
      timeoutMs: (timeout as number) * 1000,
    },
    problems: [],
  };
}

import type { ProviderIntent, ProviderJson } from '@svc/core';

/** Which WebAuthn ceremony a flow runs: `link` and `signup` register a passkey, `signin` uses one. */
export type Ceremony = 'registration' | 'authentication';

/**
 * What `begin` keeps in the flow's state (the service stores it, single use; the browser never
 * sees it). The challenge the assertion must sign comes from here and only from here: the
 * browser's copy in clientDataJSON is what is being checked, never the reference.
 */
export interface CeremonyState {
  readonly ceremony: Ceremony;
  readonly intent: ProviderIntent;
  /** The challenge sent to the browser (base64url). */
  readonly challenge: string;
  /** When `begin` issued it (milliseconds since the epoch), for the expiry check. */
  readonly issuedAt: number;
  /** Registration only: the random user handle given to the authenticator (base64url). */
  readonly userId: string | null;
}

const STATE_SCHEMA = 'svc-webauthn-state-v1';
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** The state as JSON for the flow. */
export function encodeState(s: CeremonyState): ProviderJson {
  return { schema: STATE_SCHEMA, ceremony: s.ceremony, intent: s.intent, challenge: s.challenge, issued_at: s.issuedAt, user_id: s.userId };
}

/**
 * Reads a flow's state back, or null when it is not one this provider wrote (another
 * provider's, a damaged row): refused rather than guessed at.
 */
export function decodeState(raw: ProviderJson): CeremonyState | null {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return null;
  const r = raw as { readonly [key: string]: ProviderJson };
  if (r.schema !== STATE_SCHEMA) return null;
  const { ceremony, intent, challenge, issued_at, user_id } = r;
  if (ceremony !== 'registration' && ceremony !== 'authentication') return null;
  if (intent !== 'signin' && intent !== 'link' && intent !== 'signup') return null;
  if ((ceremony === 'authentication') !== (intent === 'signin')) return null;
  if (typeof challenge !== 'string' || challenge.length < 16 || challenge.length > 128 || !BASE64URL.test(challenge)) return null;
  if (typeof issued_at !== 'number' || !Number.isSafeInteger(issued_at) || issued_at <= 0) return null;
  if (ceremony === 'registration' ? typeof user_id !== 'string' || !BASE64URL.test(user_id) : user_id !== null) return null;
  return { ceremony, intent, challenge, issuedAt: issued_at, userId: typeof user_id === 'string' ? user_id : null };
}

import type { ExternalIdentity, ProviderPolicy } from './provider.js';
import type { Realm } from './realm.js';

// The service's check of what a provider answers. A provider runs confined, but its answers are
// untrusted all the same (a hostile or buggy package can return anything): nothing it proved is
// acted on before this check passes. Pure: the policy, the realm of the ceremony and the answer.

/** The longest issuer and external subject accepted, in characters. */
export const IDENTITY_MAX_CHARS = 255;
/** The most claims an identity may carry. */
export const CLAIMS_MAX_COUNT = 16;
/** The longest claim name, in characters. */
export const CLAIM_NAME_MAX_CHARS = 64;
/** The longest string claim value, in characters (each item of an array claim too). */
export const CLAIM_VALUE_MAX_CHARS = 256;
/** The most items of an array claim (a groups claim: an IdP may send more groups than the prefix keeps). */
export const CLAIM_ARRAY_MAX_ITEMS = 200;

// Control and format (bidi) characters: they would forge lines or reorder text in listings,
// logs and terminals.
const UNPRINTABLE = /[\p{Cc}\p{Cf}]/u;
const CLAIM_NAME = /^[a-z][a-z0-9_]*$/;

function printable(value: unknown, max: number): value is string {
  return typeof value === 'string' && value.length >= 1 && value.length <= max && !UNPRINTABLE.test(value);
}

/**
 * Why the service refuses an identity a provider returned, or null when it accepts it: the
 * issuer is one the policy allows, the realm is one the provider may act in, the subject is
 * printable text of 1 to {@link IDENTITY_MAX_CHARS} characters without control characters, and
 * the claims are few and small (at most {@link CLAIMS_MAX_COUNT}, lowercase names, strings of
 * at most {@link CLAIM_VALUE_MAX_CHARS} printable characters, booleans, or arrays of at most
 * {@link CLAIM_ARRAY_MAX_ITEMS} such strings: a groups claim).
 *
 * @example
 * const refused = checkProviderIdentity(handle.policy, 'application', result.identity);
 * if (refused !== null) throw new AuthError('invalid_credential', `the provider's answer was refused: ${refused}`);
 */
export function checkProviderIdentity(policy: ProviderPolicy, realm: Realm, identity: ExternalIdentity): string | null {
  if (typeof identity !== 'object' || identity === null) return 'the identity is not an object';
  if (!policy.realms.includes(realm)) return `the provider may not act in the ${realm} realm`;
  if (!printable(identity.issuer, IDENTITY_MAX_CHARS)) return 'the issuer is not printable text of 1 to 255 characters';
  if (!policy.allowedIssuers.includes(identity.issuer)) return 'the issuer is not allowed for this provider';
  if (!printable(identity.subject, IDENTITY_MAX_CHARS)) return 'the subject is not printable text of 1 to 255 characters';
  const claims: unknown = identity.claims;
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) return 'the claims are not an object';
  const entries = Object.entries(claims);
  if (entries.length > CLAIMS_MAX_COUNT) return `more than ${CLAIMS_MAX_COUNT} claims`;
  for (const [name, value] of entries) {
    if (name.length > CLAIM_NAME_MAX_CHARS || !CLAIM_NAME.test(name)) return 'a claim name is not a short lowercase name';
    if (typeof value === 'boolean') continue;
    if (typeof value === 'string' && (value === '' || printable(value, CLAIM_VALUE_MAX_CHARS))) continue;
    if (Array.isArray(value)) {
      if (value.length > CLAIM_ARRAY_MAX_ITEMS) return `the claim ${name} has more than ${CLAIM_ARRAY_MAX_ITEMS} items`;
      if (value.every((item: unknown) => printable(item, CLAIM_VALUE_MAX_CHARS))) continue;
      return `the claim ${name} is an array whose items are not all printable text of 1 to ${CLAIM_VALUE_MAX_CHARS} characters`;
    }
    return `the claim ${name} is not a boolean, printable text of at most ${CLAIM_VALUE_MAX_CHARS} characters, or an array of such text`;
  }
  return null;
}

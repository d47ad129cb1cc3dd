import type { ExternalIdentity, ProviderPolicy } from './provider.js';
import type { Realm } from './realm.js';

// The service's check of what a provider proved, before any link, flow or session is touched.
// A provider runs confined but is still untrusted: a hostile or buggy package can answer any
// issuer, any subject and any claims. Its answer's SHAPE is checked where it crosses the
// process boundary (@svc/provider-host); what it MEANS is checked here, in one pure function
// the use cases call (docs/providers.md, section 2).

/** The longest external subject accepted, in characters (code points). */
export const MAX_EXTERNAL_SUBJECT_CHARS = 255;
/** At most this many claims. */
export const MAX_PROVIDER_CLAIMS = 32;
/** A claim name: 1 to 64 characters of `A-Z a-z 0-9 _ . : -` (OIDC claim names and namespaced ones). */
export const PROVIDER_CLAIM_NAME_PATTERN = /^[A-Za-z0-9_.:-]{1,64}$/;
/** The longest string claim value, in characters. */
export const MAX_PROVIDER_CLAIM_CHARS = 1024;
/** The claims' total size, as JSON, in UTF-8 bytes. */
export const MAX_PROVIDER_CLAIMS_BYTES = 4096;

// Control characters (C0, DEL, C1), format characters (zero-width, bidi overrides), lone
// surrogates, line and paragraph separators, private use and unassigned: none of them belongs
// in an identifier a person may read in an audit trail or a link list.
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/u;

/** A short, printable rendering of untrusted text for a refusal message. */
function shown(value: string): string {
  const cut = value.length > 80 ? `${value.slice(0, 80)}…` : value;
  return JSON.stringify(cut);
}

/** Why an external subject is refused, or null: a printable string of 1 to 255 characters. */
function subjectProblem(subject: unknown): string | null {
  if (typeof subject !== 'string') return 'the subject is not a string';
  const chars = [...subject].length;
  if (chars < 1 || chars > MAX_EXTERNAL_SUBJECT_CHARS)
    return `the subject must have 1 to ${MAX_EXTERNAL_SUBJECT_CHARS} characters (it has ${chars})`;
  if (UNPRINTABLE.test(subject)) return 'the subject contains a control or other unprintable character';
  if (subject.trim() !== subject) return 'the subject has leading or trailing white space';
  return null;
}

/** Why the claims are refused, or null: a plain object of at most 32 small string or boolean values. */
function claimsProblem(claims: unknown): string | null {
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) return 'the claims are not an object';
  const entries = Object.entries(claims);
  if (entries.length > MAX_PROVIDER_CLAIMS) return `there are ${entries.length} claims (at most ${MAX_PROVIDER_CLAIMS})`;
  for (const [name, value] of entries) {
    if (!PROVIDER_CLAIM_NAME_PATTERN.test(name)) return `the claim name ${shown(name)} is not 1 to 64 characters of A-Z a-z 0-9 _ . : -`;
    if (typeof value === 'boolean') continue;
    if (typeof value !== 'string') return `the claim ${name} is neither a string nor a boolean`;
    if (value.length > MAX_PROVIDER_CLAIM_CHARS) return `the claim ${name} is over ${MAX_PROVIDER_CLAIM_CHARS} characters`;
    if (/\p{Cc}/u.test(value)) return `the claim ${name} contains a control character`;
  }
  const bytes = new TextEncoder().encode(JSON.stringify(claims)).length;
  if (bytes > MAX_PROVIDER_CLAIMS_BYTES) return `the claims are ${bytes} bytes as JSON (at most ${MAX_PROVIDER_CLAIMS_BYTES})`;
  return null;
}

/**
 * Why the service refuses an identity a provider returned for a ceremony in `realm`, or null
 * when it may be used. Refused: a realm the provider's policy does not name, an issuer not in
 * its `allowedIssuers` (exact match), a subject that is not 1 to 255 printable characters
 * (no control, format or separator characters, no surrounding white space), claims that are
 * not at most 32 string or boolean values (names `A-Za-z0-9_.:-`, values up to 1024
 * characters, 4 KiB in all). Pure: the caller records the refusal (`provider.signin_failed`)
 * and answers the browser; the message names the check and never trusts the provider's text
 * beyond a short quoted excerpt.
 *
 * @example
 * const refused = checkProviderIdentity(handle.policy, ctx.realm, result.identity);
 * if (refused !== null) throw new AuthError('invalid_request', `provider ${handle.policy.name}: ${refused}`);
 */
export function checkProviderIdentity(policy: ProviderPolicy, realm: Realm, identity: ExternalIdentity): string | null {
  if (!policy.realms.includes(realm)) return `the provider ${policy.name} is not allowed in the ${realm} realm`;
  if (typeof identity.issuer !== 'string' || !policy.allowedIssuers.includes(identity.issuer)) {
    const issuer = typeof identity.issuer === 'string' ? shown(identity.issuer) : 'that is not a string';
    return `the issuer ${issuer} is not an allowed issuer of the provider ${policy.name}`;
  }
  const subject = subjectProblem(identity.subject);
  if (subject !== null) return subject;
  return claimsProblem(identity.claims);
}

// Who a subject is, as people and applications know them: the rules for a user's attributes
// (display name, email, groups), where each came from, and how they reach an application.
// Pure: every adapter (management API, SCIM, providers, gateway) applies these, none re-decides.

/** A user's status: `disabled` users hold no session and every sign-in is refused. */
export const USER_STATUSES = ['active', 'disabled'] as const;
/** A user's status. */
export type UserStatus = (typeof USER_STATUSES)[number];

/**
 * Where an attribute came from: `operator` (the management API or CLI), `scim` (the company
 * directory), `provider:<name>` (an identity provider, refreshed at each sign-in through it), or
 * `self` (the user chose it, e.g. the display name typed at passkey sign-up: no identity
 * provider's refresh replaces it; an operator or the directory may).
 */
export type AttributeSource = 'operator' | 'scim' | 'self' | `provider:${string}`;

/** A group name, as it reaches the application (`Svc-Groups`, the `groups` claim). */
export const GROUP_NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;
/** The most groups one user may be in. */
export const MAX_USER_GROUPS = 100;
/** The longest display name, in characters (after NFC). */
export const DISPLAY_NAME_MAX_CHARS = 128;
/** The longest email address (RFC 5321's path limit less the brackets). */
export const EMAIL_MAX_CHARS = 254;
/** The longest SCIM `userName` or `externalId`. */
export const USER_NAME_MAX_CHARS = 256;

/**
 * The problem with a group name, or null when it is one: lowercase ASCII letters and digits,
 * then up to 63 of those, `.`, `_` or `-`. Names outside this set are refused at input, never
 * rewritten or passed through.
 *
 * @example
 * groupNameProblem('ops'); // null
 * groupNameProblem('Tour Guides'); // 'group names are ...'
 */
export function groupNameProblem(name: unknown): string | null {
  if (typeof name !== 'string' || !GROUP_NAME_PATTERN.test(name)) {
    return `group names are 1-64 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit (got ${describe(name)})`;
  }
  return null;
}

/**
 * A checked, sorted, de-duplicated group list, or the problem with it.
 *
 * @example
 * checkGroups(['ops', 'dev', 'ops']); // { groups: ['dev', 'ops'] }
 */
export function checkGroups(groups: unknown): { readonly groups: readonly string[] } | { readonly problem: string } {
  if (!Array.isArray(groups)) return { problem: 'groups must be an array of group names' };
  for (const g of groups) {
    const problem = groupNameProblem(g);
    if (problem !== null) return { problem };
  }
  const unique = [...new Set(groups as string[])].sort();
  if (unique.length > MAX_USER_GROUPS) return { problem: `a user is in at most ${MAX_USER_GROUPS} groups` };
  return { groups: Object.freeze(unique) };
}

// C0 and C1 controls, DEL, line and paragraph separators, the bidirectional overrides and
// isolates (a name that reorders the text around it on a page or in a log line), and lone
// surrogates (not text: a store would replace them, and percent-encoding them throws).
const UNSAFE_NAME_CHARS = /[\p{Cc}\p{Cs}\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]/u;

/**
 * A display name in NFC, trimmed, or the problem with it: 1 to 128 characters, no control,
 * line-separator or bidirectional-override characters. Any script is welcome.
 *
 * @example
 * checkDisplayName('  Zoë Ångström '); // { name: 'Zoë Ångström' }
 */
export function checkDisplayName(name: unknown): { readonly name: string } | { readonly problem: string } {
  if (typeof name !== 'string') return { problem: 'name must be a string' };
  const n = name.normalize('NFC').trim();
  if (n === '') return { problem: 'name must not be empty' };
  if ([...n].length > DISPLAY_NAME_MAX_CHARS) return { problem: `name is at most ${DISPLAY_NAME_MAX_CHARS} characters` };
  if (UNSAFE_NAME_CHARS.test(n)) return { problem: 'name must not contain control, line-separator or bidirectional-override characters' };
  return { name: n };
}

// The local part as RFC 5322's dot-atom (ASCII): what every mail system and header accepts.
const LOCAL_PART = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/**
 * An email address in the one form the service keeps and sends (ASCII: the domain lowercased,
 * an internationalised domain in its A-label form, `xn--...`), or the problem with it. The local
 * part is kept as given (it may be case-sensitive) and must be ASCII: an address that needs
 * SMTPUTF8 cannot travel in an ASCII header.
 *
 * @example
 * checkEmail('Ada@Bücher.example'); // { email: 'Ada@xn--bcher-kva.example' }
 */
export function checkEmail(email: unknown): { readonly email: string } | { readonly problem: string } {
  if (typeof email !== 'string') return { problem: 'email must be a string' };
  const trimmed = email.trim();
  const at = trimmed.lastIndexOf('@');
  if (at <= 0 || at === trimmed.length - 1) return { problem: `email must be an address (local@domain), got ${describe(email)}` };
  const local = trimmed.slice(0, at);
  const domainIn = trimmed.slice(at + 1);
  if (local.length > 64 || !LOCAL_PART.test(local)) {
    return { problem: "email: the part before @ must be ASCII letters, digits and !#$%&'*+/=?^_`{|}~.- (no quotes or spaces)" };
  }
  const domain = domainToAscii(domainIn.normalize('NFC'));
  const labels = domain.split('.');
  if (domain === '' || labels.length < 2 || !labels.every((l) => LABEL.test(l)) || !/[a-z]/.test(labels.at(-1) ?? '')) {
    return { problem: `email: ${describe(domainIn)} is not a valid domain name` };
  }
  const out = `${local}@${domain}`;
  if (out.length > EMAIL_MAX_CHARS) return { problem: `email is at most ${EMAIL_MAX_CHARS} characters` };
  return { email: out };
}

/**
 * The domain of a checked email (lowercase, A-label form).
 *
 * @example
 * emailDomainOf('ada@example.com'); // 'example.com'
 */
export function emailDomainOf(email: string): string {
  return email.slice(email.lastIndexOf('@') + 1);
}

/**
 * A domain as `:email-domains` and `:jit/email-domains` name it, in the form emails are kept
 * (lowercase A-label), or null when it is not a domain name.
 *
 * @example
 * normalizeEmailDomain('Bücher.Example'); // 'xn--bcher-kva.example'
 */
export function normalizeEmailDomain(domain: string): string | null {
  const checked = checkEmail(`x@${domain}`);
  return 'email' in checked ? emailDomainOf(checked.email) : null;
}

/**
 * A SCIM `userName` or `externalId`: printable, trimmed, 1 to 256 characters.
 *
 * @example
 * checkUserName('bjensen@example.com'); // { userName: 'bjensen@example.com' }
 */
export function checkUserName(value: unknown, field = 'userName'): { readonly userName: string } | { readonly problem: string } {
  if (typeof value !== 'string') return { problem: `${field} must be a string` };
  const v = value.normalize('NFC').trim();
  if (v === '' || [...v].length > USER_NAME_MAX_CHARS) return { problem: `${field} must be 1-${USER_NAME_MAX_CHARS} characters` };
  if (UNSAFE_NAME_CHARS.test(v)) return { problem: `${field} must not contain control characters` };
  return { userName: v };
}

/**
 * Whether `source` names who may set an attribute: `operator`, `scim`, `self` or `provider:<name>`.
 *
 * @example
 * isAttributeSource('provider:google'); // true
 */
export function isAttributeSource(source: unknown): source is AttributeSource {
  return (
    source === 'operator' ||
    source === 'scim' ||
    source === 'self' ||
    (typeof source === 'string' && /^provider:[a-z0-9][a-z0-9._-]{0,63}$/.test(source))
  );
}

/** Who the caller is, as the principal and the application see it: absent when unknown, never empty. */
export interface IdentityAttributes {
  readonly email?: string;
  readonly email_verified?: boolean;
  readonly name?: string;
  readonly groups?: readonly string[];
}

/**
 * The identity headers the gateway sends upstream for `attributes` (contract: application
 * gateway): `Svc-Email` (ASCII; only a verified email), `Svc-Name` (percent-encoded UTF-8),
 * `Svc-Groups` (comma-separated); a header is absent when its attribute is unknown, empty or (the
 * email) unverified, never an empty string. The assertion's `email` and `email_verified` claims
 * carry an unverified email with its flag, for an app that wants to tell them apart.
 *
 * @example
 * identityHeaders({ email: 'ada@example.com', name: 'Ada Lovelace', groups: ['ops'] });
 * // { 'svc-email': 'ada@example.com', 'svc-name': 'Ada%20Lovelace', 'svc-groups': 'ops' }
 */
export function identityHeaders(attributes: IdentityAttributes): Readonly<Record<string, string>> {
  const out: Record<string, string> = {};
  // Only a verified email: the apps that read identity headers (an auth-proxy login) take the
  // header as who the caller IS, and an address an IdP let a user type unverified is not that.
  if (attributes.email !== undefined && attributes.email !== '' && attributes.email_verified === true) out['svc-email'] = attributes.email;
  if (attributes.name !== undefined && attributes.name !== '') out['svc-name'] = encodeURIComponent(attributes.name);
  if (attributes.groups !== undefined && attributes.groups.length > 0) out['svc-groups'] = attributes.groups.join(',');
  return out;
}

/**
 * The identity attributes of a user (or of a session's cached user) as the principal carries
 * them: absent when unknown; `email_verified` only beside an email.
 *
 * @example
 * identityAttributesOf({ name: 'Ada', email: null, emailVerified: false, groups: [] }); // { name: 'Ada' }
 */
export function identityAttributesOf(user: {
  readonly name: string | null;
  readonly email: string | null;
  readonly emailVerified: boolean;
  readonly groups: readonly string[];
}): IdentityAttributes {
  const out: { email?: string; email_verified?: boolean; name?: string; groups?: readonly string[] } = {};
  if (user.email !== null && user.email !== '') {
    out.email = user.email;
    out.email_verified = user.emailVerified;
  }
  if (user.name !== null && user.name !== '') out.name = user.name;
  if (user.groups.length > 0) out.groups = user.groups;
  return out;
}

/** The WHATWG URL parser's domain to ASCII (IDNA, UTS #46): what browsers do; '' when it is not a host. */
function domainToAscii(domain: string): string {
  if (/[/?#@:\\%\s[\]]/.test(domain)) return '';
  try {
    return new URL(`http://${domain}/`).hostname;
  } catch {
    return '';
  }
}

function describe(value: unknown): string {
  if (typeof value !== 'string') return typeof value;
  return JSON.stringify(value.length > 70 ? `${value.slice(0, 70)}…` : value);
}

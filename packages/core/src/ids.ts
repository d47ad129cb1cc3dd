import type { Clock, RandomBytes } from './ports.js';

/** The type prefixes of IDs. */
export const ID_PREFIXES = {
  device: 'dev_',
  session: 'ses_',
  subject: 'sub_',
  challenge: 'chl_',
  intent: 'int_',
  event: 'evt_',
  bootstrap: 'bst_',
  project: 'prj_',
  /** An external identity linked to a subject (a passkey, an OIDC login). */
  link: 'lnk_',
  /** A provider ceremony in progress (single use, short lived). */
  flow: 'flw_',
  /** A group record (the directory's groups). */
  group: 'grp_',
  /** A SCIM token's id (the token itself is `svcs_...`). */
  scimToken: 'sct_',
} as const;

/** A kind of ID. */
export type IdKind = keyof typeof ID_PREFIXES;

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** Encodes bytes as Crockford base32, most significant bits first. */
export function crockfordBase32(bytes: Uint8Array, length: number): string {
  let value = 0n;
  for (const b of bytes) value = (value << 8n) | BigInt(b);
  let out = '';
  for (let i = 0; i < length; i++) {
    out = CROCKFORD[Number(value & 31n)] + out;
    value >>= 5n;
  }
  return out;
}

/**
 * A new time-sortable ID: the type prefix and a ULID body (48-bit millisecond time, 80
 * random bits).
 *
 * @example
 * newId('session', clock, randomBytes); // "ses_01JD..."
 */
export function newId(kind: IdKind, clock: Clock, random: RandomBytes): string {
  const ms = clock.now();
  const time = new Uint8Array(6);
  let t = BigInt(Math.max(0, Math.floor(ms)));
  for (let i = 5; i >= 0; i--) {
    time[i] = Number(t & 255n);
    t >>= 8n;
  }
  return ID_PREFIXES[kind] + crockfordBase32(time, 10) + crockfordBase32(random(10), 16);
}

const ID_PATTERNS = Object.fromEntries(
  Object.entries(ID_PREFIXES).map(([kind, prefix]) => [kind, new RegExp(`^${prefix}[0-9A-HJKMNP-TV-Z]{26}$`)]),
) as Record<IdKind, RegExp>;

/** Whether `value` looks like an ID of `kind`. */
export function isIdOfKind(value: unknown, kind: IdKind): value is string {
  return typeof value === 'string' && ID_PATTERNS[kind].test(value);
}

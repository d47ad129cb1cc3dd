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

/**
 * Encodes bytes as Crockford base32, most significant bits first: the `length` symbols of the
 * lowest `5 * length` bits of the bytes read as one big-endian number (zeros above it when the
 * bytes hold fewer bits). Plain number arithmetic, five bits at a time from the end: every
 * sign-in, rotation and audit event mints IDs with it.
 *
 * @example
 * crockfordBase32(Uint8Array.of(0x01, 0x56, 0x3d, 0xf3, 0x64, 0x81), 10); // '01ARYZ6S41'
 */
export function crockfordBase32(bytes: Uint8Array, length: number): string {
  let out = '';
  let acc = 0;
  let bits = 0;
  let next = bytes.length - 1;
  for (let k = 0; k < length; k++) {
    while (bits < 5 && next >= 0) {
      acc |= (bytes[next--] as number) << bits;
      bits += 8;
    }
    out = CROCKFORD.charAt(acc & 31) + out;
    acc >>>= 5;
    bits = bits > 5 ? bits - 5 : 0;
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
  // A broken clock fails loudly, never as IDs that sort wrong (NaN would encode as time 0).
  if (Number.isNaN(ms) || ms === Number.POSITIVE_INFINITY) throw new RangeError(`the clock read ${ms}: no ID can carry that time`);
  // The low 48 bits of the whole milliseconds (exact arithmetic for any finite double).
  let t = Math.max(0, Math.floor(ms));
  const time = new Uint8Array(6);
  for (let i = 5; i >= 0; i--) {
    time[i] = t % 256;
    t = Math.floor(t / 256);
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

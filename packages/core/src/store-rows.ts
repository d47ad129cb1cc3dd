import type { AuditData, AuditEvent, AuditEventType } from './audit.js';
import { GENESIS_HASH } from './audit.js';
import type { ProviderIntent } from './provider.js';
import type { Realm } from './realm.js';
import type {
  ChallengeRecord,
  ConsumedChallenge,
  DeviceRecord,
  FlowRecord,
  GroupRecord,
  LinkRecord,
  PairingIntentRecord,
  ScimTokenRecord,
  SessionRecord,
  SessionUser,
  StoreStats,
  UserRecord,
} from './store.js';
import { isSessionLive } from './store-rules.js';
import type { AttributeSource, UserStatus } from './users.js';

// The relational layout both SQL store addons share: the same tables and column names in the
// SQLite and PostgreSQL migrations, rows as their drivers return them (times as numbers; the
// PostgreSQL store parses BIGINT to number in its pool's type parser), and the mapping of rows
// to the contract's records. Pure: no driver, no I/O.

export interface DeviceRow {
  id: string;
  public_key: string;
  realm: Realm;
  subject: string;
  name: string;
  created_at: number;
  removed_at: number | null;
}

export interface SessionRow {
  id: string;
  realm: Realm;
  subject: string;
  device_id: string;
  created_at: number;
  expires_at: number;
  access_expires_at: number;
  refresh_expires_at: number;
  generation: number;
  last_rotated_at: number | null;
  revoked_at: number | null;
  revoked_reason: string | null;
  client_address: string | null;
  user_agent: string | null;
  /** The session's `amr`, space-separated (`ed25519`, `hwk user`, `fed`). */
  amr: string;
  /** The thumbprint of the key the session is bound to (DPoP), or null for a bearer session. */
  jkt?: string | null;
  /** The sign-in session this one was handed off from, or null. */
  parent_id?: string | null;
}

/**
 * A session row with the digest an access token is checked against, and its user's attributes
 * (`u_*`, from `LEFT JOIN users`: all null when the subject has no user).
 */
export interface AccessRow extends SessionRow {
  access_digest: string;
  u_name?: string | null;
  u_email?: string | null;
  u_email_verified?: number | boolean | null;
  u_groups?: string | null;
}

export interface UserRow {
  subject: string;
  realm: Realm;
  user_name: string | null;
  external_id: string | null;
  name: string | null;
  name_source: string | null;
  email: string | null;
  /** 0/1 on SQLite, a boolean on PostgreSQL. */
  email_verified: number | boolean;
  email_source: string | null;
  /** The groups as JSON text: a sorted array of names. */
  groups: string;
  groups_source: string | null;
  status: UserStatus;
  created_at: number;
  updated_at: number;
  last_sign_in_at: number | null;
  disabled_at: number | null;
}

export interface GroupRow {
  id: string;
  realm: Realm;
  name: string;
  external_id: string | null;
  created_at: number;
  updated_at: number;
}

export interface ScimTokenRow {
  id: string;
  digest: string;
  name: string;
  created_at: number;
  created_by: string | null;
  last_used_at: number | null;
  revoked_at: number | null;
}

/** A session row with the refresh bookkeeping the rotation decision needs. */
export interface RotationRow extends SessionRow {
  refresh_digest: string;
  prev_refresh_digest: string | null;
  prev_rotated_at: number | null;
}

export interface ChallengeRow {
  id: string;
  public_key: string;
  realm: Realm;
  challenge: string;
  created_at: number;
  expires_at: number;
}

export interface IntentRow {
  id: string;
  realm: Realm;
  subject: string;
  name: string | null;
  code_digest: string;
  created_at: number;
  expires_at: number;
  created_by: string;
  failures: number;
  completed_at: number | null;
  burned_at: number | null;
  device_id: string | null;
  prepared_by_node: string | null;
}

export interface LinkRow {
  id: string;
  realm: Realm;
  subject: string;
  provider: string;
  issuer: string;
  external_subject: string;
  credential_data: string | null;
  counter: number | null;
  name: string;
  created_at: number;
  last_used_at: number | null;
  removed_at: number | null;
}

export interface FlowRow {
  id: string;
  provider: string;
  realm: Realm;
  intent: ProviderIntent;
  subject: string | null;
  pairing_intent_id: string | null;
  state: string;
  created_at: number;
  expires_at: number;
}

export interface EventRow {
  seq: number;
  id: string;
  at: number;
  type: AuditEventType;
  realm: Realm | null;
  subject: string | null;
  device_id: string | null;
  session_id: string | null;
  data: string;
  prev_hash: string;
  hash: string;
}

export function toDevice(r: DeviceRow): DeviceRecord {
  return Object.freeze({
    id: r.id,
    publicKey: r.public_key,
    realm: r.realm,
    subject: r.subject,
    name: r.name,
    createdAt: r.created_at,
    removedAt: r.removed_at,
  });
}

export function toSession(r: SessionRow): SessionRecord {
  // No spread before a literal's own properties: V8 (Node 20) adds each property after a
  // leading spread the slow way, about 1 µs apiece (17 µs for this record, on every bearer check
  // that reads its session); a spread placed after them, as below, stays cheap (0.35 µs in all).
  const record = {
    id: r.id,
    realm: r.realm,
    subject: r.subject,
    deviceId: r.device_id,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
    accessExpiresAt: r.access_expires_at,
    refreshExpiresAt: r.refresh_expires_at,
    generation: r.generation,
    lastRotatedAt: r.last_rotated_at,
    revokedAt: r.revoked_at,
    revokedReason: r.revoked_reason,
    clientAddress: r.client_address,
    userAgent: r.user_agent,
    amr: amrOf(r.amr),
    jkt: r.jkt ?? null,
    ...(r.parent_id == null ? {} : { parentId: r.parent_id }),
  };
  const user = 'u_groups' in r ? sessionUserOf(r as AccessRow) : undefined;
  return Object.freeze(user === undefined ? record : { user, ...record });
}

// A user's groups text → one frozen array per distinct text (few distinct sets; the bearer
// path builds none per request).
const groupArrays = new Map<string, readonly string[]>();

/**
 * The groups JSON text a user row holds, as a frozen array (shared between rows that hold the
 * same text). Anything that is not a JSON array of strings reads as no groups.
 *
 * @example
 * groupsOf('["dev","ops"]'); // ['dev', 'ops']
 */
export function groupsOf(text: string | null | undefined): readonly string[] {
  if (text === null || text === undefined || text === '' || text === '[]') return NO_GROUPS;
  let known = groupArrays.get(text);
  if (known === undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = [];
    }
    known = Object.freeze(Array.isArray(parsed) ? parsed.filter((g): g is string => typeof g === 'string') : []);
    if (groupArrays.size < 10_000) groupArrays.set(text, known);
  }
  return known;
}

const NO_GROUPS: readonly string[] = Object.freeze([]);

/**
 * The JSON text a user row keeps its groups in (the array as given: sorted and unique by
 * `checkGroups`).
 *
 * @example
 * groupsText(['dev', 'ops']); // '["dev","ops"]'
 */
export function groupsText(groups: readonly string[]): string {
  return JSON.stringify(groups);
}

function sessionUserOf(r: AccessRow): SessionUser | null {
  if (r.u_groups === null || r.u_groups === undefined) return null;
  return Object.freeze({
    name: r.u_name ?? null,
    email: r.u_email ?? null,
    emailVerified: r.u_email_verified === true || r.u_email_verified === 1,
    groups: groupsOf(r.u_groups),
  });
}

export function toUser(r: UserRow): UserRecord {
  return Object.freeze({
    subject: r.subject,
    realm: r.realm,
    userName: r.user_name,
    externalId: r.external_id,
    name: r.name,
    nameSource: r.name_source as AttributeSource | null,
    email: r.email,
    emailVerified: r.email_verified === true || r.email_verified === 1,
    emailSource: r.email_source as AttributeSource | null,
    groups: groupsOf(r.groups),
    groupsSource: r.groups_source as AttributeSource | null,
    status: r.status,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    lastSignInAt: r.last_sign_in_at,
    disabledAt: r.disabled_at,
  });
}

/**
 * A user as the SQL stores write it (the booleans as 0/1; PostgreSQL's driver maps them to
 * its boolean column, `::boolean` casts where needed).
 *
 * @example
 * insertUser.run(userRowOf(user));
 */
export function userRowOf(u: UserRecord): UserRow & { email_verified: number } {
  return {
    subject: u.subject,
    realm: u.realm,
    user_name: u.userName,
    external_id: u.externalId,
    name: u.name,
    name_source: u.nameSource,
    email: u.email,
    email_verified: u.emailVerified ? 1 : 0,
    email_source: u.emailSource,
    groups: groupsText(u.groups),
    groups_source: u.groupsSource,
    status: u.status,
    created_at: u.createdAt,
    updated_at: u.updatedAt,
    last_sign_in_at: u.lastSignInAt,
    disabled_at: u.disabledAt,
  };
}

/**
 * The user a subject gets with its first credential when none was made for it: active, no
 * attributes.
 *
 * @example
 * const user = defaultUser({ subject: device.subject, realm: device.realm, now });
 */
export function defaultUser(input: { readonly subject: string; readonly realm: Realm; readonly now: number }): UserRecord {
  return Object.freeze({
    subject: input.subject,
    realm: input.realm,
    userName: null,
    externalId: null,
    name: null,
    nameSource: null,
    email: null,
    emailVerified: false,
    emailSource: null,
    groups: NO_GROUPS,
    groupsSource: null,
    status: 'active',
    createdAt: input.now,
    updatedAt: input.now,
    lastSignInAt: null,
    disabledAt: null,
  });
}

export function toGroup(r: GroupRow): GroupRecord {
  return Object.freeze({
    id: r.id,
    realm: r.realm,
    name: r.name,
    externalId: r.external_id,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  });
}

export function toScimToken(r: ScimTokenRow): ScimTokenRecord {
  return Object.freeze({
    id: r.id,
    digest: r.digest,
    name: r.name,
    createdAt: r.created_at,
    createdBy: r.created_by,
    lastUsedAt: r.last_used_at,
    revokedAt: r.revoked_at,
  });
}

/**
 * The session a rotation leaves, built from the row the store locked (no re-read): the new
 * pair's expiries, one more generation, rotated `now`, as the stores' UPDATE writes it. A store
 * builds the rotation's audit event from it, so the event can be written with the change.
 *
 * @example
 * const session = rotatedSession(row, clampPairToSession(next, row.expires_at), now);
 */
export function rotatedSession(
  r: SessionRow,
  expiries: { readonly accessExpiresAt: number; readonly refreshExpiresAt: number },
  now: number,
): SessionRecord {
  return toSession({
    ...r,
    access_expires_at: expiries.accessExpiresAt,
    refresh_expires_at: expiries.refreshExpiresAt,
    generation: r.generation + 1,
    last_rotated_at: now,
  });
}

// The few distinct `amr` texts each get one frozen array, shared by every session row that has
// it: the bearer path builds no array per request.
const amrArrays = new Map<string, readonly string[]>();

function amrOf(text: string): readonly string[] {
  let amr = amrArrays.get(text);
  if (amr === undefined) {
    amr = Object.freeze(text.split(' ').filter((v) => v !== ''));
    if (amrArrays.size < 64) amrArrays.set(text, amr);
  }
  return amr;
}

/** The `amr` column's text for a session record: its values, space-separated. */
export function amrText(amr: readonly string[]): string {
  return amr.join(' ');
}

export function toLink(r: LinkRow): LinkRecord {
  return Object.freeze({
    id: r.id,
    realm: r.realm,
    subject: r.subject,
    provider: r.provider,
    issuer: r.issuer,
    externalSubject: r.external_subject,
    credentialData: r.credential_data,
    counter: r.counter,
    name: r.name,
    createdAt: r.created_at,
    lastUsedAt: r.last_used_at,
    removedAt: r.removed_at,
  });
}

export function toFlow(r: FlowRow): FlowRecord {
  return Object.freeze({
    id: r.id,
    provider: r.provider,
    realm: r.realm,
    intent: r.intent,
    subject: r.subject,
    pairingIntentId: r.pairing_intent_id,
    state: r.state,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
  });
}

export function toChallenge(r: ChallengeRow): ChallengeRecord {
  return Object.freeze({
    id: r.id,
    publicKey: r.public_key,
    realm: r.realm,
    challenge: r.challenge,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
  });
}

/**
 * What `consumeChallenge` and `readChallenge` answer: the challenge with the active device of
 * its key (see `ConsumedChallenge`), frozen like every record a store returns.
 *
 * @example
 * return consumedChallenge(toChallenge(row), device === undefined ? null : toDevice(device));
 */
export function consumedChallenge(c: ChallengeRecord, device: DeviceRecord | null): ConsumedChallenge {
  // A plain literal, no leading spread (see toSession): this runs on every sign-in.
  return Object.freeze({
    id: c.id,
    publicKey: c.publicKey,
    realm: c.realm,
    challenge: c.challenge,
    createdAt: c.createdAt,
    expiresAt: c.expiresAt,
    device,
  });
}

export function toIntent(r: IntentRow): PairingIntentRecord {
  return Object.freeze({
    id: r.id,
    realm: r.realm,
    subject: r.subject,
    name: r.name,
    codeDigest: r.code_digest,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
    createdBy: r.created_by,
    failures: r.failures,
    completedAt: r.completed_at,
    burnedAt: r.burned_at,
    deviceId: r.device_id,
    preparedByNode: r.prepared_by_node,
  });
}

export function toEvent(r: EventRow): AuditEvent {
  return Object.freeze({
    id: r.id,
    at: r.at,
    type: r.type,
    realm: r.realm,
    subject: r.subject,
    deviceId: r.device_id,
    sessionId: r.session_id,
    // The exact JSON text written at append time: parsing it gives back the same values.
    data: Object.freeze(JSON.parse(r.data) as AuditData),
    seq: r.seq,
    prevHash: r.prev_hash,
    hash: r.hash,
  });
}

/**
 * Whether a session row can still be used at `now`: core's {@link isSessionLive} on the row.
 *
 * @example
 * if (!isLive(row, now)) return { kind: 'invalid' };
 */
export function isLive(s: SessionRow, now: number): boolean {
  return isSessionLive({ revokedAt: s.revoked_at, expiresAt: s.expires_at }, now);
}

/** A per-realm count, as a `GROUP BY realm` returns it. */
export interface RealmCountRow {
  readonly realm: Realm;
  readonly n: number;
}

/**
 * The diagnostics counters of every store from its counts (rows of `statsSql`'s queries, or
 * the memory store's own tallies) and its audit head (undefined for an empty trail): realms
 * without a row count 0.
 *
 * @example
 * return toStoreStats({ devices: [{ realm: 'management', n: 1 }], activeSessions: [], events: [], head: undefined });
 */
export function toStoreStats(counts: {
  readonly devices: Iterable<RealmCountRow>;
  readonly activeSessions: Iterable<RealmCountRow>;
  readonly events: Iterable<{ readonly type: string; readonly n: number }>;
  readonly head: { readonly seq: number; readonly hash: string } | undefined;
}): StoreStats {
  const perRealm = (rows: Iterable<RealmCountRow>): Record<Realm, number> => {
    const out: Record<Realm, number> = { management: 0, application: 0 };
    for (const r of rows) out[r.realm] += r.n;
    return out;
  };
  const events: Record<string, number> = {};
  for (const r of counts.events) events[r.type] = r.n;
  return {
    devices: perRealm(counts.devices),
    activeSessions: perRealm(counts.activeSessions),
    events,
    auditLength: counts.head?.seq ?? 0,
    auditHead: counts.head?.hash ?? GENESIS_HASH,
  };
}

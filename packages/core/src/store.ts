import type { AttemptWindow } from './attempt-budget.js';
import type { AuditEvent, AuditEventDraft } from './audit.js';
import type { ControlStateRow, ExportOptions, ImportOutcome } from './control-state.js';
import type { ProviderIntent } from './provider.js';
import type { Realm } from './realm.js';
import type { AttributeSource, UserStatus } from './users.js';

/**
 * The store contract: typed, domain-level operations with atomic semantics. All times are
 * milliseconds since the Unix epoch; all digests are lowercase SHA-256 hex; public keys are
 * lowercase hex. Every operation that takes an audit event commits the change and the event
 * in ONE transaction (no event for a change that did not happen, no change without its event).
 * Single-use things are used up by one atomic conditional update, so N concurrent attempts,
 * in one process or many, yield exactly one winner.
 */

/**
 * The version of this contract, part of a store addon's ABI. 2: session tokens are split
 * (looked up by session id). 3: shared attempt budgets (`reserveAttempts`, `settleAttempts`),
 * the sealed successor pair answered within grace, retention (`pruneEndedRecords`), the last
 * management device kept inside the transaction (`removeDevice` `keepLast`). 4: a session
 * records its client (`clientAddress`, `userAgent`); devices and sessions are listed by subject.
 * 5: provider links and flows (`createLink`, `getLink`, `findLiveLink`, `listLinks`,
 * `removeLink`, `createFlow`, `consumeFlow`, `createLinkSession`); a session records how it was
 * made (`amr`), and its `deviceId` may be a link id. 6: `createLink` may complete a link
 * intent (a pairing intent whose code is bound to a provider) in the same transaction. 7: a session
 * records the key its tokens are bound to (`jkt`); DPoP proofs are used once (`useDpopProof`), and
 * server nonces are looked up (`hasDpopRecord`). 8: users (`getUser`, `listUsers`, `createUser`,
 * `changeUser`, `listGroups`), group records and SCIM tokens; a disabled user's sign-ins are
 * refused inside the session-creating transactions (`createSession` answers `user_disabled`),
 * a bearer check reads the session's user attributes with it (`SessionRecord.user`). 9: the
 * gateway's assertion key set is the cluster's, kept in the store (`getAssertionKeys`, and
 * `saveAssertionKeys`, a compare-and-set on its version, audited in the same transaction).
 * 10: `consumeChallenge` answers the challenge with the active device of its public key, read
 * in the same step (a sign-in's device lookup, one round trip fewer on a networked store).
 * 11: a sign-in reads its challenge (`readChallenge`) and uses it up in the transaction that
 * creates its session (`createSession`'s `challenge`, answering `challenge_used`): one write
 * transaction fewer per sign-in. 12: a refresh's DPoP proof goes to `rotateRefreshToken`
 * (`dpop`), which compares its key with the session's binding on the row it reads and records
 * it in the rotation's own transaction (answering `proof_required`, `proof_replayed`): no read
 * of the session before the rotation, one write transaction fewer per refresh of a bound session.
 */
export const STORE_CONTRACT_VERSION = 12;

/**
 * The assertion key set of the cluster as the store keeps it: opaque text (the runtime seals the
 * private halves before it hands it over; the store never reads it) and a version that counts
 * every save, which {@link Store.saveAssertionKeys} compares and sets.
 */
export interface AssertionKeysRecord {
  /** 1 for the first set saved, +1 on each save after it. */
  readonly version: number;
  /** The key set (JSON text; see core's `sealAssertionKeySet`): never parsed by the store. */
  readonly keySet: string;
  /** When it was saved. */
  readonly updatedAt: number;
}

/** What {@link Store.saveAssertionKeys} led to. */
export type AssertionKeysSave =
  | { readonly saved: true; readonly record: AssertionKeysRecord }
  /** Another writer saved first (the stored version is not the expected one): nothing written; `current` is what is stored. */
  | { readonly saved: false; readonly current: AssertionKeysRecord | null };

/** An enrolled device. `removedAt` is set when an operator removes it. */
export interface DeviceRecord {
  readonly id: string;
  readonly publicKey: string;
  readonly realm: Realm;
  readonly subject: string;
  readonly name: string;
  readonly createdAt: number;
  readonly removedAt: number | null;
}

/** A session and the lifetimes of its current token pair (the digests stay in the store). */
export interface SessionRecord {
  readonly id: string;
  readonly realm: Realm;
  readonly subject: string;
  readonly deviceId: string;
  readonly createdAt: number;
  /** Absolute end of the session: no rotation extends it. */
  readonly expiresAt: number;
  readonly accessExpiresAt: number;
  readonly refreshExpiresAt: number;
  /** 0 at creation, +1 on every rotation (grace rotations included). */
  readonly generation: number;
  readonly lastRotatedAt: number | null;
  readonly revokedAt: number | null;
  readonly revokedReason: string | null;
  /** The address the session was created from, as the server saw it (see `sessionClient`); null when unknown. */
  readonly clientAddress: string | null;
  /** The `User-Agent` the session was created with, made printable and cut short (see `sessionClient`); null when none. */
  readonly userAgent: string | null;
  /**
   * How the session was made, as RFC 8176 authentication method references: `["ed25519"]` for a
   * device key, `["hwk", "user"]` for a passkey, `["fed"]` for an OIDC login. Read with the
   * session, so the principal's `claims.amr` costs no extra query on the bearer path.
   */
  readonly amr: readonly string[];
  /**
   * The RFC 7638 thumbprint (`cnf.jkt`) of the device key the session's tokens are bound to
   * (DPoP, RFC 9449), or null (absent) for a bearer session: one created under
   * `:auth/sender-constraint :off`, by a provider, or before the binding existed.
   */
  readonly jkt?: string | null;
  /**
   * The attributes of the session's user, read WITH the session by `findSessionByAccessDigest`
   * (one query: the bearer path makes no second one), so the principal carries them; absent on
   * every other read, null when the subject has no user record.
   */
  readonly user?: SessionUser | null;
  /**
   * The sign-in session this one was handed off from (one sign-in across route hosts,
   * `:svc/app-auth-origin`): a route host's own session, revoked with its parent by
   * `revokeSessionFamily`. Null (absent) for a session made by a sign-in.
   */
  readonly parentId?: string | null;
}

/** What a bearer check reads of a session's user. */
export interface SessionUser {
  readonly name: string | null;
  readonly email: string | null;
  readonly emailVerified: boolean;
  readonly groups: readonly string[];
}

/**
 * A user: one per subject, in its realm. Created with the subject's first credential (a device,
 * a link) or by an operator or the directory (SCIM); its attributes say who the person is, and
 * where each came from (`*Source`, null while unset).
 */
export interface UserRecord {
  readonly subject: string;
  readonly realm: Realm;
  /** The SCIM `userName` (unique in the realm), or null. */
  readonly userName: string | null;
  /** The directory's own id for the user (SCIM `externalId`), or null. */
  readonly externalId: string | null;
  readonly name: string | null;
  readonly nameSource: AttributeSource | null;
  /** A checked email (core's `checkEmail`: ASCII, A-label domain), or null. */
  readonly email: string | null;
  readonly emailVerified: boolean;
  readonly emailSource: AttributeSource | null;
  /** Sorted, unique, each a valid group name (`checkGroups`). */
  readonly groups: readonly string[];
  readonly groupsSource: AttributeSource | null;
  readonly status: UserStatus;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly lastSignInAt: number | null;
  readonly disabledAt: number | null;
}

/** What {@link Store.changeUser}'s decision asks the store to write. */
export type UserChange =
  /** The user takes `user` (same subject and realm); with `revokeSessions`, every live session of the subject is revoked with that reason. */
  | {
      readonly kind: 'update';
      readonly user: UserRecord;
      readonly revokeSessions: string | null;
      readonly events: readonly AuditEventDraft[];
    }
  /** The user is deleted, its devices and links removed and its live sessions revoked (reason `user_removed`). */
  | { readonly kind: 'remove'; readonly events: readonly AuditEventDraft[] }
  /** Nothing to write (the decision found nothing changes). */
  | { readonly kind: 'none' };

/** What changing a user led to. */
export type UserChangeOutcome =
  | { readonly kind: 'unknown' }
  | { readonly kind: 'none'; readonly user: UserRecord }
  /** `burnedIntents`: live pairing and link intents created by or for the subject, burned because the update revoked its sessions (a disable). */
  | { readonly kind: 'updated'; readonly user: UserRecord; readonly revokedSessions: number; readonly burnedIntents: number }
  /** `burnedIntents`: live pairing and link intents created by or for the subject, burned with the removal. */
  | {
      readonly kind: 'removed';
      readonly revokedSessions: number;
      readonly removedDevices: number;
      readonly removedLinks: number;
      readonly burnedIntents: number;
    };

/** What a decision about a user knows besides the user (counted inside the store's transaction). */
export interface UserChangeContext {
  /**
   * For a management-realm user: how many OTHER management users are active and hold a live
   * credential (an active device or a live link), counted with those rows locked where writers
   * run concurrently, so N concurrent disables or removals of the last N leave one. 0 for an
   * application-realm user.
   */
  readonly otherActiveManagementUsers: number;
}

/** A group in a realm, as {@link Store.listGroups} counts it. */
export interface GroupSummary {
  readonly realm: Realm;
  readonly name: string;
  /** The group record's id (`grp_`), or null for a name only users carry. */
  readonly id: string | null;
  /** How many users of the realm are in it. */
  readonly members: number;
}

/** A named group kept on its own (the directory creates groups before it fills them). */
export interface GroupRecord {
  readonly id: string;
  readonly realm: Realm;
  readonly name: string;
  /** The directory's own id (SCIM `externalId`), or null. */
  readonly externalId: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** A SCIM bearer token, by its digest (the token itself is shown once). */
export interface ScimTokenRecord {
  readonly id: string;
  readonly digest: string;
  readonly name: string;
  readonly createdAt: number;
  readonly createdBy: string | null;
  readonly lastUsedAt: number | null;
  readonly revokedAt: number | null;
}

/**
 * How precisely a SCIM token's `lastUsedAt` is kept: {@link Store.useScimToken} writes it at most
 * once per this many ms per token, so a directory's requests are not each a store write.
 */
export const SCIM_TOKEN_USE_RESOLUTION_MS = 60_000;

/**
 * Whether a use of a SCIM token at `now` records itself: never recorded, recorded at least
 * {@link SCIM_TOKEN_USE_RESOLUTION_MS} ago, or recorded "in the future" (the clock stepped back).
 *
 * @example
 * scimTokenUseIsDue(null, 1000); // true
 */
export function scimTokenUseIsDue(lastUsedAt: number | null, now: number): boolean {
  return lastUsedAt === null || now < lastUsedAt || now - lastUsedAt >= SCIM_TOKEN_USE_RESOLUTION_MS;
}

/** A filter of {@link Store.listUsers}: each given narrows the list. */
export interface UserFilter {
  readonly realm?: Realm;
  readonly status?: UserStatus;
  /** Users in this group. */
  readonly group?: string;
  /** Exact (checked) email. */
  readonly email?: string;
  /** Exact SCIM userName. */
  readonly userName?: string;
  /** Exact SCIM externalId. */
  readonly externalId?: string;
  /** A case-insensitive substring of the name, email or userName (ASCII case folding). */
  readonly text?: string;
  /** Only subjects sorting after this one (paging). */
  readonly after?: string;
  /** At most this many (1-1000). */
  readonly limit: number;
}

/**
 * An external identity linked to a subject of one realm (a passkey, an OIDC login): its `id`
 * (`lnk_`) stands where a device id stands in the sessions it signs in. Live while `removedAt`
 * is null; at most one live link per (realm, issuer, external subject).
 */
export interface LinkRecord {
  readonly id: string;
  readonly realm: Realm;
  readonly subject: string;
  /** The provider module's name (its policy name, the route segment). */
  readonly provider: string;
  /** Who vouches for the identity: an OIDC issuer URL, or `webauthn:<rp id>`. */
  readonly issuer: string;
  /** The subject at that issuer: an OIDC `sub`, or a WebAuthn credential id. */
  readonly externalSubject: string;
  /** The provider's own data about the credential, as JSON text (opaque to the service), or null. */
  readonly credentialData: string | null;
  /** The credential's signature counter, kept monotonic by `createLinkSession`; null when it has none. */
  readonly counter: number | null;
  readonly name: string;
  readonly createdAt: number;
  readonly lastUsedAt: number | null;
  readonly removedAt: number | null;
}

/** A provider ceremony in progress: single use (`consumeFlow`), short lived. */
export interface FlowRecord {
  readonly id: string;
  /** The provider module's name. */
  readonly provider: string;
  readonly realm: Realm;
  readonly intent: ProviderIntent;
  /** For `link`: the subject the new credential is linked to; null otherwise. */
  readonly subject: string | null;
  /** For a `link` completing a pairing intent: its id; null otherwise. */
  readonly pairingIntentId: string | null;
  /** The provider's `state`, as JSON text: never sent to the browser. */
  readonly state: string;
  readonly createdAt: number;
  readonly expiresAt: number;
}

/**
 * A one-time code that hands a signed-in browser's session to another route host (the auth
 * origin mints it, the route host redeems it with `consumeHandoffCode`). Only its digest is
 * stored; it is single use, short lived, bound to the route origin it is for, to the sign-in
 * session it hands off, and to the digest of a state value the route host set in the browser
 * before sending it to sign in (so a code cannot be forced onto another browser).
 */
export interface HandoffCodeRecord {
  /** SHA-256 of the code (lowercase hex): the code itself is never stored. */
  readonly digest: string;
  /** The sign-in session it hands off. */
  readonly sessionId: string;
  /** The route origin it may be redeemed at (canonical). */
  readonly origin: string;
  /** SHA-256 (hex) of the route host's state value the browser carries in its state cookie. */
  readonly bindingDigest: string;
  readonly createdAt: number;
  readonly expiresAt: number;
}

/** Why a handoff code was refused. */
export type HandoffRefusal =
  /** No such code, or it was used already (replay). */
  | 'unknown'
  /** Past its 30 s, or dated further in the future than the clock skew allows. */
  | 'expired'
  /** Presented at another origin than the one it was minted for. */
  | 'wrong_origin'
  /** The browser's state cookie is not the one the code was minted for (login CSRF). */
  | 'wrong_binding'
  /** The sign-in session it hands off was revoked or ended meanwhile. */
  | 'session_ended'
  /** The session's user is disabled. */
  | 'user_disabled';

/** What redeeming a handoff code led to. */
export type HandoffOutcome =
  | { readonly kind: 'created'; readonly session: SessionRecord; readonly parent: SessionRecord }
  | { readonly kind: 'refused'; readonly reason: HandoffRefusal; readonly code: HandoffCodeRecord | null };

/** What a route host's new session takes from the redemption (the rest comes from the sign-in session). */
export interface HandoffChild {
  readonly id: string;
  readonly accessExpiresAt: number;
  readonly refreshExpiresAt: number;
  readonly clientAddress: string | null;
  readonly userAgent: string | null;
}

/** What creating a session for a link led to. */
export type LinkSessionOutcome =
  | { readonly kind: 'created' }
  /** The link is unknown or removed (maybe meanwhile): nothing written. */
  | { readonly kind: 'link_removed' }
  /** The presented counter does not advance the stored one (a cloned authenticator?): nothing written. */
  | { readonly kind: 'counter_regressed'; readonly stored: number | null }
  /** The link's user is disabled: nothing written. */
  | { readonly kind: 'user_disabled' };

/** What {@link Store.createSession} led to. */
export type SessionCreation = 'created' | 'device_inactive' | 'user_disabled' | 'challenge_used';

/** A challenge a device must sign. */
export interface ChallengeRecord {
  readonly id: string;
  readonly publicKey: string;
  readonly realm: Realm;
  /** The exact printable string the device signs. */
  readonly challenge: string;
  readonly createdAt: number;
  readonly expiresAt: number;
}

/**
 * A challenge as {@link Store.consumeChallenge} uses it up (or {@link Store.readChallenge} reads
 * it): the record, and the active (not removed) device enrolled with its public key, as
 * {@link Store.findDeviceByPublicKey} answers for it (null when the key is not enrolled, or its
 * device was removed).
 */
export interface ConsumedChallenge extends ChallengeRecord {
  readonly device: DeviceRecord | null;
}

/** An enrolment intent prepared by an admin and completed by a new device. */
export interface PairingIntentRecord {
  readonly id: string;
  readonly realm: Realm;
  readonly subject: string;
  readonly name: string | null;
  readonly codeDigest: string;
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly createdBy: string;
  readonly failures: number;
  readonly completedAt: number | null;
  readonly burnedAt: number | null;
  readonly deviceId: string | null;
  /** The node id of the node that prepared it (an intent prepared on one node may complete on another); null when not prepared on a node surface. */
  readonly preparedByNode: string | null;
}

/** A new token pair, as digests and expiries, for a session. */
export interface TokenPairDigests {
  readonly accessDigest: string;
  readonly refreshDigest: string;
  readonly accessExpiresAt: number;
  readonly refreshExpiresAt: number;
}

/** What consuming a bootstrap token led to. */
export type BootstrapOutcome =
  | { readonly kind: 'enrolled'; readonly device: DeviceRecord }
  | { readonly kind: 'unknown' | 'expired' | 'used' | 'already_enrolled' };

/** What presenting a refresh token led to. */
export type RotationOutcome =
  /** It was the current one: the session now holds the new pair. */
  | { readonly kind: 'rotated'; readonly session: SessionRecord }
  /**
   * It was the immediately previous one, within the grace interval: nothing changed; the pair
   * its rotation issued (still the live one) is answered again, sealed for the presented token.
   */
  | { readonly kind: 'rotated_in_grace'; readonly session: SessionRecord; readonly sealedSuccessor: string }
  /** It was retired (previous outside grace, or older): the session is now revoked. */
  | { readonly kind: 'reused'; readonly session: SessionRecord }
  /** Unknown, expired, or its session is revoked or expired: nothing changed. */
  | { readonly kind: 'invalid' }
  /**
   * The session is bound to a device key (`jkt`) and no proof by that key came with the token
   * (none, or one by another key): nothing changed, the proof recorded nowhere (core's `rotationProof`).
   */
  | { readonly kind: 'proof_required' }
  /** The proof by the session's key was used before (a live record of its `jti`): nothing changed. */
  | { readonly kind: 'proof_replayed' };

/** The outcomes of a rotation that write an audit event. */
export type AuditedRotation = Extract<RotationOutcome, { kind: 'rotated' | 'rotated_in_grace' | 'reused' }>;

/**
 * A refresh's DPoP proof as core verified it, all but its key: whether that is the key the
 * session is bound to is the rotation's own decision (core's `rotationProof`), made on the row
 * the store reads, so no read of the session comes before the rotation's.
 */
export interface RotationProof {
  /** The thumbprint (RFC 7638) of the key that signed the proof. */
  readonly jkt: string;
  /** Its key in the DPoP replay cache (core's `dpopReplayKey`). */
  readonly key: string;
  /** Until when its record is kept (the proof's own `expiresAt`). */
  readonly expiresAt: number;
}

/** What completing a pairing intent led to. */
export type PairingCompletion =
  | { readonly kind: 'completed'; readonly device: DeviceRecord }
  /** Someone else completed it first, or it expired or burned meanwhile, or its subject or creator has no user (removed). */
  | { readonly kind: 'invalid' }
  | { readonly kind: 'already_enrolled' }
  /** The intent's subject or creator is a disabled user: nothing written (the intent stays live). */
  | { readonly kind: 'user_disabled' };

/** What reserving an attempt against shared budgets led to. */
export type AttemptReservation =
  /** Reserved against every key; `windows` is what to hand back to `releaseAttempts`. `shared: false`: this store is one node's, and reserved nothing. */
  | { readonly reserved: true; readonly shared: boolean; readonly windows: readonly AttemptWindow[] }
  /** Some key's budget is spent (`busy: false`), or full of running attempts (`busy: true`: ask again soon): nothing was reserved. */
  | { readonly reserved: false; readonly busy: boolean; readonly retryAfterMs: number };

/** Counters for signed diagnostics: aggregates only, never per-user data. */
export interface StoreStats {
  readonly devices: Readonly<Record<Realm, number>>;
  readonly activeSessions: Readonly<Record<Realm, number>>;
  /** Count of audit events by type. */
  readonly events: Readonly<Record<string, number>>;
  readonly auditLength: number;
  readonly auditHead: string;
}

/**
 * The operations a control store implements. Their names are the store's "operation set",
 * which addon verification compares with {@link STORE_OPERATIONS}. An operation that fails
 * because the database cannot serve (connection lost, timeout, lock held too long, disk full,
 * I/O error) rejects with a `StoreUnavailableError` (`503 store_unavailable`), never a driver
 * error: see `classifyStoreErrors`.
 */
export interface Store {
  /**
   * Resolves when the store can serve; rejects when it cannot, with a `StoreUnavailableError`
   * naming the fault when it is a known one (unreachable, not answering in time, locked, full,
   * failing I/O). A store that remembers a fault met by a write (a held lock, a full disk)
   * probes it here, so health reports it while it lasts and recovers when it ends.
   */
  ping(): Promise<void>;
  /** Releases connections and file handles. */
  close(): Promise<void>;

  /** The project this control store belongs to, or null before `initProject`. */
  getProject(): Promise<{ readonly projectId: string; readonly createdAt: number } | null>;
  /** Records the project id once; later calls with any id leave it unchanged and return the stored one. */
  initProject(input: { readonly projectId: string; readonly createdAt: number }): Promise<{ readonly projectId: string }>;

  /**
   * Stores a new bootstrap token (its digest only). Every earlier unused bootstrap token is
   * superseded in the same transaction, so at most one is ever live.
   */
  issueBootstrapToken(
    input: { readonly id: string; readonly digest: string; readonly createdAt: number; readonly expiresAt: number },
    event: AuditEventDraft,
  ): Promise<void>;
  /**
   * Uses up the bootstrap token with `digest` and enrolls `device`, atomically. Checks in
   * this order: unknown (or superseded) → `unknown`; already used → `used`; `expiresAt <=
   * now` → `expired`; the key already enrolled (an active device) → `already_enrolled`
   * (the token stays unused). On success marks it used, inserts the device, creates the
   * subject's user (active, no attributes) and appends `event`, all in one transaction.
   */
  consumeBootstrapToken(
    input: { readonly digest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<BootstrapOutcome>;

  /**
   * Inserts a device with its event, creating the subject's user (active, no attributes) when it
   * has none; `already_enrolled` when an active device has that key.
   */
  enrollDevice(device: DeviceRecord, event: AuditEventDraft): Promise<'enrolled' | 'already_enrolled'>;
  /** The active (not removed) device with that public key. */
  findDeviceByPublicKey(publicKey: string): Promise<DeviceRecord | null>;
  /** A device by id, removed or not. */
  getDevice(id: string): Promise<DeviceRecord | null>;
  /** Active devices, oldest first, optionally of one realm and of one subject. */
  listDevices(filter: { readonly realm?: Realm; readonly subject?: string }): Promise<readonly DeviceRecord[]>;
  /** Number of active devices in a realm. */
  countDevices(realm: Realm): Promise<number>;
  /**
   * Marks the device removed and revokes all its active sessions (reason `device_removed`),
   * with the event, in one transaction. `removed: false` when it was unknown or already removed
   * (then nothing is written).
   *
   * With `keepLast`, the device is not removed when it is the last active device of its realm:
   * `{removed: false, last: true}` and nothing written. The count is taken inside the
   * transaction, with the realm's active device rows locked where the engine allows concurrent
   * writers, so N concurrent removals of the realm's last N devices leave exactly one.
   */
  removeDevice(
    input: { readonly deviceId: string; readonly now: number; readonly keepLast?: boolean },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly last?: true }>;

  /** Stores a challenge. */
  createChallenge(challenge: ChallengeRecord): Promise<void>;
  /**
   * Uses up a challenge: returns it and marks it used (or deletes it: a used challenge is only
   * ever refused, so a store need not keep it) if it exists, is unused,
   * `expiresAt > now` and `createdAt <= now + CLOCK_SKEW_TOLERANCE_MS` (one dated further in the
   * future means the clock was stepped back: its age cannot be measured, so it is refused);
   * otherwise null. Exactly one of N concurrent calls gets it. It comes with the active device
   * of its public key, read in the same step. A sign-in uses its challenge up this way only when
   * it is refused before its session's transaction (which uses it up otherwise: see
   * {@link Store.createSession}'s `challenge`).
   */
  consumeChallenge(input: { readonly id: string; readonly now: number }): Promise<ConsumedChallenge | null>;
  /**
   * The challenge {@link Store.consumeChallenge} would use up at `now`, with the active device of
   * its public key, read without using it up (null when that call would answer null). A
   * sign-in reads its challenge, checks the signature, and uses the challenge up in the
   * transaction that creates its session ({@link Store.createSession}'s `challenge`).
   */
  readChallenge(input: { readonly id: string; readonly now: number }): Promise<ConsumedChallenge | null>;

  /**
   * Inserts a session with its first pair and its event, only while the session's device is
   * still active: checked inside the transaction (and, where the engine allows concurrent
   * writers, with the device row locked), so a sign-in racing a device removal can never leave
   * a live session for a removed device; and only while the subject's user is not disabled
   * (its row read under a share lock where writers run concurrently, so a sign-in racing a
   * {@link Store.changeUser} that disables is either refused or revoked by it). Records the
   * sign-in as the user's `lastSignInAt`. `device_inactive` when the device is unknown or
   * removed, `user_disabled` when the user is disabled; then no session is written.
   *
   * With `challenge`, the sign-in's challenge is used up in the same transaction, as
   * {@link Store.consumeChallenge} would use it up at `challenge.now`: `challenge_used` when it
   * cannot be (unknown, already used, expired, dated in the future), and then nothing is
   * written; otherwise it is used up whatever the answer (a refused sign-in uses its challenge
   * too). Of N concurrent calls naming one challenge, at most one creates a session.
   */
  createSession(
    session: SessionRecord,
    pair: TokenPairDigests,
    event: AuditEventDraft,
    challenge?: { readonly id: string; readonly now: number },
  ): Promise<SessionCreation>;
  /**
   * Session `sessionId` if `digest` is the digest of its CURRENT access token (revoked or not,
   * expired or not), compared in constant time; otherwise null. The id comes from the token's
   * selector, so this is one primary-key lookup.
   */
  findSessionByAccessDigest(sessionId: string, digest: string): Promise<SessionRecord | null>;
  /** A session by id. */
  getSession(id: string): Promise<SessionRecord | null>;
  /** Sessions not revoked with `expiresAt > now` and `refreshExpiresAt > now`, newest first; each filter given narrows the list. */
  listActiveSessions(filter: {
    readonly now: number;
    readonly realm?: Realm;
    readonly deviceId?: string;
    readonly subject?: string;
  }): Promise<readonly SessionRecord[]>;
  /**
   * The whole refresh decision, atomically, for a token of session `sessionId` (its selector)
   * whose digest is `presentedDigest`: the store locks and reads the session row, applies
   * core's `decideRotation` (and `decideRetiredPresentation` when it asks for the retired
   * lookup), and writes what it decided (a store may instead plan on the row read without a
   * lock and write only while the row is still as read, deciding again under the lock when it
   * is not: the PostgreSQL store does):
   * - `rotate` → `rotated`: the session takes `next` (each expiry clamped to the session's
   *   `expiresAt`), the presented token becomes the "previous" one with `rotatedAt = now` and
   *   `sealedSuccessor` kept beside it, the token that was previous before is retired for good;
   * - `replay` → `rotated_in_grace`: nothing but the event is written; the outcome carries the
   *   sealed successor stored with the previous token (the live pair, answered again);
   * - `reuse` → `reused`: the session is revoked (reason `refresh_token_reused`);
   * - `invalid` → `invalid`, nothing written.
   * Before that, core's `rotationProof` on the row: a session bound to a device key (`jkt`) is
   * only rotated with a proof by that key (`dpop`): without one, `proof_required` and nothing
   * written, no reuse detected, no revocation. With one, the proof is recorded in the DPoP
   * replay cache (as `useDpopProof` would) in the rotation's own transaction, whatever the
   * rotation decides (`invalid` included); a live record of it already there is
   * `proof_replayed`, and nothing is written. A bearer session's proof (none bound) is not recorded.
   * `audit` is called with the outcome and the session as it is after the change; the event it
   * returns for the outcome answered is appended in the same transaction as the change. It must
   * have no effect of its own: a store that plans again (above) calls it once more, and only the
   * last event is written.
   * Concurrent presentations of one token never leave two live pairs.
   */
  rotateRefreshToken(
    input: {
      readonly sessionId: string;
      readonly presentedDigest: string;
      readonly realm: Realm;
      readonly now: number;
      readonly graceMs: number;
      readonly next: TokenPairDigests;
      /** The new pair sealed with the presented token (core's `sealSuccessor`); kept only if it rotates. */
      readonly sealedSuccessor: string;
      /** The refresh's DPoP proof, verified but for its key (see above); absent when none came or it did not verify. */
      readonly dpop?: RotationProof;
    },
    audit: (outcome: AuditedRotation) => AuditEventDraft,
  ): Promise<RotationOutcome>;
  /**
   * Revokes a session (sets `revokedAt = now`, `revokedReason = reason`) with its event.
   * False, and nothing written, when it is unknown or already revoked.
   */
  revokeSession(
    input: { readonly sessionId: string; readonly now: number; readonly reason: string },
    event: AuditEventDraft,
  ): Promise<boolean>;
  /**
   * Revokes a session and every session handed off from it (`parentId = sessionId`), each not
   * yet revoked, with `event(session)` appended for each one revoked, in ONE transaction (one
   * logout ends a sign-in on every route host at once, on every node sharing the store).
   * Returns the ids revoked, the named session first when it was live; empty, nothing written,
   * when none was.
   */
  revokeSessionFamily(
    input: { readonly sessionId: string; readonly now: number; readonly reason: string },
    event: (session: SessionRecord) => AuditEventDraft,
  ): Promise<readonly string[]>;
  /** Stores a handoff code (its digest only). Expired codes may be deleted meanwhile (they can never be redeemed). */
  createHandoffCode(code: HandoffCodeRecord): Promise<void>;
  /**
   * Redeems a handoff code, atomically: the code with `digest` is used up by one conditional
   * update (exactly one of N concurrent redemptions gets it; whatever follows, it is never
   * usable again), then core's `decideHandoff` judges it against the presented `origin` and
   * `bindingDigest` and the sign-in session it names (read in the same transaction, its user's
   * status under a share lock as in `createSession`); when it holds, the route host's session
   * (`parentId` = the sign-in session) is inserted with `pair`. `audit(outcome)` is called
   * inside the transaction and the events it returns are appended in it.
   */
  consumeHandoffCode(
    input: {
      readonly digest: string;
      readonly origin: string;
      readonly bindingDigest: string;
      readonly now: number;
      readonly child: HandoffChild;
      readonly pair: TokenPairDigests;
    },
    audit: (outcome: HandoffOutcome) => readonly AuditEventDraft[],
  ): Promise<HandoffOutcome>;

  /**
   * Deletes retired refresh-token digests that can no longer change any outcome: those of
   * sessions that are revoked or have ended (`expiresAt <= now`; presenting them is `invalid`
   * either way), and those retired before `retiredBefore` (pass `now - refresh TTL`: a token is
   * issued before it is retired, so it has expired too). Returns how many were deleted.
   *
   * It also erases the sealed grace pair of every session whose previous token was rotated
   * before `graceEndedBefore` (pass `now - grace`): past grace that token is a reuse, so the
   * pair serves nothing, and kept it would give the live pair to whoever holds a copy of the
   * database and that retired token, without the reuse ever being presented. (Revoking a
   * session erases its pair at once; the next rotation replaces it.)
   */
  pruneRetiredRefreshTokens(input: {
    readonly now: number;
    readonly retiredBefore: number;
    readonly graceEndedBefore: number;
  }): Promise<number>;

  /** Appends an event that records no state change (e.g. a failed sign-in). */
  appendAuditEvent(event: AuditEventDraft): Promise<AuditEvent>;
  /** Events with `seq > afterSeq`, in order, at most `limit`. */
  listAuditEvents(input: { readonly afterSeq: number; readonly limit: number }): Promise<readonly AuditEvent[]>;
  /** The last event's position and hash, or null for an empty chain. */
  auditHead(): Promise<{ readonly seq: number; readonly hash: string } | null>;

  /**
   * Stores a pairing intent with its event, and creates its subject's user (active, no
   * attributes) when it has none, in the same transaction: an intent for a new subject has its
   * user from the start, so completion can require one (a subject without a user was removed).
   */
  createPairingIntent(intent: PairingIntentRecord, event: AuditEventDraft): Promise<void>;
  /** An intent by id. */
  getPairingIntent(id: string): Promise<PairingIntentRecord | null>;
  /**
   * Counts one wrong code against a live intent, atomically; when the count reaches
   * `maxFailures` the intent is burned (`burnedAt = now`). `event(failures, burned)` is called
   * inside the transaction and its event appended. Null when the intent is unknown or no
   * longer live (completed, burned, expired): nothing written.
   */
  recordPairingFailure(
    input: { readonly id: string; readonly now: number; readonly maxFailures: number },
    event: (failures: number, burned: boolean) => AuditEventDraft,
  ): Promise<{ readonly failures: number; readonly burned: boolean } | null>;
  /**
   * Completes a live intent (not completed, not burned, `expiresAt > now`, code digest equal
   * to `codeDigest`) and enrolls `device`, with the event, atomically, creating the subject's user
   * Exactly one of N concurrent completions wins. Nothing is written, and the answer is
   * `invalid` when the intent's subject or its creator (`createdBy`) has no user (removed),
   * `user_disabled` when either is a disabled user ({@link decideIntentUsers}).
   */
  completePairing(
    input: { readonly id: string; readonly codeDigest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<PairingCompletion>;

  /** Aggregate counters for diagnostics. */
  stats(now: number): Promise<StoreStats>;

  /**
   * Inserts a link with its event (`link.created`); `already_linked`, and nothing written, when
   * a live link has the same (realm, issuer, external subject): a unique index decides, also
   * between nodes.
   */
  createLink(
    link: LinkRecord,
    /** Its events, appended in order (`link.created`; a just-in-time user's `user.created` first). */
    event: AuditEventDraft | readonly AuditEventDraft[],
    /**
     * A link intent this link completes: in the same transaction it is marked completed
     * (`completedAt = now`, `deviceId = link.id`), only while live (not completed, not burned,
     * `expiresAt > now`, its code digest equal to `codeDigest`); otherwise `'intent_invalid'`
     * and nothing written. Of N concurrent links completing one intent, exactly one is created.
     * With an intent, the link's subject and the intent's creator must both have a user
     * (otherwise `'intent_invalid'`: removed), neither disabled (`'user_disabled'`).
     */
    pairing?: { readonly id: string; readonly codeDigest: string; readonly now: number },
    /**
     * The user of a NEW subject (just-in-time provisioning), created in the same transaction
     * (`subject` and `realm` equal the link's). Without it, a subject that has no user gets one
     * (active, no attributes). A link to an existing DISABLED user is `'user_disabled'`, nothing written.
     */
    user?: UserRecord,
  ): Promise<'created' | 'already_linked' | 'intent_invalid' | 'user_disabled'>;
  /** A link by id, removed or not. */
  getLink(id: string): Promise<LinkRecord | null>;
  /** The live link of an external identity in a realm. */
  findLiveLink(input: { readonly realm: Realm; readonly issuer: string; readonly externalSubject: string }): Promise<LinkRecord | null>;
  /** Live links, oldest first; each filter given narrows the list. */
  listLinks(filter: { readonly realm?: Realm; readonly subject?: string; readonly provider?: string }): Promise<readonly LinkRecord[]>;
  /**
   * Marks the link removed and revokes all its live sessions (reason `link_removed`), with the
   * event, in one transaction. `removed: false`, and nothing written, when it was unknown or
   * already removed. With `keepAnotherWayIn`, also `removed: false, lastWayIn: true`, nothing
   * written, when its subject would keep no other live link and no active device in its realm
   * (decided inside the transaction, the subject's live links locked where writers run
   * concurrently: of two concurrent removals of a subject's last two links, one is refused).
   */
  removeLink(
    input: { readonly linkId: string; readonly now: number; readonly keepAnotherWayIn?: boolean },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly lastWayIn?: boolean }>;
  /**
   * Renames a live link (the name its owner knows it by), with the event (`link.renamed`), in
   * one transaction. False, nothing written, when it is unknown or removed.
   */
  renameLink(input: { readonly linkId: string; readonly name: string }, event: AuditEventDraft): Promise<boolean>;
  /**
   * Inserts a session whose `deviceId` is a link id, with its first pair and `events` (in
   * order: `provider.signin`, `session.created`), in one transaction, only while the link is
   * live (re-checked inside the transaction, the link row locked where writers run
   * concurrently), and only when `counter` advances the link's stored counter (core's
   * `isCounterAdvance`: strictly greater, or both 0; both null for a credential without one),
   * which the same conditional update writes with `lastUsedAt = now`: of N concurrent sign-ins
   * presenting the same counter, exactly one wins. `'unchanged'` is only for a link created by
   * the same ceremony (its counter was just stored): the counter is left as it is.
   *
   * The link's user must not be disabled (read under a share lock, as in `createSession`):
   * otherwise `user_disabled`, nothing written. The user's `lastSignInAt` becomes `now`, and
   * `refresh` (when given) is called with the user as stored (null when the subject has none):
   * the user it returns, with its events appended after `events`, is written in the same
   * transaction (the identity provider's attributes, refreshed at each sign-in); null changes
   * nothing else.
   */
  createLinkSession(
    input: {
      readonly session: SessionRecord;
      readonly pair: TokenPairDigests;
      readonly counter: number | null | 'unchanged';
      readonly now: number;
      readonly refresh?: (current: UserRecord | null) => { readonly user: UserRecord; readonly events: readonly AuditEventDraft[] } | null;
    },
    events: readonly AuditEventDraft[],
  ): Promise<LinkSessionOutcome>;
  /** Stores a flow. Expired flows may be deleted meanwhile (they can never be consumed). */
  createFlow(flow: FlowRecord): Promise<void>;
  /**
   * Uses up a flow: returns it and marks it consumed if it exists, is unconsumed, `expiresAt >
   * now` and `createdAt <= latestTrustedTime(now)`; otherwise null. Exactly one of N concurrent
   * calls gets it.
   */
  consumeFlow(input: { readonly id: string; readonly now: number }): Promise<FlowRecord | null>;

  /**
   * Reserves one attempt against the budget of every one of `keys`, atomically (all or none),
   * with core's `decideAttemptWindow` per key: the budget of failed attempts that every node
   * sharing this store counts against. A store that only one node uses (the embedded one) may
   * reserve nothing and answer `shared: false`: that node's own in-memory budget is then the
   * whole one.
   */
  reserveAttempts(input: {
    readonly keys: readonly string[];
    readonly now: number;
    readonly windowMs: number;
    readonly max: number;
    /** How long a reservation's running attempt is trusted to run; after it, it is dropped (its node may have died). */
    readonly leaseMs: number;
  }): Promise<AttemptReservation>;
  /**
   * Settles what `reserveAttempts` reserved: the attempt stops running and, when `failed`,
   * counts as a failure. Only windows that are still the ones reserved in change (a new window
   * owes an old reservation nothing), and the running count only in the lease period it was
   * reserved in (a new period no longer holds it).
   */
  settleAttempts(input: { readonly windows: readonly AttemptWindow[]; readonly failed: boolean }): Promise<void>;

  /**
   * Retention: deletes sessions that ended (expired, `expiresAt <= endedBefore`, or revoked,
   * `revokedAt <= endedBefore`) with their retired refresh-token digests, and pairing intents
   * that expired by `endedBefore` (completed and burned ones included: every intent ends by its
   * expiry). Pass `now - retention`. The audit trail keeps what they did; a token of a deleted
   * session is refused like any unknown one. Returns how many of each were deleted.
   */
  pruneEndedRecords(input: { readonly endedBefore: number }): Promise<{ readonly sessions: number; readonly pairingIntents: number }>;

  /**
   * The DPoP replay cache: records `key` (core's `dpopReplayKey`, 64 hex digits) until
   * `expiresAt` and answers true, unless a record of `key` with `expiresAt > now` exists
   * (then false, nothing written). Atomic: of N concurrent calls with one key, on one node or
   * many sharing the store, exactly one gets true. Records with `expiresAt <= now` count as
   * absent and are pruned along the way.
   */
  useDpopProof(input: { readonly key: string; readonly expiresAt: number; readonly now: number }): Promise<boolean>;
  /**
   * Whether a record of `key` with `expiresAt > now` exists in the DPoP cache (read only): how a
   * server nonce (`DPoP-Nonce`), recorded with `useDpopProof` by whichever node issued it, is
   * checked on every node.
   */
  hasDpopRecord(input: { readonly key: string; readonly now: number }): Promise<boolean>;

  /** A user by subject, or null. */
  getUser(subject: string): Promise<UserRecord | null>;
  /** Users matching `filter`, ordered by subject (ids sort by creation time), at most `filter.limit`. */
  listUsers(filter: UserFilter): Promise<readonly UserRecord[]>;
  /**
   * Inserts a user with its event. `exists` when the subject has one; `user_name_taken` when
   * another user of the realm has its `userName` (a unique index decides, also between nodes);
   * then nothing is written.
   */
  createUser(user: UserRecord, event: AuditEventDraft): Promise<'created' | 'exists' | 'user_name_taken'>;
  /**
   * The one way a user changes: the store locks and reads the user (and, for a management-realm
   * user, counts the other active management users: {@link UserChangeContext}), calls `decide`
   * inside the transaction, and writes what it returns with its events, atomically:
   * - `update`: the user row takes `user`; with `revokeSessions`, every live session of the
   *   subject is revoked with that reason in the same transaction (a disable ends every session
   *   at once, on every node sharing the store), and every live pairing or link intent created
   *   by or for the subject is burned (`burnedAt = now`);
   * - `remove`: the user row is deleted, its active devices and live links marked removed, its
   *   live sessions revoked (reason `user_removed`) and every live intent created by or for it
   *   burned;
   * - `none`: nothing written.
   * `decide` may throw (a refusal): the transaction is rolled back and the error propagates.
   * `unknown` when the subject has no user; `user_name_taken` (nothing written) when the update's
   * `userName` belongs to another user of the realm.
   */
  changeUser(
    input: { readonly subject: string; readonly now: number },
    decide: (current: UserRecord, context: UserChangeContext) => UserChange,
  ): Promise<UserChangeOutcome | { readonly kind: 'user_name_taken' }>;
  /**
   * The groups of a realm (or of both): every group record, and every name a user carries,
   * with its member count, sorted by realm then name.
   */
  listGroups(filter: { readonly realm?: Realm }): Promise<readonly GroupSummary[]>;
  /** A group record by id, or null. */
  getGroup(id: string): Promise<GroupRecord | null>;
  /**
   * Inserts or replaces (by id) a group record with its event. `name_taken`, nothing written, when
   * another group record of the realm has that name.
   */
  saveGroup(group: GroupRecord, event: AuditEventDraft): Promise<'saved' | 'name_taken'>;
  /**
   * Deletes a group record and takes its name out of every user of the realm, with the event,
   * in one transaction. False, nothing written, when it is unknown.
   */
  deleteGroup(input: { readonly id: string; readonly now: number }, event: AuditEventDraft): Promise<boolean>;

  /** Stores a SCIM token (its digest only) with its event. */
  createScimToken(token: ScimTokenRecord, event: AuditEventDraft): Promise<void>;
  /**
   * The live (not revoked) SCIM token whose digest is `digest`, compared in constant time; null
   * otherwise, with nothing written. Its `lastUsedAt` is set to `now` only when the use is due
   * ({@link scimTokenUseIsDue}: at most once per {@link SCIM_TOKEN_USE_RESOLUTION_MS}); the token
   * is looked up by a read first, so an unknown token, or a known one used within the minute,
   * writes nothing (on SQLite: never enters the single-writer queue).
   */
  useScimToken(input: { readonly digest: string; readonly now: number }): Promise<ScimTokenRecord | null>;
  /** Every SCIM token, revoked ones included, oldest first. */
  listScimTokens(): Promise<readonly ScimTokenRecord[]>;
  /** Revokes a SCIM token with its event. False, nothing written, when unknown or already revoked. */
  revokeScimToken(input: { readonly id: string; readonly now: number }, event: AuditEventDraft): Promise<boolean>;

  /**
   * The whole control state in the store-neutral form (core's `CONTROL_STATE_TABLES`), read in
   * ONE consistent snapshot: every table of the export, in import order, each ordered by its
   * key; pending audit events are chained first. With `sessions: false` the `sessions` tables
   * (token digests, grace data, DPoP records, challenges, flows) are left out. Nothing is
   * written. Meant for an offline move: while the iteration runs, use this handle for nothing
   * else. Resolves once the snapshot is taken (a promise, so every operation stays one that
   * answers a promise): the rows come from the iterable it resolves to.
   */
  exportState(opts: ExportOptions): Promise<AsyncIterable<ControlStateRow>>;
  /**
   * Writes `rows` (an export, in its order) into this store, which must hold no control state:
   * `not_empty`, nothing written, when any table of the state has a row. All rows commit in ONE
   * transaction, verbatim (same ids, digests, audit hashes; the audit head and counts as the
   * rows say): a row that does not fit (unknown table or column, a value of the wrong kind, out
   * of order) or an iterator that throws rolls everything back and the error propagates.
   */
  importState(rows: AsyncIterable<ControlStateRow>): Promise<ImportOutcome>;

  /**
   * The cluster's assertion key set, or null before the first save. One primary-key read: nodes
   * call it every second or so to follow rotations.
   */
  getAssertionKeys(): Promise<AssertionKeysRecord | null>;
  /**
   * Saves the assertion key set as version `expectedVersion + 1`, with its events, in one
   * transaction, only while the stored version is `expectedVersion` (0: none stored yet);
   * otherwise `saved: false` with what is stored, and nothing written. A compare-and-set: of N
   * concurrent saves from one version, on one node or many sharing the store, exactly one wins.
   */
  saveAssertionKeys(
    input: { readonly expectedVersion: number; readonly keySet: string; readonly now: number },
    events: readonly AuditEventDraft[],
  ): Promise<AssertionKeysSave>;
}

/** The operation set of {@link Store}: what a store addon must declare, exactly. */
export const STORE_OPERATIONS = [
  'ping',
  'close',
  'getProject',
  'initProject',
  'issueBootstrapToken',
  'consumeBootstrapToken',
  'enrollDevice',
  'findDeviceByPublicKey',
  'getDevice',
  'listDevices',
  'countDevices',
  'removeDevice',
  'createChallenge',
  'consumeChallenge',
  'readChallenge',
  'createSession',
  'findSessionByAccessDigest',
  'getSession',
  'listActiveSessions',
  'rotateRefreshToken',
  'revokeSession',
  'revokeSessionFamily',
  'createHandoffCode',
  'consumeHandoffCode',
  'pruneRetiredRefreshTokens',
  'appendAuditEvent',
  'listAuditEvents',
  'auditHead',
  'createPairingIntent',
  'getPairingIntent',
  'recordPairingFailure',
  'completePairing',
  'stats',
  'reserveAttempts',
  'settleAttempts',
  'pruneEndedRecords',
  'createLink',
  'getLink',
  'findLiveLink',
  'listLinks',
  'removeLink',
  'renameLink',
  'createLinkSession',
  'createFlow',
  'consumeFlow',
  'useDpopProof',
  'hasDpopRecord',
  'getUser',
  'listUsers',
  'createUser',
  'changeUser',
  'listGroups',
  'getGroup',
  'saveGroup',
  'deleteGroup',
  'createScimToken',
  'useScimToken',
  'listScimTokens',
  'revokeScimToken',
  'exportState',
  'importState',
  'getAssertionKeys',
  'saveAssertionKeys',
] as const satisfies readonly (keyof Store)[];

/** A name in the operation set. */
export type StoreOperation = (typeof STORE_OPERATIONS)[number];

// Compile-time proof that the operation set names every member of Store.
type UnlistedOperation = Exclude<keyof Store, StoreOperation>;
const operationSetIsComplete: [UnlistedOperation] extends [never] ? true : never = true;
void operationSetIsComplete;

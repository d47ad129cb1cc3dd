import { type AuditEvent, type AuditEventDraft, digestsEqual, GENESIS_HASH, type Realm, sealAuditEvent } from '@svc/core';
import {
  type AssertionKeysRecord,
  type AssertionKeysSave,
  type AttemptReservation,
  type AttemptWindow,
  type AuditedRotation,
  amrText,
  auditPage,
  type BootstrapOutcome,
  type BootstrapTokenState,
  type ChallengeRecord,
  type ConsumedChallenge,
  type ControlStateRow,
  type ControlTable,
  checkControlRow,
  clampPairToSession,
  consumedChallenge,
  controlTable,
  type DeviceRecord,
  decideAttemptWindow,
  decideBootstrapConsumption,
  decideDeviceRemoval,
  decideHandoff,
  decideIntentUsers,
  decidePairingCompletion,
  decidePairingFailure,
  defaultUser,
  type ExportOptions,
  type FlowRecord,
  type GroupRecord,
  type GroupSummary,
  gracePairEnded,
  type HandoffCodeRecord,
  type HandoffOutcome,
  type ImportOutcome,
  inImportOrder,
  isChallengeConsumable,
  isCounterAdvance,
  isFlowConsumable,
  isIntentLive,
  isSessionActive,
  isSessionLive,
  type LinkRecord,
  type LinkSessionOutcome,
  type PairingCompletion,
  type PairingIntentRecord,
  PROOF_REPLAYED,
  PROOF_REQUIRED,
  planRotation,
  REVOKED_DEVICE_REMOVED,
  REVOKED_LINK_REMOVED,
  REVOKED_REFRESH_REUSED,
  REVOKED_USER_REMOVED,
  type RefreshRow,
  type RotationOutcome,
  rotationProof,
  type ScimTokenRecord,
  type SessionCreation,
  type SessionRecord,
  STORE_OPERATIONS,
  type Store,
  type StoreStats,
  scimTokenUseIsDue,
  type TokenPairDigests,
  toSession,
  toStoreStats,
  type UserChange,
  type UserChangeOutcome,
  type UserFilter,
  type UserRecord,
  userMatches,
} from '@svc/core/store';

import {
  commitMemoryState,
  emptyMemoryControlData,
  exportMemoryState,
  firstNonEmptyMemoryTable,
  importMemoryRow,
} from './memory-control-state.js';

// The reference store: the whole contract over plain maps, every decision taken by core's
// rules exactly as the SQL stores take them. Each operation reads, decides and writes without
// an `await` in between, so on one thread it is one atomic step: of N concurrent attempts at a
// single-use thing exactly one wins, as the contract asks. Every audit callback runs before
// anything is written, so a callback that throws leaves nothing half done (a rollback).

interface BootstrapEntry extends BootstrapTokenState {
  readonly id: string;
  readonly createdAt: number;
  readonly deviceId: string | null;
}

interface SessionEntry {
  readonly row: RefreshRow;
  readonly accessDigest: string;
}

/** Everything a memory store holds; peers share one. */
interface MemoryData {
  project: { readonly projectId: string; readonly createdAt: number } | null;
  readonly bootstrap: Map<string, BootstrapEntry>;
  readonly devices: Map<string, DeviceRecord>;
  readonly challenges: Map<string, { readonly record: ChallengeRecord; readonly usedAt: number | null }>;
  readonly sessions: Map<string, SessionEntry>;
  /** Retired refresh-token digests by session id, each with when it was retired. */
  readonly retired: Map<string, Map<string, number>>;
  readonly events: AuditEvent[];
  readonly counts: Map<string, number>;
  readonly intents: Map<string, PairingIntentRecord>;
  readonly budgets: Map<string, AttemptWindow>;
  readonly links: Map<string, LinkRecord>;
  readonly flows: Map<string, { readonly record: FlowRecord; readonly consumedAt: number | null }>;
  /** Handoff codes by digest, with when each was used. */
  readonly handoffCodes: Map<string, { readonly record: HandoffCodeRecord; readonly usedAt: number | null }>;
  /** The DPoP replay cache: proof key → when its record expires. */
  readonly dpopProofs: Map<string, number>;
  /** Users by subject. */
  readonly users: Map<string, UserRecord>;
  readonly groups: Map<string, GroupRecord>;
  readonly scimTokens: Map<string, ScimTokenRecord>;
  /** The cluster's assertion key set, as saved. */
  assertionKeys: AssertionKeysRecord | null;
}

const INVALID: RotationOutcome = Object.freeze({ kind: 'invalid' });

/** The in-memory reference store: see {@link createMemoryStore}. */
export class MemoryStore implements Store {
  readonly #d: MemoryData;
  /** Set by `close()`: every operation of this handle then rejects, as a closed connection would. */
  closed = false;

  constructor(data?: MemoryData) {
    this.#d = data ?? {
      project: null,
      bootstrap: new Map(),
      devices: new Map(),
      challenges: new Map(),
      sessions: new Map(),
      retired: new Map(),
      events: [],
      counts: new Map(),
      intents: new Map(),
      budgets: new Map(),
      links: new Map(),
      flows: new Map(),
      handoffCodes: new Map(),
      dpopProofs: new Map(),
      users: new Map(),
      groups: new Map(),
      scimTokens: new Map(),
      assertionKeys: null,
    };
  }

  /**
   * Another handle on the same data: what a second node sharing the store sees.
   *
   * @example
   * const peer = store.openPeer();
   */
  openPeer(): MemoryStore {
    return new MemoryStore(this.#d);
  }

  /**
   * What a dump of this store would hold for the refresh grace answer: session id → sealed
   * pair, for the sessions that keep one (the conformance suite's `storedGracePairs`).
   *
   * @example
   * store.storedGracePairs().has(sessionId);
   */
  storedGracePairs(): ReadonlyMap<string, string> {
    const pairs = new Map<string, string>();
    for (const [id, s] of this.#d.sessions) if (s.row.prev_successor !== null) pairs.set(id, s.row.prev_successor);
    return pairs;
  }

  #append(draft: AuditEventDraft): AuditEvent {
    const last = this.#d.events.at(-1);
    const sealed = sealAuditEvent(draft, last?.seq ?? 0, last?.hash ?? GENESIS_HASH);
    // Kept as the SQL stores give it back: data as parsed from the JSON text written.
    const event: AuditEvent = Object.freeze({ ...sealed, data: Object.freeze(JSON.parse(JSON.stringify(sealed.data))) });
    this.#d.events.push(event);
    this.#d.counts.set(event.type, (this.#d.counts.get(event.type) ?? 0) + 1);
    return event;
  }

  #activeDeviceWithKey(publicKey: string): DeviceRecord | undefined {
    for (const d of this.#d.devices.values()) if (d.publicKey === publicKey && d.removedAt === null) return d;
    return undefined;
  }

  #activeInRealm(realm: Realm): number {
    let n = 0;
    for (const d of this.#d.devices.values()) if (d.realm === realm && d.removedAt === null) n++;
    return n;
  }

  #insertDevice(device: DeviceRecord): DeviceRecord {
    const stored = Object.freeze({ ...device, removedAt: null });
    this.#d.devices.set(stored.id, stored);
    this.#ensureUser(stored.subject, stored.realm, stored.createdAt);
    return stored;
  }

  /** The subject's user, created (active, no attributes) when it has none. */
  #ensureUser(subject: string, realm: Realm, now: number): UserRecord {
    const known = this.#d.users.get(subject);
    if (known !== undefined) return known;
    const user = defaultUser({ subject, realm, now });
    this.#d.users.set(subject, user);
    return user;
  }

  /** {@link decideIntentUsers} on the users of an intent's subject and creator. */
  #intentUsers(subject: string, createdBy: string): 'complete' | 'invalid' | 'user_disabled' {
    return decideIntentUsers(this.#d.users.get(subject)?.status ?? null, this.#d.users.get(createdBy)?.status ?? null);
  }

  /** Burns every live intent created by or for `subject`; how many. */
  #burnSubjectIntents(subject: string, now: number): number {
    let n = 0;
    for (const [id, i] of this.#d.intents) {
      if ((i.subject !== subject && i.createdBy !== subject) || !isIntentLive(i, now)) continue;
      this.#d.intents.set(id, Object.freeze({ ...i, burnedAt: now }));
      n++;
    }
    return n;
  }

  #userDisabled(subject: string): boolean {
    return this.#d.users.get(subject)?.status === 'disabled';
  }

  #signedIn(subject: string, now: number): void {
    const user = this.#d.users.get(subject);
    if (user !== undefined) this.#d.users.set(subject, Object.freeze({ ...user, lastSignInAt: now }));
  }

  #userNameTaken(user: UserRecord): boolean {
    if (user.userName === null) return false;
    for (const u of this.#d.users.values()) {
      if (u.subject !== user.subject && u.realm === user.realm && u.userName === user.userName) return true;
    }
    return false;
  }

  /** Active management users holding a live credential, other than `subject`. */
  #otherActiveManagementUsers(subject: string): number {
    let n = 0;
    for (const u of this.#d.users.values()) {
      if (u.realm !== 'management' || u.status !== 'active' || u.subject === subject) continue;
      const device = [...this.#d.devices.values()].some((d) => d.subject === u.subject && d.removedAt === null);
      const link = [...this.#d.links.values()].some((l) => l.subject === u.subject && l.removedAt === null);
      if (device || link) n++;
    }
    return n;
  }

  #revokeSubjectSessions(subject: string, now: number, reason: string): number {
    let n = 0;
    for (const [id, s] of this.#d.sessions) {
      if (s.row.subject !== subject || !isSessionLive(toSession(s.row), now)) continue;
      this.#d.sessions.set(id, { ...s, row: { ...s.row, revoked_at: now, revoked_reason: reason, prev_successor: null } });
      n++;
    }
    return n;
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.closed = true;
  }

  async getProject(): Promise<{ readonly projectId: string; readonly createdAt: number } | null> {
    return this.#d.project;
  }

  async initProject(input: { readonly projectId: string; readonly createdAt: number }): Promise<{ readonly projectId: string }> {
    this.#d.project ??= Object.freeze({ projectId: input.projectId, createdAt: input.createdAt });
    return { projectId: this.#d.project.projectId };
  }

  async issueBootstrapToken(
    input: { readonly id: string; readonly digest: string; readonly createdAt: number; readonly expiresAt: number },
    event: AuditEventDraft,
  ): Promise<void> {
    for (const [digest, t] of this.#d.bootstrap) {
      if (t.usedAt === null && t.supersededAt === null) this.#d.bootstrap.set(digest, { ...t, supersededAt: input.createdAt });
    }
    this.#d.bootstrap.set(input.digest, {
      id: input.id,
      createdAt: input.createdAt,
      expiresAt: input.expiresAt,
      usedAt: null,
      supersededAt: null,
      deviceId: null,
    });
    this.#append(event);
  }

  async consumeBootstrapToken(
    input: { readonly digest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<BootstrapOutcome> {
    const token = this.#d.bootstrap.get(input.digest);
    const decision = decideBootstrapConsumption(token, {
      now: input.now,
      keyTaken: this.#activeDeviceWithKey(input.device.publicKey) !== undefined,
    });
    if (decision.kind !== 'consume') return decision;
    const device = this.#insertDevice(input.device);
    // `consume` is only ever decided for a token that exists.
    this.#d.bootstrap.set(input.digest, { ...(token as BootstrapEntry), usedAt: input.now, deviceId: device.id });
    this.#append(event);
    return { kind: 'enrolled', device };
  }

  async enrollDevice(device: DeviceRecord, event: AuditEventDraft): Promise<'enrolled' | 'already_enrolled'> {
    if (this.#activeDeviceWithKey(device.publicKey) !== undefined) return 'already_enrolled';
    this.#insertDevice(device);
    this.#append(event);
    return 'enrolled';
  }

  async findDeviceByPublicKey(publicKey: string): Promise<DeviceRecord | null> {
    return this.#activeDeviceWithKey(publicKey) ?? null;
  }

  async getDevice(id: string): Promise<DeviceRecord | null> {
    return this.#d.devices.get(id) ?? null;
  }

  async listDevices(filter: { readonly realm?: Realm; readonly subject?: string }): Promise<readonly DeviceRecord[]> {
    return [...this.#d.devices.values()]
      .filter(
        (d) =>
          d.removedAt === null &&
          (filter.realm === undefined || d.realm === filter.realm) &&
          (filter.subject === undefined || d.subject === filter.subject),
      )
      .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async countDevices(realm: Realm): Promise<number> {
    return this.#activeInRealm(realm);
  }

  async removeDevice(
    input: { readonly deviceId: string; readonly now: number; readonly keepLast?: boolean },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly last?: true }> {
    const device = this.#d.devices.get(input.deviceId);
    const active = device !== undefined && device.removedAt === null;
    const decision = decideDeviceRemoval({
      active,
      activeInRealm: active ? this.#activeInRealm(device.realm) : 0,
      keepLast: input.keepLast === true,
    });
    if (decision === 'last') return { removed: false, revokedSessions: 0, last: true };
    if (decision === 'not_found' || device === undefined) return { removed: false, revokedSessions: 0 };
    this.#d.devices.set(device.id, Object.freeze({ ...device, removedAt: input.now }));
    let revokedSessions = 0;
    for (const [id, s] of this.#d.sessions) {
      if (s.row.device_id !== device.id || !isSessionLive(toSession(s.row), input.now)) continue;
      this.#d.sessions.set(id, {
        ...s,
        row: { ...s.row, revoked_at: input.now, revoked_reason: REVOKED_DEVICE_REMOVED, prev_successor: null },
      });
      revokedSessions++;
    }
    this.#append(event);
    return { removed: true, revokedSessions };
  }

  async createChallenge(challenge: ChallengeRecord): Promise<void> {
    // Used-up and expired challenges can never be consumed again, so they are only clutter.
    for (const [id, c] of this.#d.challenges) if (c.record.expiresAt <= challenge.createdAt) this.#d.challenges.delete(id);
    this.#d.challenges.set(challenge.id, { record: Object.freeze({ ...challenge }), usedAt: null });
  }

  async consumeChallenge(input: { readonly id: string; readonly now: number }): Promise<ConsumedChallenge | null> {
    return this.#challenge(input, true);
  }

  async readChallenge(input: { readonly id: string; readonly now: number }): Promise<ConsumedChallenge | null> {
    return this.#challenge(input, false);
  }

  /** The challenge `consumeChallenge` uses up at `now` (`use`: and uses it up), with its key's active device. */
  #challenge(input: { readonly id: string; readonly now: number }, use: boolean): ConsumedChallenge | null {
    const c = this.#d.challenges.get(input.id);
    if (c === undefined || !isChallengeConsumable({ ...c.record, usedAt: c.usedAt }, input.now)) return null;
    if (use) this.#d.challenges.set(input.id, { record: c.record, usedAt: input.now });
    return consumedChallenge(c.record, this.#activeDeviceWithKey(c.record.publicKey) ?? null);
  }

  async createSession(
    session: SessionRecord,
    pair: TokenPairDigests,
    event: AuditEventDraft,
    challenge?: { readonly id: string; readonly now: number },
  ): Promise<SessionCreation> {
    if (challenge !== undefined && this.#challenge(challenge, true) === null) return 'challenge_used';
    const device = this.#d.devices.get(session.deviceId);
    if (device === undefined || device.removedAt !== null) return 'device_inactive';
    if (this.#userDisabled(session.subject)) return 'user_disabled';
    this.#insertSession(session, pair);
    this.#signedIn(session.subject, session.createdAt);
    this.#append(event);
    return 'created';
  }

  #insertSession(session: SessionRecord, pair: TokenPairDigests): void {
    const expiries = clampPairToSession(pair, session.expiresAt);
    this.#d.sessions.set(session.id, {
      accessDigest: pair.accessDigest,
      row: {
        id: session.id,
        realm: session.realm,
        subject: session.subject,
        device_id: session.deviceId,
        created_at: session.createdAt,
        expires_at: session.expiresAt,
        access_expires_at: expiries.accessExpiresAt,
        refresh_expires_at: expiries.refreshExpiresAt,
        generation: session.generation,
        last_rotated_at: session.lastRotatedAt,
        revoked_at: session.revokedAt,
        revoked_reason: session.revokedReason,
        client_address: session.clientAddress,
        user_agent: session.userAgent,
        amr: amrText(session.amr),
        jkt: session.jkt ?? null,
        parent_id: session.parentId ?? null,
        refresh_digest: pair.refreshDigest,
        prev_refresh_digest: null,
        prev_rotated_at: null,
        prev_successor: null,
      },
    });
  }

  async findSessionByAccessDigest(sessionId: string, digest: string): Promise<SessionRecord | null> {
    const s = this.#d.sessions.get(sessionId);
    if (s === undefined || !digestsEqual(s.accessDigest, digest)) return null;
    const user = this.#d.users.get(s.row.subject);
    const session = toSession(s.row);
    return Object.freeze({
      ...session,
      user:
        user === undefined
          ? null
          : Object.freeze({ name: user.name, email: user.email, emailVerified: user.emailVerified, groups: user.groups }),
    });
  }

  async getSession(id: string): Promise<SessionRecord | null> {
    const s = this.#d.sessions.get(id);
    return s === undefined ? null : toSession(s.row);
  }

  async listActiveSessions(filter: {
    readonly now: number;
    readonly realm?: Realm;
    readonly deviceId?: string;
    readonly subject?: string;
  }): Promise<readonly SessionRecord[]> {
    return [...this.#d.sessions.values()]
      .map((s) => toSession(s.row))
      .filter(
        (s) =>
          isSessionActive(s, filter.now) &&
          (filter.realm === undefined || s.realm === filter.realm) &&
          (filter.deviceId === undefined || s.deviceId === filter.deviceId) &&
          (filter.subject === undefined || s.subject === filter.subject),
      )
      .sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  }

  async rotateRefreshToken(
    input: Parameters<Store['rotateRefreshToken']>[0],
    audit: (outcome: AuditedRotation) => AuditEventDraft,
  ): Promise<RotationOutcome> {
    const { now, next } = input;
    const entry = this.#d.sessions.get(input.sessionId);
    const s = entry?.row;
    // The rules and the outcome are core's; this only writes what they say. The proof first: a
    // bound session is rotated only with one by its key, recorded whatever the plan.
    const proof = rotationProof(s, input);
    if (proof === 'required') return PROOF_REQUIRED;
    if (proof !== null && !this.#useProof({ key: proof.key, expiresAt: proof.expiresAt, now })) return PROOF_REPLAYED;
    let plan = planRotation(s, input);
    if (s !== undefined && plan.kind === 'check_retired') {
      plan = planRotation(s, input, this.#d.retired.get(s.id)?.has(input.presentedDigest) === true);
    }
    if (entry === undefined || s === undefined || plan.kind === 'invalid' || plan.kind === 'check_retired') return INVALID;
    // The event is built before anything is written, as a SQL store's failed append would roll the writes back.
    const draft = audit(plan.outcome);
    if (plan.kind === 'rotate') {
      if (plan.retire !== null) {
        const retired = this.#d.retired.get(s.id) ?? new Map<string, number>();
        retired.set(plan.retire, now);
        this.#d.retired.set(s.id, retired);
      }
      const row: RefreshRow = {
        ...s,
        access_expires_at: plan.accessExpiresAt,
        refresh_expires_at: plan.refreshExpiresAt,
        refresh_digest: next.refreshDigest,
        prev_refresh_digest: s.refresh_digest,
        prev_rotated_at: now,
        prev_successor: input.sealedSuccessor,
        generation: s.generation + 1,
        last_rotated_at: now,
      };
      this.#d.sessions.set(s.id, { row, accessDigest: next.accessDigest });
    } else if (plan.kind === 'reuse') {
      const row: RefreshRow = { ...s, revoked_at: now, revoked_reason: REVOKED_REFRESH_REUSED, prev_successor: null };
      this.#d.sessions.set(s.id, { ...entry, row });
    }
    this.#append(draft);
    return plan.outcome;
  }

  async revokeSession(
    input: { readonly sessionId: string; readonly now: number; readonly reason: string },
    event: AuditEventDraft,
  ): Promise<boolean> {
    const s = this.#d.sessions.get(input.sessionId);
    if (s === undefined || s.row.revoked_at !== null) return false;
    this.#d.sessions.set(input.sessionId, {
      ...s,
      row: { ...s.row, revoked_at: input.now, revoked_reason: input.reason, prev_successor: null },
    });
    this.#append(event);
    return true;
  }

  async revokeSessionFamily(
    input: { readonly sessionId: string; readonly now: number; readonly reason: string },
    event: (session: SessionRecord) => AuditEventDraft,
  ): Promise<readonly string[]> {
    const family = [...this.#d.sessions.values()].filter(
      (s) => s.row.revoked_at === null && (s.row.id === input.sessionId || s.row.parent_id === input.sessionId),
    );
    // The named session first, then the ones handed off from it, oldest first.
    family.sort((a, b) => (a.row.id === input.sessionId ? -1 : b.row.id === input.sessionId ? 1 : a.row.created_at - b.row.created_at));
    const events = family.map((s) => event(toSession(s.row)));
    for (const s of family) {
      this.#d.sessions.set(s.row.id, {
        ...s,
        row: { ...s.row, revoked_at: input.now, revoked_reason: input.reason, prev_successor: null },
      });
    }
    for (const e of events) this.#append(e);
    return family.map((s) => s.row.id);
  }

  async createHandoffCode(code: HandoffCodeRecord): Promise<void> {
    for (const [digest, c] of this.#d.handoffCodes) if (c.record.expiresAt <= code.createdAt) this.#d.handoffCodes.delete(digest);
    this.#d.handoffCodes.set(code.digest, { record: Object.freeze({ ...code }), usedAt: null });
  }

  async consumeHandoffCode(
    input: Parameters<Store['consumeHandoffCode']>[0],
    audit: (outcome: HandoffOutcome) => readonly AuditEventDraft[],
  ): Promise<HandoffOutcome> {
    const entry = this.#d.handoffCodes.get(input.digest);
    const code = entry === undefined || entry.usedAt !== null ? null : entry.record;
    const parentEntry = code === null ? undefined : this.#d.sessions.get(code.sessionId);
    let outcome = decideHandoff({
      code,
      parent: parentEntry === undefined ? null : toSession(parentEntry.row),
      origin: input.origin,
      bindingDigest: input.bindingDigest,
      now: input.now,
      child: input.child,
    });
    if (outcome.kind === 'created' && this.#userDisabled(outcome.session.subject)) {
      outcome = { kind: 'refused', reason: 'user_disabled', code };
    }
    const events = audit(outcome);
    // Used up whatever the judgement: a code is never presented twice.
    if (entry !== undefined && code !== null) this.#d.handoffCodes.set(input.digest, { record: entry.record, usedAt: input.now });
    if (outcome.kind === 'created') this.#insertSession(outcome.session, input.pair);
    for (const e of events) this.#append(e);
    return outcome;
  }

  async pruneRetiredRefreshTokens(input: Parameters<Store['pruneRetiredRefreshTokens']>[0]): Promise<number> {
    for (const [id, s] of this.#d.sessions) {
      if (gracePairEnded(s.row, input.graceEndedBefore)) this.#d.sessions.set(id, { ...s, row: { ...s.row, prev_successor: null } });
    }
    let deleted = 0;
    for (const [sessionId, digests] of this.#d.retired) {
      const s = this.#d.sessions.get(sessionId);
      const ended = s === undefined || !isSessionLive(toSession(s.row), input.now);
      for (const [digest, retiredAt] of digests) {
        if (!ended && retiredAt >= input.retiredBefore) continue;
        digests.delete(digest);
        deleted++;
      }
      if (digests.size === 0) this.#d.retired.delete(sessionId);
    }
    return deleted;
  }

  async appendAuditEvent(event: AuditEventDraft): Promise<AuditEvent> {
    return this.#append(event);
  }

  async listAuditEvents(input: { readonly afterSeq: number; readonly limit: number }): Promise<readonly AuditEvent[]> {
    // seq n is at index n - 1: the chain has no gaps.
    const page = auditPage(input);
    return this.#d.events.slice(page.afterSeq, page.afterSeq + page.limit);
  }

  async auditHead(): Promise<{ readonly seq: number; readonly hash: string } | null> {
    const last = this.#d.events.at(-1);
    return last === undefined ? null : { seq: last.seq, hash: last.hash };
  }

  async createPairingIntent(intent: PairingIntentRecord, event: AuditEventDraft): Promise<void> {
    if (this.#d.intents.has(intent.id)) throw new Error(`pairing intent ${intent.id} already exists`);
    this.#d.intents.set(intent.id, Object.freeze({ ...intent }));
    this.#ensureUser(intent.subject, intent.realm, intent.createdAt);
    this.#append(event);
  }

  async getPairingIntent(id: string): Promise<PairingIntentRecord | null> {
    return this.#d.intents.get(id) ?? null;
  }

  async recordPairingFailure(
    input: { readonly id: string; readonly now: number; readonly maxFailures: number },
    event: (failures: number, burned: boolean) => AuditEventDraft,
  ): Promise<{ readonly failures: number; readonly burned: boolean } | null> {
    const intent = this.#d.intents.get(input.id);
    const result = decidePairingFailure(intent, input);
    if (result === null || intent === undefined) return null;
    const draft = event(result.failures, result.burned);
    this.#d.intents.set(intent.id, Object.freeze({ ...intent, failures: result.failures, burnedAt: result.burned ? input.now : null }));
    this.#append(draft);
    return result;
  }

  async completePairing(
    input: { readonly id: string; readonly codeDigest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<PairingCompletion> {
    const intent = this.#d.intents.get(input.id);
    const decision = decidePairingCompletion(intent, {
      codeDigest: input.codeDigest,
      now: input.now,
      keyTaken: this.#activeDeviceWithKey(input.device.publicKey) !== undefined,
    });
    if (decision.kind !== 'complete') return decision;
    // `complete` is only ever decided for an intent that exists.
    const completed = intent as PairingIntentRecord;
    const users = this.#intentUsers(input.device.subject, completed.createdBy);
    if (users !== 'complete') return { kind: users };
    const device = this.#insertDevice(input.device);
    this.#d.intents.set(completed.id, Object.freeze({ ...completed, completedAt: input.now, deviceId: device.id }));
    this.#append(event);
    return { kind: 'completed', device };
  }

  async stats(now: number): Promise<StoreStats> {
    const devices = [...this.#d.devices.values()].filter((d) => d.removedAt === null).map((d) => ({ realm: d.realm, n: 1 }));
    const activeSessions = [...this.#d.sessions.values()]
      .filter((s) => isSessionActive(toSession(s.row), now))
      .map((s) => ({ realm: s.row.realm, n: 1 }));
    const events = [...this.#d.counts].map(([type, n]) => ({ type, n }));
    return toStoreStats({ devices, activeSessions, events, head: this.#d.events.at(-1) });
  }

  #liveLink(realm: Realm, issuer: string, externalSubject: string): LinkRecord | undefined {
    for (const l of this.#d.links.values()) {
      if (l.removedAt === null && l.realm === realm && l.issuer === issuer && l.externalSubject === externalSubject) return l;
    }
    return undefined;
  }

  async createLink(
    link: LinkRecord,
    event: AuditEventDraft | readonly AuditEventDraft[],
    pairing?: Parameters<Store['createLink']>[2],
    user?: UserRecord,
  ): Promise<'created' | 'already_linked' | 'intent_invalid' | 'user_disabled'> {
    const intent = pairing === undefined ? undefined : this.#d.intents.get(pairing.id);
    if (pairing !== undefined) {
      const decision = decidePairingCompletion(intent, { codeDigest: pairing.codeDigest, now: pairing.now, keyTaken: false });
      if (decision.kind !== 'complete') return 'intent_invalid';
      const users = this.#intentUsers(link.subject, (intent as PairingIntentRecord).createdBy);
      if (users === 'invalid') return 'intent_invalid';
      if (users === 'user_disabled') return 'user_disabled';
    }
    if (this.#liveLink(link.realm, link.issuer, link.externalSubject) !== undefined) return 'already_linked';
    if (this.#d.links.has(link.id)) throw new Error(`link ${link.id} already exists`);
    if (this.#userDisabled(link.subject)) return 'user_disabled';
    if (user !== undefined && (user.subject !== link.subject || user.realm !== link.realm)) {
      throw new Error(`the user of link ${link.id} must have its subject and realm`);
    }
    if (user !== undefined && !this.#d.users.has(user.subject)) this.#d.users.set(user.subject, Object.freeze({ ...user }));
    else this.#ensureUser(link.subject, link.realm, link.createdAt);
    this.#d.links.set(link.id, Object.freeze({ ...link, removedAt: null }));
    if (pairing !== undefined && intent !== undefined) {
      // `deviceId` stays null: it names devices only; the `link.created` event names the intent.
      this.#d.intents.set(intent.id, Object.freeze({ ...intent, completedAt: pairing.now }));
    }
    for (const e of [event].flat()) this.#append(e);
    return 'created';
  }

  async getLink(id: string): Promise<LinkRecord | null> {
    return this.#d.links.get(id) ?? null;
  }

  async findLiveLink(input: {
    readonly realm: Realm;
    readonly issuer: string;
    readonly externalSubject: string;
  }): Promise<LinkRecord | null> {
    return this.#liveLink(input.realm, input.issuer, input.externalSubject) ?? null;
  }

  async listLinks(filter: {
    readonly realm?: Realm;
    readonly subject?: string;
    readonly provider?: string;
  }): Promise<readonly LinkRecord[]> {
    return [...this.#d.links.values()]
      .filter(
        (l) =>
          l.removedAt === null &&
          (filter.realm === undefined || l.realm === filter.realm) &&
          (filter.subject === undefined || l.subject === filter.subject) &&
          (filter.provider === undefined || l.provider === filter.provider),
      )
      .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async removeLink(
    input: { readonly linkId: string; readonly now: number; readonly keepAnotherWayIn?: boolean },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly lastWayIn?: boolean }> {
    const link = this.#d.links.get(input.linkId);
    if (link === undefined || link.removedAt !== null) return { removed: false, revokedSessions: 0 };
    if (input.keepAnotherWayIn === true) {
      const mine = (r: { realm: string; subject: string; removedAt: number | null }) =>
        r.realm === link.realm && r.subject === link.subject && r.removedAt === null;
      // No await between this count and the write: the check and the removal are one step.
      const others =
        [...this.#d.links.values()].filter((l) => l.id !== link.id && mine(l)).length + [...this.#d.devices.values()].filter(mine).length;
      if (others === 0) return { removed: false, revokedSessions: 0, lastWayIn: true };
    }
    this.#d.links.set(link.id, Object.freeze({ ...link, removedAt: input.now }));
    let revokedSessions = 0;
    for (const [id, s] of this.#d.sessions) {
      if (s.row.device_id !== link.id || !isSessionLive(toSession(s.row), input.now)) continue;
      this.#d.sessions.set(id, {
        ...s,
        row: { ...s.row, revoked_at: input.now, revoked_reason: REVOKED_LINK_REMOVED, prev_successor: null },
      });
      revokedSessions++;
    }
    this.#append(event);
    return { removed: true, revokedSessions };
  }

  async renameLink(input: { readonly linkId: string; readonly name: string }, event: AuditEventDraft): Promise<boolean> {
    const link = this.#d.links.get(input.linkId);
    if (link === undefined || link.removedAt !== null) return false;
    this.#d.links.set(link.id, Object.freeze({ ...link, name: input.name }));
    this.#append(event);
    return true;
  }

  async createLinkSession(
    input: Parameters<Store['createLinkSession']>[0],
    events: readonly AuditEventDraft[],
  ): Promise<LinkSessionOutcome> {
    const link = this.#d.links.get(input.session.deviceId);
    if (link === undefined || link.removedAt !== null) return { kind: 'link_removed' };
    const counter = input.counter === 'unchanged' ? link.counter : input.counter;
    if (input.counter !== 'unchanged' && !isCounterAdvance(link.counter, input.counter)) {
      return { kind: 'counter_regressed', stored: link.counter };
    }
    const current = this.#d.users.get(link.subject) ?? null;
    if (current?.status === 'disabled') return { kind: 'user_disabled' };
    // Decided before anything is written: a refresh that throws leaves nothing half done.
    const refreshed = input.refresh === undefined ? null : input.refresh(current);
    if (refreshed !== null && (refreshed.user.subject !== link.subject || refreshed.user.realm !== link.realm)) {
      throw new Error('a refreshed user must keep its subject and realm');
    }
    this.#d.links.set(link.id, Object.freeze({ ...link, counter, lastUsedAt: input.now }));
    this.#insertSession(input.session, input.pair);
    if (refreshed !== null) this.#d.users.set(link.subject, Object.freeze({ ...refreshed.user }));
    this.#signedIn(link.subject, input.now);
    for (const event of events) this.#append(event);
    for (const event of refreshed?.events ?? []) this.#append(event);
    return { kind: 'created' };
  }

  async getUser(subject: string): Promise<UserRecord | null> {
    return this.#d.users.get(subject) ?? null;
  }

  async listUsers(filter: UserFilter): Promise<readonly UserRecord[]> {
    return [...this.#d.users.values()]
      .filter((u) => userMatches(u, filter))
      .sort((a, b) => (a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0))
      .slice(0, filter.limit);
  }

  async createUser(user: UserRecord, event: AuditEventDraft): Promise<'created' | 'exists' | 'user_name_taken'> {
    if (this.#d.users.has(user.subject)) return 'exists';
    if (this.#userNameTaken(user)) return 'user_name_taken';
    this.#d.users.set(user.subject, Object.freeze({ ...user }));
    this.#append(event);
    return 'created';
  }

  async changeUser(
    input: { readonly subject: string; readonly now: number },
    decide: (current: UserRecord, context: { readonly otherActiveManagementUsers: number }) => UserChange,
  ): Promise<UserChangeOutcome | { readonly kind: 'user_name_taken' }> {
    const current = this.#d.users.get(input.subject);
    if (current === undefined) return { kind: 'unknown' };
    const change = decide(current, {
      otherActiveManagementUsers: current.realm === 'management' ? this.#otherActiveManagementUsers(current.subject) : 0,
    });
    if (change.kind === 'none') return { kind: 'none', user: current };
    if (change.kind === 'update') {
      if (change.user.subject !== current.subject || change.user.realm !== current.realm) {
        throw new Error('a changed user must keep its subject and realm');
      }
      if (this.#userNameTaken(change.user)) return { kind: 'user_name_taken' };
      this.#d.users.set(current.subject, Object.freeze({ ...change.user }));
      const revokedSessions =
        change.revokeSessions === null ? 0 : this.#revokeSubjectSessions(current.subject, input.now, change.revokeSessions);
      const burnedIntents = change.revokeSessions === null ? 0 : this.#burnSubjectIntents(current.subject, input.now);
      for (const event of change.events) this.#append(event);
      return { kind: 'updated', user: this.#d.users.get(current.subject) as UserRecord, revokedSessions, burnedIntents };
    }
    let removedDevices = 0;
    for (const [id, d] of this.#d.devices) {
      if (d.subject !== current.subject || d.removedAt !== null) continue;
      this.#d.devices.set(id, Object.freeze({ ...d, removedAt: input.now }));
      removedDevices++;
    }
    let removedLinks = 0;
    for (const [id, l] of this.#d.links) {
      if (l.subject !== current.subject || l.removedAt !== null) continue;
      this.#d.links.set(id, Object.freeze({ ...l, removedAt: input.now }));
      removedLinks++;
    }
    const revokedSessions = this.#revokeSubjectSessions(current.subject, input.now, REVOKED_USER_REMOVED);
    const burnedIntents = this.#burnSubjectIntents(current.subject, input.now);
    this.#d.users.delete(current.subject);
    for (const event of change.events) this.#append(event);
    return { kind: 'removed', revokedSessions, removedDevices, removedLinks, burnedIntents };
  }

  async listGroups(filter: { readonly realm?: Realm }): Promise<readonly GroupSummary[]> {
    const groups = new Map<string, { realm: Realm; name: string; id: string | null; members: number }>();
    const key = (realm: Realm, name: string): string => `${realm}\u0000${name}`;
    for (const g of this.#d.groups.values()) {
      if (filter.realm === undefined || g.realm === filter.realm)
        groups.set(key(g.realm, g.name), { realm: g.realm, name: g.name, id: g.id, members: 0 });
    }
    for (const u of this.#d.users.values()) {
      if (filter.realm !== undefined && u.realm !== filter.realm) continue;
      for (const name of u.groups) {
        const k = key(u.realm, name);
        const g = groups.get(k) ?? { realm: u.realm, name, id: null, members: 0 };
        g.members++;
        groups.set(k, g);
      }
    }
    return [...groups.values()]
      .sort((a, b) => (a.realm < b.realm ? -1 : a.realm > b.realm ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .map((g) => Object.freeze(g));
  }

  async getGroup(id: string): Promise<GroupRecord | null> {
    return this.#d.groups.get(id) ?? null;
  }

  async saveGroup(group: GroupRecord, event: AuditEventDraft): Promise<'saved' | 'name_taken'> {
    for (const g of this.#d.groups.values()) if (g.id !== group.id && g.realm === group.realm && g.name === group.name) return 'name_taken';
    this.#d.groups.set(group.id, Object.freeze({ ...group }));
    this.#append(event);
    return 'saved';
  }

  async deleteGroup(input: { readonly id: string; readonly now: number }, event: AuditEventDraft): Promise<boolean> {
    const group = this.#d.groups.get(input.id);
    if (group === undefined) return false;
    this.#d.groups.delete(group.id);
    for (const [subject, u] of this.#d.users) {
      if (u.realm !== group.realm || !u.groups.includes(group.name)) continue;
      const groups = Object.freeze(u.groups.filter((g) => g !== group.name));
      this.#d.users.set(
        subject,
        Object.freeze({ ...u, groups, groupsSource: groups.length === 0 ? null : u.groupsSource, updatedAt: input.now }),
      );
    }
    this.#append(event);
    return true;
  }

  async createScimToken(token: ScimTokenRecord, event: AuditEventDraft): Promise<void> {
    if (this.#d.scimTokens.has(token.id)) throw new Error(`SCIM token ${token.id} already exists`);
    this.#d.scimTokens.set(token.id, Object.freeze({ ...token }));
    this.#append(event);
  }

  async useScimToken(input: { readonly digest: string; readonly now: number }): Promise<ScimTokenRecord | null> {
    for (const t of this.#d.scimTokens.values()) {
      if (t.revokedAt === null && digestsEqual(t.digest, input.digest)) {
        if (!scimTokenUseIsDue(t.lastUsedAt, input.now)) return t;
        const used = Object.freeze({ ...t, lastUsedAt: input.now });
        this.#d.scimTokens.set(t.id, used);
        return used;
      }
    }
    return null;
  }

  async listScimTokens(): Promise<readonly ScimTokenRecord[]> {
    return [...this.#d.scimTokens.values()].sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
  }

  async revokeScimToken(input: { readonly id: string; readonly now: number }, event: AuditEventDraft): Promise<boolean> {
    const t = this.#d.scimTokens.get(input.id);
    if (t === undefined || t.revokedAt !== null) return false;
    this.#d.scimTokens.set(t.id, Object.freeze({ ...t, revokedAt: input.now }));
    this.#append(event);
    return true;
  }

  async getAssertionKeys(): Promise<AssertionKeysRecord | null> {
    return this.#d.assertionKeys;
  }

  async saveAssertionKeys(
    input: { readonly expectedVersion: number; readonly keySet: string; readonly now: number },
    events: readonly AuditEventDraft[],
  ): Promise<AssertionKeysSave> {
    const current = this.#d.assertionKeys;
    if ((current?.version ?? 0) !== input.expectedVersion) return { saved: false, current };
    const record: AssertionKeysRecord = Object.freeze({ version: input.expectedVersion + 1, keySet: input.keySet, updatedAt: input.now });
    this.#d.assertionKeys = record;
    for (const event of events) this.#append(event);
    return { saved: true, record };
  }

  async createFlow(flow: FlowRecord): Promise<void> {
    // Expired flows can never be consumed, so they are only clutter.
    for (const [id, f] of this.#d.flows) if (f.record.expiresAt <= flow.createdAt) this.#d.flows.delete(id);
    if (this.#d.flows.has(flow.id)) throw new Error(`flow ${flow.id} already exists`);
    this.#d.flows.set(flow.id, { record: Object.freeze({ ...flow }), consumedAt: null });
  }

  async consumeFlow(input: { readonly id: string; readonly now: number }): Promise<FlowRecord | null> {
    const f = this.#d.flows.get(input.id);
    if (f === undefined || !isFlowConsumable({ ...f.record, consumedAt: f.consumedAt }, input.now)) return null;
    this.#d.flows.set(input.id, { record: f.record, consumedAt: input.now });
    return f.record;
  }

  async useDpopProof(input: { readonly key: string; readonly expiresAt: number; readonly now: number }): Promise<boolean> {
    return this.#useProof(input);
  }

  #useProof(input: { readonly key: string; readonly expiresAt: number; readonly now: number }): boolean {
    for (const [key, expiresAt] of this.#d.dpopProofs) if (expiresAt <= input.now) this.#d.dpopProofs.delete(key);
    if (this.#d.dpopProofs.has(input.key)) return false;
    this.#d.dpopProofs.set(input.key, input.expiresAt);
    return true;
  }

  async hasDpopRecord(input: { readonly key: string; readonly now: number }): Promise<boolean> {
    const expiresAt = this.#d.dpopProofs.get(input.key);
    return expiresAt !== undefined && expiresAt > input.now;
  }

  async reserveAttempts(input: Parameters<Store['reserveAttempts']>[0]): Promise<AttemptReservation> {
    // Peers share these windows, so the budget is shared as in the multi-node store.
    const windows: AttemptWindow[] = [];
    let retryAfterMs = 0;
    let busy = false;
    for (const key of [...new Set(input.keys)].sort()) {
      const d = decideAttemptWindow(key, this.#d.budgets.get(key), input);
      if (d.kind === 'refuse') retryAfterMs = Math.max(retryAfterMs, d.retryAfterMs);
      else if (d.kind === 'busy') busy = true;
      else windows.push(d.window);
    }
    if (retryAfterMs > 0) return { reserved: false, busy: false, retryAfterMs };
    if (busy) return { reserved: false, busy: true, retryAfterMs: 1000 };
    for (const w of windows) this.#d.budgets.set(w.key, w);
    return { reserved: true, shared: true, windows };
  }

  async settleAttempts(input: Parameters<Store['settleAttempts']>[0]): Promise<void> {
    for (const w of input.windows) {
      const current = this.#d.budgets.get(w.key);
      // Only the window that was reserved in changes; a newer one owes an old reservation nothing.
      if (current === undefined || current.start !== w.start) continue;
      this.#d.budgets.set(w.key, {
        ...current,
        // Only the lease period it was reserved in still holds it as running.
        pending: current.pendingSince === w.pendingSince ? Math.max(current.pending - 1, 0) : current.pending,
        failures: current.failures + (input.failed ? 1 : 0),
      });
    }
  }

  /** The maps as they are now (one synchronous step: the snapshot), as neutral rows. */
  async exportState(opts: ExportOptions): Promise<AsyncIterable<ControlStateRow>> {
    return exportMemoryState(this.#d, opts);
  }

  /** Stages every row in fresh maps, then, if this store is still empty, moves them in at once. */
  async importState(rows: AsyncIterable<ControlStateRow>): Promise<ImportOutcome> {
    const before = firstNonEmptyMemoryTable(this.#d);
    if (before !== null) return { kind: 'not_empty', table: before };
    const staged = emptyMemoryControlData();
    const counts: Record<string, number> = {};
    let previous: string | null = null;
    for await (const item of rows) {
      const problem = checkControlRow(item);
      if (problem !== null) throw new TypeError(`importState: ${problem}`);
      if (!inImportOrder(previous, item.table))
        throw new TypeError(`importState: ${item.table} rows after ${previous} rows (out of order)`);
      previous = item.table;
      importMemoryRow(staged, controlTable(item.table) as ControlTable, item.row);
      counts[item.table] = (counts[item.table] ?? 0) + 1;
    }
    // Another handle may have written meanwhile (the SQL stores hold a lock instead).
    const now = firstNonEmptyMemoryTable(this.#d);
    if (now !== null) return { kind: 'not_empty', table: now };
    commitMemoryState(this.#d, staged);
    return { kind: 'imported', counts };
  }

  async pruneEndedRecords(input: {
    readonly endedBefore: number;
  }): Promise<{ readonly sessions: number; readonly pairingIntents: number }> {
    const before = input.endedBefore;
    let sessions = 0;
    for (const [id, s] of this.#d.sessions) {
      if (s.row.expires_at > before && (s.row.revoked_at === null || s.row.revoked_at > before)) continue;
      this.#d.sessions.delete(id);
      this.#d.retired.delete(id);
      sessions++;
    }
    let pairingIntents = 0;
    for (const [id, i] of this.#d.intents) {
      if (i.expiresAt > before) continue;
      this.#d.intents.delete(id);
      pairingIntents++;
    }
    return { sessions, pairingIntents };
  }
}

// A closed handle answers nothing (peers on the same data stay open).
for (const op of STORE_OPERATIONS) {
  if (op === 'close') continue;
  const original = MemoryStore.prototype[op] as (...args: unknown[]) => Promise<unknown>;
  Object.defineProperty(MemoryStore.prototype, op, {
    value(this: MemoryStore, ...args: unknown[]): Promise<unknown> {
      return this.closed ? Promise.reject(new Error(`the memory store is closed (${op})`)) : original.apply(this, args);
    },
  });
}

/**
 * A fresh, empty in-memory store that implements the whole Store contract by applying core's
 * rules (`@svc/core/store`), with no database: the reference the conformance suite holds the
 * SQL stores to, and a store for tests. `openPeer()` gives another handle on the same data.
 *
 * @example
 * storeConformance('memory', { open: async () => createMemoryStore(), openPeer: async (s) => (s as MemoryStore).openPeer() });
 */
export function createMemoryStore(): MemoryStore {
  return new MemoryStore();
}

import type { AuditEvent, AuditEventDraft, Realm } from '@svc/core';
import { ACCESS_FROM, ACCESS_USER_COLUMNS } from '@svc/core/sql-rows';
import type { ControlStateRow, ExportOptions, ImportOutcome } from '@svc/core/store';
import {
  type AccessRow,
  type AssertionKeysRecord,
  type AssertionKeysSave,
  type AttemptReservation,
  type AuditedRotation,
  type BootstrapOutcome,
  type ChallengeRecord,
  type ConsumedChallenge,
  classifyStoreErrors,
  type DeviceRecord,
  type FlowRecord,
  type GroupRecord,
  type GroupSummary,
  type HandoffCodeRecord,
  type HandoffOutcome,
  type LinkRecord,
  type LinkSessionOutcome,
  type PairingCompletion,
  type PairingIntentRecord,
  type RotationOutcome,
  type ScimTokenRecord,
  type SessionCreation,
  type SessionRecord,
  STORE_OPERATIONS,
  type Store,
  type StoreStats,
  StoreUnavailableError,
  type TokenPairDigests,
  type UserChange,
  type UserChangeContext,
  type UserChangeOutcome,
  type UserFilter,
  type UserRecord,
} from '@svc/core/store';
import type Database from 'better-sqlite3';
import { SqliteAssertionKeys } from './assertion-keys.js';
import { SqliteAuditTrail } from './audit-trail.js';
import { BackgroundThread } from './background.js';
import { BearerCache } from './bearer-cache.js';
import { type CheckpointPlan, DEFAULT_CHECKPOINT_PLAN } from './checkpoint.js';
import type { SqliteContext } from './context.js';
import { exportSqliteState, importSqliteState } from './control-state.js';
import { SqliteDevices } from './devices.js';
import { sqliteFault } from './faults.js';
import { SqliteMaintenance } from './maintenance.js';
import { SqlitePairing } from './pairing.js';
import { SqliteProviders } from './providers.js';
import { ACCESS_TUPLE, type AccessTuple, accessRowOf, inColumnOrder } from './rows.js';
import { SqliteSessions } from './sessions.js';
import { SqliteUsers } from './users.js';
import { DEFAULT_LOCK_WAIT_MS, WriteQueue } from './write-queue.js';

export { DEFAULT_LOCK_WAIT_MS } from './write-queue.js';

type Db = Database.Database;

/** The statements the store itself runs (health), prepared once per connection. */
function prepareStatements(db: Db) {
  const p = <Params extends unknown[] | object = [], Row = unknown>(sql: string) => db.prepare<Params, Row>(sql);
  return {
    ping: p<[]>('SELECT 1'),
    // Health's probe of a known fault (see ping): a commit that rewrites one page, changing nothing.
    probeTouch: p<[]>('UPDATE project SET created_at = created_at'),
    dataVersion: p<[], number>('PRAGMA data_version').pluck(true),
    // The session and its user's attributes in one query: two primary-key lookups, read as an array (see inColumnOrder).
    sessionForAccess: readAccessRow(
      inColumnOrder(p<[string], AccessTuple>(`SELECT ${ACCESS_USER_COLUMNS} FROM ${ACCESS_FROM} WHERE s.id = ?`), ACCESS_TUPLE),
    ),
  };
}

/** `stmt`'s array as the bearer cache reads it: an {@link AccessRow}. */
function readAccessRow(stmt: Database.Statement<[string], AccessTuple>): { get(sessionId: string): AccessRow | undefined } {
  return {
    get: (sessionId) => {
      const t = stmt.get(sessionId);
      return t === undefined ? undefined : accessRowOf(t);
    },
  };
}

type Statements = ReturnType<typeof prepareStatements>;

/** Sessions the bearer-check cache keeps by default (about 1 KiB each with their principals). */
const BEARER_CACHE_SESSIONS = 10_000;

/** Writes waiting this long for the lock make health report `locked` even before they give up. */
const LOCK_WAIT_DEGRADED_MS = 1000;

/** Commits after which the background thread starts, if the diagnostics have not started it already. */
const BACKGROUND_AFTER_COMMITS = 32;

/** The embedded store serves one node: its attempt budget is that node's in-memory one. */
const NOT_SHARED: AttemptReservation = Object.freeze({ reserved: true, shared: false, windows: Object.freeze([]) });

/**
 * The embedded control store on one better-sqlite3 connection. Obtain one with
 * `openSqliteStore`. Every write runs in a `BEGIN IMMEDIATE` transaction, so processes
 * sharing the file (CLI and server) serialize on the write lock instead of failing on a
 * lock upgrade, and each single-use credential is consumed by exactly one of them.
 */
export class SqliteStore implements Store {
  /** The absolute path of the database file. */
  readonly file: string;
  readonly #db: Db;
  readonly #s: Statements;
  // Every write goes through it: group commit, waiting for another process's lock, faults.
  readonly #writes: WriteQueue;
  readonly #background: BackgroundThread;
  // The bearer-check cache (see BearerCache): never stale, dropped per session on each write
  // that changes a session's pair or revocation.
  readonly #accessCache: BearerCache;
  /**
   * Bearer checks answered from the cache (`hits`) or read from the database (`misses`) since
   * the store opened: the metrics listener reports them. Counts only, never a session.
   */
  readonly bearerCache: { hits: number; misses: number };
  // The operations, by what they work on (see each module).
  readonly #devices: SqliteDevices;
  readonly #sessions: SqliteSessions;
  readonly #audit: SqliteAuditTrail;
  readonly #pairing: SqlitePairing;
  readonly #providers: SqliteProviders;
  readonly #maintenance: SqliteMaintenance;
  readonly #users: SqliteUsers;
  readonly #ctx: SqliteContext;
  readonly #assertionKeys: SqliteAssertionKeys;

  /** Wraps an open, migrated connection; use `openSqliteStore` rather than calling this. */
  constructor(
    db: Db,
    file: string,
    durability: 'normal' | 'full' = 'normal',
    bearerCacheSessions = BEARER_CACHE_SESSIONS,
    lockWaitMs = DEFAULT_LOCK_WAIT_MS,
    checkpoint: CheckpointPlan = DEFAULT_CHECKPOINT_PLAN,
  ) {
    if (!Number.isSafeInteger(bearerCacheSessions) || bearerCacheSessions < 0) {
      throw new TypeError('bearerCacheSessions must be a whole number >= 0');
    }
    if (!Number.isSafeInteger(lockWaitMs) || lockWaitMs < 0) throw new TypeError('lockWaitMs must be a whole number >= 0');
    this.#db = db;
    this.file = file;
    this.#background = new BackgroundThread(db, file, checkpoint);
    // Prepared once: every call below reuses a compiled statement.
    this.#s = prepareStatements(db);
    this.#accessCache = new BearerCache(this.#s, bearerCacheSessions);
    this.bearerCache = this.#accessCache.counts;
    // A process that keeps writing (a server, not a one-off CLI command) gets the background
    // thread that checkpoints the WAL off the event loop once it has committed a few times.
    let commits = 0;
    this.#writes = new WriteQueue(db, durability, lockWaitMs, () => {
      if (++commits === BACKGROUND_AFTER_COMMITS) this.#background.start();
    });
    const ctx: SqliteContext = {
      db,
      durability,
      writes: this.#writes,
      cache: this.#accessCache,
      append: (draft) => this.#audit.append(draft),
      activeDeviceWithKey: (publicKey) => this.#devices.activeDeviceWithKey(publicKey),
      insertDevice: (device) => this.#devices.insertDevice(device),
      insertSession: (session, pair) => this.#sessions.insertSession(session, pair),
      userRow: (subject) => this.#users.userRow(subject),
      userStatus: (subject) => this.#users.userStatus(subject),
      insertUser: (user) => this.#users.insertUser(user),
      ensureUser: (subject, realm, now) => this.#users.ensureUser(subject, realm, now),
      writeUser: (user) => this.#users.writeUser(user),
      signedIn: (subject, now) => this.#users.signedIn(subject, now),
    };
    this.#ctx = ctx;
    this.#devices = new SqliteDevices(ctx);
    this.#sessions = new SqliteSessions(ctx);
    this.#audit = new SqliteAuditTrail(ctx);
    this.#pairing = new SqlitePairing(ctx);
    this.#providers = new SqliteProviders(ctx);
    this.#maintenance = new SqliteMaintenance(ctx);
    this.#users = new SqliteUsers(ctx);
    this.#assertionKeys = new SqliteAssertionKeys(ctx);
  }

  /**
   * Resolves when the store can serve: the file answers a read and, while a fault is known
   * (writes waited for the lock for over a second or gave up, or ran into a full disk or an I/O
   * error), a probe shows it is over: the write lock can be taken, a page can be allocated, and
   * a commit can be written. Otherwise rejects with the fault, so health says why it is degraded
   * and turns healthy by itself once the fault ends, even when no write comes to notice it.
   */
  async ping(): Promise<void> {
    this.#s.ping.get();
    const since = this.#writes.lockWaitSince;
    const waitingForLock = since !== undefined && Date.now() - since >= LOCK_WAIT_DEGRADED_MS;
    if (this.#writes.fault === null && !waitingForLock) return;
    if (this.#db.inTransaction) return;
    try {
      // A commit that takes the write lock, allocates and frees 64 KiB of pages and rewrites
      // the project row: it changes nothing, but fails as a real write would on a held lock, a
      // full database or disk, or failing I/O. Run only while a fault is known.
      this.#writes.tx.immediate(() => {
        this.#db.exec(
          'CREATE TABLE svc_fault_probe (x BLOB); INSERT INTO svc_fault_probe VALUES (zeroblob(65536)); DROP TABLE svc_fault_probe',
        );
        this.#s.probeTouch.run();
      });
    } catch (error) {
      const fault = sqliteFault(error);
      if (fault === null) throw error;
      if (fault !== 'locked') this.#writes.fault = fault;
      throw new StoreUnavailableError(fault, { cause: error });
    }
    if (!waitingForLock) this.#writes.fault = null;
  }

  async close(): Promise<void> {
    await this.#background.stop();
    if (this.#db.open) this.#db.close();
  }

  async getProject(): Promise<{ readonly projectId: string; readonly createdAt: number } | null> {
    return this.#devices.getProject();
  }

  async initProject(input: { readonly projectId: string; readonly createdAt: number }): Promise<{ readonly projectId: string }> {
    return this.#devices.initProject(input);
  }

  async issueBootstrapToken(
    input: { readonly id: string; readonly digest: string; readonly createdAt: number; readonly expiresAt: number },
    event: AuditEventDraft,
  ): Promise<void> {
    return this.#devices.issueBootstrapToken(input, event);
  }

  async consumeBootstrapToken(
    input: { readonly digest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<BootstrapOutcome> {
    return this.#devices.consumeBootstrapToken(input, event);
  }

  async enrollDevice(device: DeviceRecord, event: AuditEventDraft): Promise<'enrolled' | 'already_enrolled'> {
    return this.#devices.enrollDevice(device, event);
  }

  async findDeviceByPublicKey(publicKey: string): Promise<DeviceRecord | null> {
    return this.#devices.findDeviceByPublicKey(publicKey);
  }

  async getDevice(id: string): Promise<DeviceRecord | null> {
    return this.#devices.getDevice(id);
  }

  async listDevices(filter: { readonly realm?: Realm; readonly subject?: string }): Promise<readonly DeviceRecord[]> {
    return this.#devices.listDevices(filter);
  }

  async countDevices(realm: Realm): Promise<number> {
    return this.#devices.countDevices(realm);
  }

  async removeDevice(
    input: { readonly deviceId: string; readonly now: number; readonly keepLast?: boolean },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly last?: true }> {
    return this.#devices.removeDevice(input, event);
  }

  async createChallenge(challenge: ChallengeRecord): Promise<void> {
    return this.#sessions.createChallenge(challenge);
  }

  async consumeChallenge(input: { readonly id: string; readonly now: number }): Promise<ConsumedChallenge | null> {
    return this.#sessions.consumeChallenge(input);
  }

  async readChallenge(input: { readonly id: string; readonly now: number }): Promise<ConsumedChallenge | null> {
    return this.#sessions.readChallenge(input);
  }

  async useDpopProof(input: { readonly key: string; readonly expiresAt: number; readonly now: number }): Promise<boolean> {
    return this.#sessions.useDpopProof(input);
  }

  async hasDpopRecord(input: { readonly key: string; readonly now: number }): Promise<boolean> {
    return this.#sessions.hasDpopRecord(input);
  }

  async createSession(
    session: SessionRecord,
    pair: TokenPairDigests,
    event: AuditEventDraft,
    challenge?: { readonly id: string; readonly now: number },
  ): Promise<SessionCreation> {
    return this.#sessions.createSession(session, pair, event, challenge);
  }

  /** The bearer check: see BearerCache (checks of one event-loop turn share one freshness read). */
  findSessionByAccessDigest(sessionId: string, digest: string): Promise<SessionRecord | null> {
    return this.#accessCache.find(sessionId, digest);
  }

  async getSession(id: string): Promise<SessionRecord | null> {
    return this.#sessions.getSession(id);
  }

  async listActiveSessions(filter: {
    readonly now: number;
    readonly realm?: Realm;
    readonly deviceId?: string;
    readonly subject?: string;
  }): Promise<readonly SessionRecord[]> {
    return this.#sessions.listActiveSessions(filter);
  }

  async rotateRefreshToken(
    input: Parameters<Store['rotateRefreshToken']>[0],
    audit: (outcome: AuditedRotation) => AuditEventDraft,
  ): Promise<RotationOutcome> {
    return this.#sessions.rotateRefreshToken(input, audit);
  }

  async revokeSession(
    input: { readonly sessionId: string; readonly now: number; readonly reason: string },
    event: AuditEventDraft,
  ): Promise<boolean> {
    return this.#sessions.revokeSession(input, event);
  }

  async revokeSessionFamily(
    input: { readonly sessionId: string; readonly now: number; readonly reason: string },
    event: (session: SessionRecord) => AuditEventDraft,
  ): Promise<readonly string[]> {
    return this.#sessions.revokeSessionFamily(input, event);
  }

  async createHandoffCode(code: HandoffCodeRecord): Promise<void> {
    return this.#sessions.createHandoffCode(code);
  }

  async consumeHandoffCode(
    input: Parameters<Store['consumeHandoffCode']>[0],
    audit: (outcome: HandoffOutcome) => readonly AuditEventDraft[],
  ): Promise<HandoffOutcome> {
    return this.#sessions.consumeHandoffCode(input, audit);
  }

  async pruneRetiredRefreshTokens(input: Parameters<Store['pruneRetiredRefreshTokens']>[0]): Promise<number> {
    return this.#sessions.pruneRetiredRefreshTokens(input);
  }

  async appendAuditEvent(event: AuditEventDraft): Promise<AuditEvent> {
    return this.#audit.appendAuditEvent(event);
  }

  async listAuditEvents(input: { readonly afterSeq: number; readonly limit: number }): Promise<readonly AuditEvent[]> {
    return this.#audit.listAuditEvents(input);
  }

  async auditHead(): Promise<{ readonly seq: number; readonly hash: string } | null> {
    return this.#audit.auditHead();
  }

  async createPairingIntent(intent: PairingIntentRecord, event: AuditEventDraft): Promise<void> {
    return this.#pairing.createPairingIntent(intent, event);
  }

  async getPairingIntent(id: string): Promise<PairingIntentRecord | null> {
    return this.#pairing.getPairingIntent(id);
  }

  async recordPairingFailure(
    input: { readonly id: string; readonly now: number; readonly maxFailures: number },
    event: (failures: number, burned: boolean) => AuditEventDraft,
  ): Promise<{ readonly failures: number; readonly burned: boolean } | null> {
    return this.#pairing.recordPairingFailure(input, event);
  }

  async completePairing(
    input: { readonly id: string; readonly codeDigest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<PairingCompletion> {
    return this.#pairing.completePairing(input, event);
  }

  async pruneEndedRecords(input: {
    readonly endedBefore: number;
  }): Promise<{ readonly sessions: number; readonly pairingIntents: number }> {
    return this.#maintenance.pruneEndedRecords(input);
  }

  /** The diagnostics counters, read on the background thread (see BackgroundThread.stats). */
  async stats(now: number): Promise<StoreStats> {
    return this.#background.stats(now);
  }

  async createLink(
    link: LinkRecord,
    event: AuditEventDraft | readonly AuditEventDraft[],
    pairing?: Parameters<Store['createLink']>[2],
    user?: UserRecord,
  ): Promise<'created' | 'already_linked' | 'intent_invalid' | 'user_disabled'> {
    return this.#providers.createLink(link, event, pairing, user);
  }

  async getLink(id: string): Promise<LinkRecord | null> {
    return this.#providers.getLink(id);
  }

  async findLiveLink(input: {
    readonly realm: Realm;
    readonly issuer: string;
    readonly externalSubject: string;
  }): Promise<LinkRecord | null> {
    return this.#providers.findLiveLink(input);
  }

  async listLinks(filter: {
    readonly realm?: Realm;
    readonly subject?: string;
    readonly provider?: string;
  }): Promise<readonly LinkRecord[]> {
    return this.#providers.listLinks(filter);
  }

  async removeLink(
    input: { readonly linkId: string; readonly now: number; readonly keepAnotherWayIn?: boolean },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly lastWayIn?: boolean }> {
    return this.#providers.removeLink(input, event);
  }

  async renameLink(input: { readonly linkId: string; readonly name: string }, event: AuditEventDraft): Promise<boolean> {
    return this.#providers.renameLink(input, event);
  }

  async createLinkSession(
    input: Parameters<Store['createLinkSession']>[0],
    events: readonly AuditEventDraft[],
  ): Promise<LinkSessionOutcome> {
    return this.#providers.createLinkSession(input, events);
  }

  async createFlow(flow: FlowRecord): Promise<void> {
    return this.#providers.createFlow(flow);
  }

  async consumeFlow(input: { readonly id: string; readonly now: number }): Promise<FlowRecord | null> {
    return this.#providers.consumeFlow(input);
  }

  async getUser(subject: string): Promise<UserRecord | null> {
    return this.#users.getUser(subject);
  }

  async listUsers(filter: UserFilter): Promise<readonly UserRecord[]> {
    return this.#users.listUsers(filter);
  }

  async createUser(user: UserRecord, event: AuditEventDraft): Promise<'created' | 'exists' | 'user_name_taken'> {
    return this.#users.createUser(user, event);
  }

  async changeUser(
    input: { readonly subject: string; readonly now: number },
    decide: (current: UserRecord, context: UserChangeContext) => UserChange,
  ): Promise<UserChangeOutcome | { readonly kind: 'user_name_taken' }> {
    return this.#users.changeUser(input, decide);
  }

  async listGroups(filter: { readonly realm?: Realm }): Promise<readonly GroupSummary[]> {
    return this.#users.listGroups(filter);
  }

  async getGroup(id: string): Promise<GroupRecord | null> {
    return this.#users.getGroup(id);
  }

  async saveGroup(group: GroupRecord, event: AuditEventDraft): Promise<'saved' | 'name_taken'> {
    return this.#users.saveGroup(group, event);
  }

  async deleteGroup(input: { readonly id: string; readonly now: number }, event: AuditEventDraft): Promise<boolean> {
    return this.#users.deleteGroup(input, event);
  }

  async createScimToken(token: ScimTokenRecord, event: AuditEventDraft): Promise<void> {
    return this.#users.createScimToken(token, event);
  }

  async useScimToken(input: { readonly digest: string; readonly now: number }): Promise<ScimTokenRecord | null> {
    return this.#users.useScimToken(input);
  }

  async listScimTokens(): Promise<readonly ScimTokenRecord[]> {
    return this.#users.listScimTokens();
  }

  async revokeScimToken(input: { readonly id: string; readonly now: number }, event: AuditEventDraft): Promise<boolean> {
    return this.#users.revokeScimToken(input, event);
  }
  async getAssertionKeys(): Promise<AssertionKeysRecord | null> {
    return this.#assertionKeys.getAssertionKeys();
  }

  async saveAssertionKeys(
    input: { readonly expectedVersion: number; readonly keySet: string; readonly now: number },
    events: readonly AuditEventDraft[],
  ): Promise<AssertionKeysSave> {
    return this.#assertionKeys.saveAssertionKeys(input, events);
  }

  /** The control state in one read transaction (see `exportSqliteState`). */
  async exportState(opts: ExportOptions): Promise<AsyncIterable<ControlStateRow>> {
    return exportSqliteState(this.#ctx, opts);
  }

  /** An export into this empty store, in one transaction (see `importSqliteState`). */
  async importState(rows: AsyncIterable<ControlStateRow>): Promise<ImportOutcome> {
    const outcome = await importSqliteState(this.#ctx, rows);
    // Sessions written behind the bearer cache's back: it must not answer from before.
    this.#accessCache.clear();
    return outcome;
  }

  async reserveAttempts(_input: Parameters<Store['reserveAttempts']>[0]): Promise<AttemptReservation> {
    // The embedded store serves one node: that node's in-memory budget (on its monotonic
    // clock) is the whole budget, so nothing is written here for an attempt.
    return NOT_SHARED;
  }

  async settleAttempts(_input: Parameters<Store['settleAttempts']>[0]): Promise<void> {}
}

// Outages (the write lock held too long, disk full, I/O errors) become `503 store_unavailable`
// with the fault named, in every operation.
classifyStoreErrors(SqliteStore.prototype, STORE_OPERATIONS, sqliteFault);

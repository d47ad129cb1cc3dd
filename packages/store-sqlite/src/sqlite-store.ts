import {
  ACCESS_COLUMNS,
  activeSessionSql,
  CHALLENGE_COLUMNS,
  consumableChallengeSql,
  consumableFlowSql,
  counterAdvanceSql,
  DEVICE_COLUMNS,
  EVENT_COLUMNS,
  FLOW_COLUMNS,
  gracePairEndedSql,
  INTENT_COLUMNS,
  LINK_COLUMNS,
  liveSessionSql,
  pairingFailureSql,
  REFRESH_COLUMNS,
  SESSION_COLUMNS,
} from '@svc/core/sql-rows';
import {
  type AccessRow,
  type AttemptReservation,
  type AuditEvent,
  type AuditEventDraft,
  amrText,
  auditPage,
  type BootstrapOutcome,
  type ChallengeRecord,
  type ChallengeRow,
  clampPairToSession,
  classifyStoreErrors,
  type DeviceRecord,
  type DeviceRow,
  decideBootstrapConsumption,
  decideDeviceRemoval,
  decidePairingCompletion,
  digestsEqual,
  type EventRow,
  type FlowRecord,
  type FlowRow,
  GENESIS_HASH,
  type IntentRow,
  type LinkRecord,
  type LinkRow,
  type LinkSessionOutcome,
  latestTrustedTime,
  type PairingCompletion,
  type PairingIntentRecord,
  planRotation,
  REVOKED_DEVICE_REMOVED,
  REVOKED_LINK_REMOVED,
  REVOKED_REFRESH_REUSED,
  type Realm,
  type RefreshRow,
  type RotationOutcome,
  type SessionRecord,
  type SessionRow,
  STORE_OPERATIONS,
  type Store,
  type StoreStats,
  StoreUnavailableError,
  sealAuditEvent,
  type TokenPairDigests,
  toChallenge,
  toDevice,
  toEvent,
  toFlow,
  toIntent,
  toLink,
  toSession,
} from '@svc/core/store';
import type Database from 'better-sqlite3';
import { BackgroundThread } from './background.js';
import { BearerCache } from './bearer-cache.js';
import { type CheckpointPlan, DEFAULT_CHECKPOINT_PLAN } from './checkpoint.js';
import { sqliteFault } from './faults.js';
import { DEFAULT_LOCK_WAIT_MS, WriteQueue } from './write-queue.js';

export { DEFAULT_LOCK_WAIT_MS } from './write-queue.js';

type Db = Database.Database;

interface BootstrapRow {
  used_at: number | null;
  superseded_at: number | null;
  expires_at: number;
}

interface ProjectRow {
  project_id: string;
  created_at: number;
}

/** The named parameters of the session INSERT: the record with its first pair's digests. */
type SessionInsert = Omit<SessionRecord, 'amr' | 'jkt'> &
  Pick<TokenPairDigests, 'accessDigest' | 'refreshDigest'> & { amr: string; jkt: string | null };

/** The named parameters of a rotation's UPDATE. */
interface PairUpdate {
  id: string;
  accessDigest: string;
  accessExpiresAt: number;
  refreshDigest: string;
  refreshExpiresAt: number;
  prevRefreshDigest: string;
  prevRotatedAt: number;
  prevSuccessor: string;
  now: number;
}

/** The named parameters of an audit event's INSERT. */
type EventInsert = Omit<AuditEvent, 'data'> & { data: string };

/** Every statement the store runs, prepared once per connection. */
function prepareStatements(db: Db) {
  // Each statement declares its parameters and row, so reads need no casts.
  const p = <Params extends unknown[] | object = [], Row = unknown>(sql: string) => db.prepare<Params, Row>(sql);
  return {
    ping: p<[]>('SELECT 1'),
    // Health's probe of a known fault (see ping): a commit that rewrites one page, changing nothing.
    probeTouch: p<[]>('UPDATE project SET created_at = created_at'),
    getProject: p<[], ProjectRow>('SELECT project_id, created_at FROM project WHERE singleton = 1'),
    insertProject: p<[string, number]>(
      'INSERT INTO project (singleton, project_id, created_at) VALUES (1, ?, ?) ON CONFLICT (singleton) DO NOTHING',
    ),

    supersedeBootstrap: p<[number]>('UPDATE bootstrap_tokens SET superseded_at = ? WHERE used_at IS NULL AND superseded_at IS NULL'),
    insertBootstrap: p<[string, string, number, number]>(
      'INSERT INTO bootstrap_tokens (id, digest, created_at, expires_at) VALUES (?, ?, ?, ?)',
    ),
    bootstrapByDigest: p<[string], BootstrapRow>('SELECT used_at, superseded_at, expires_at FROM bootstrap_tokens WHERE digest = ?'),
    useBootstrap: p<[number, string, string]>(
      'UPDATE bootstrap_tokens SET used_at = ?, device_id = ? WHERE digest = ? AND used_at IS NULL',
    ),

    insertDevice: p<Omit<DeviceRecord, 'removedAt'>>(
      'INSERT INTO devices (id, public_key, realm, subject, name, created_at, removed_at) VALUES (@id, @publicKey, @realm, @subject, @name, @createdAt, NULL)',
    ),
    deviceByKey: p<[string], DeviceRow>(`SELECT ${DEVICE_COLUMNS} FROM devices WHERE public_key = ? AND removed_at IS NULL`),
    deviceById: p<[string], DeviceRow>(`SELECT ${DEVICE_COLUMNS} FROM devices WHERE id = ?`),
    listDevices: p<{ realm: Realm | null; subject: string | null }, DeviceRow>(
      `SELECT ${DEVICE_COLUMNS} FROM devices
       WHERE removed_at IS NULL AND (@realm IS NULL OR realm = @realm) AND (@subject IS NULL OR subject = @subject)
       ORDER BY created_at, id`,
    ),
    countDevices: p<[Realm], { n: number }>('SELECT COUNT(*) AS n FROM devices WHERE realm = ? AND removed_at IS NULL'),
    removeDevice: p<[number, string]>('UPDATE devices SET removed_at = ? WHERE id = ? AND removed_at IS NULL'),
    revokeDeviceSessions: p<{ now: number; deviceId: string; reason: string }>(
      `UPDATE sessions SET revoked_at = @now, revoked_reason = @reason, prev_successor = NULL WHERE device_id = @deviceId AND ${liveSessionSql('@now')}`,
    ),

    // Used-up and expired challenges can never be consumed again, so they are only clutter.
    pruneChallenges: p<[number]>('DELETE FROM challenges WHERE expires_at <= ?'),
    insertChallenge: p<ChallengeRecord>(
      'INSERT INTO challenges (id, public_key, realm, challenge, created_at, expires_at) VALUES (@id, @publicKey, @realm, @challenge, @createdAt, @expiresAt)',
    ),
    // A challenge dated in the future (the clock was stepped back) cannot be aged: refused.
    consumeChallenge: p<{ id: string; now: number; latest: number }, ChallengeRow>(
      `UPDATE challenges SET used_at = @now WHERE id = @id AND ${consumableChallengeSql('@now', '@latest')} RETURNING ${CHALLENGE_COLUMNS}`,
    ),

    insertSession: p<SessionInsert>(
      `INSERT INTO sessions (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at, refresh_digest,
         refresh_expires_at, generation, last_rotated_at, revoked_at, revoked_reason, client_address, user_agent, amr, jkt)
       VALUES (@id, @realm, @subject, @deviceId, @createdAt, @expiresAt, @accessDigest, @accessExpiresAt, @refreshDigest,
         @refreshExpiresAt, @generation, @lastRotatedAt, @revokedAt, @revokedReason, @clientAddress, @userAgent, @amr, @jkt)`,
    ),

    // The DPoP replay cache: a live record of the key wins; an expired one is replaced.
    pruneDpopProofs: p<[number]>('DELETE FROM dpop_proofs WHERE expires_at <= ?'),
    hasDpopRecord: p<[string, number], number>('SELECT 1 FROM dpop_proofs WHERE proof_key = ? AND expires_at > ?').pluck(true),
    useDpopProof: p<{ key: string; expiresAt: number; now: number }>(
      `INSERT INTO dpop_proofs (proof_key, expires_at) VALUES (@key, @expiresAt)
       ON CONFLICT (proof_key) DO UPDATE SET expires_at = excluded.expires_at WHERE dpop_proofs.expires_at <= @now`,
    ),
    sessionForAccess: p<[string], AccessRow>(`SELECT ${ACCESS_COLUMNS} FROM sessions WHERE id = ?`),
    dataVersion: p<[], number>('PRAGMA data_version').pluck(true),
    sessionById: p<[string], SessionRow>(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE id = ?`),
    listActiveSessions: p<{ now: number; realm: Realm | null; deviceId: string | null; subject: string | null }, SessionRow>(
      `SELECT ${SESSION_COLUMNS} FROM sessions
       WHERE ${activeSessionSql('@now')}
         AND (@realm IS NULL OR realm = @realm) AND (@deviceId IS NULL OR device_id = @deviceId)
         AND (@subject IS NULL OR subject = @subject)
       ORDER BY created_at DESC, id DESC`,
    ),
    sessionForRotation: p<[string], RefreshRow>(`SELECT ${REFRESH_COLUMNS} FROM sessions WHERE id = ?`),
    currentRefreshDigest: p<[string], string>('SELECT refresh_digest FROM sessions WHERE id = ?').pluck(true),
    isRetired: p<[string, string], number>('SELECT 1 FROM retired_refresh_tokens WHERE session_id = ? AND digest = ?').pluck(true),
    retireRefresh: p<[string, string, number]>('INSERT INTO retired_refresh_tokens (session_id, digest, retired_at) VALUES (?, ?, ?)'),
    // Driven by the (small) retired table with one primary-key probe per row: an
    // \`IN (SELECT id FROM sessions ...)\` scans every session (212 ms under the write lock with
    // 1,000,000 sessions, against well under 1 ms this way).
    pruneRetired: p<{ now: number; retiredBefore: number }>(
      `DELETE FROM retired_refresh_tokens WHERE retired_at < @retiredBefore
         OR EXISTS (SELECT 1 FROM sessions s WHERE s.id = retired_refresh_tokens.session_id AND NOT (${liveSessionSql('@now', 's.')}))`,
    ),
    eraseEndedGracePairs: p<[number]>(`UPDATE sessions SET prev_successor = NULL WHERE ${gracePairEndedSql('?')}`),
    setPair: p<PairUpdate>(
      `UPDATE sessions SET access_digest = @accessDigest, access_expires_at = @accessExpiresAt, refresh_digest = @refreshDigest,
         refresh_expires_at = @refreshExpiresAt, prev_refresh_digest = @prevRefreshDigest, prev_rotated_at = @prevRotatedAt,
         prev_successor = @prevSuccessor, generation = generation + 1, last_rotated_at = @now
       WHERE id = @id`,
    ),
    revokeSession: p<{ id: string; now: number; reason: string }>(
      'UPDATE sessions SET revoked_at = @now, revoked_reason = @reason, prev_successor = NULL WHERE id = @id AND revoked_at IS NULL',
    ),

    auditHead: p<[], { seq: number; hash: string }>('SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1'),
    insertEvent: p<EventInsert>(
      `INSERT INTO audit_events (${EVENT_COLUMNS})
       VALUES (@seq, @id, @at, @type, @realm, @subject, @deviceId, @sessionId, @data, @prevHash, @hash)`,
    ),
    listEvents: p<[number, number], EventRow>(`SELECT ${EVENT_COLUMNS} FROM audit_events WHERE seq > ? ORDER BY seq LIMIT ?`),

    insertIntent: p<PairingIntentRecord>(
      `INSERT INTO pairing_intents (${INTENT_COLUMNS})
       VALUES (@id, @realm, @subject, @name, @codeDigest, @createdAt, @expiresAt, @createdBy, @failures, @completedAt, @burnedAt, @deviceId)`,
    ),
    intentById: p<[string], IntentRow>(`SELECT ${INTENT_COLUMNS} FROM pairing_intents WHERE id = ?`),
    failIntent: p<{ id: string; now: number; maxFailures: number }, { failures: number; burned_at: number | null }>(
      `UPDATE pairing_intents ${pairingFailureSql({ id: '@id', now: '@now', maxFailures: '@maxFailures' })} RETURNING failures, burned_at`,
    ),
    completeIntent: p<{ id: string; now: number; deviceId: string }>(
      'UPDATE pairing_intents SET completed_at = @now, device_id = @deviceId WHERE id = @id',
    ),
    completeLinkIntent: p<{ id: string; now: number }>('UPDATE pairing_intents SET completed_at = @now WHERE id = @id'),

    insertLink: p<LinkRecord>(
      `INSERT INTO links (${LINK_COLUMNS})
       VALUES (@id, @realm, @subject, @provider, @issuer, @externalSubject, @credentialData, @counter, @name, @createdAt, @lastUsedAt, NULL)
       ON CONFLICT (realm, issuer, external_subject) WHERE removed_at IS NULL DO NOTHING`,
    ),
    linkById: p<[string], LinkRow>(`SELECT ${LINK_COLUMNS} FROM links WHERE id = ?`),
    liveLink: p<{ realm: Realm; issuer: string; externalSubject: string }, LinkRow>(
      `SELECT ${LINK_COLUMNS} FROM links WHERE realm = @realm AND issuer = @issuer AND external_subject = @externalSubject AND removed_at IS NULL`,
    ),
    listLinks: p<{ realm: Realm | null; subject: string | null; provider: string | null }, LinkRow>(
      `SELECT ${LINK_COLUMNS} FROM links
       WHERE removed_at IS NULL AND (@realm IS NULL OR realm = @realm) AND (@subject IS NULL OR subject = @subject)
         AND (@provider IS NULL OR provider = @provider)
       ORDER BY created_at, id`,
    ),
    removeLink: p<[number, string]>('UPDATE links SET removed_at = ? WHERE id = ? AND removed_at IS NULL'),
    // The one conditional update of a link sign-in: live, and the counter advances (or is left alone).
    useLink: p<{ id: string; now: number; counter: number | null }>(
      `UPDATE links SET counter = @counter, last_used_at = @now WHERE id = @id AND removed_at IS NULL AND ${counterAdvanceSql('@counter')}`,
    ),
    touchLink: p<{ id: string; now: number }>('UPDATE links SET last_used_at = @now WHERE id = @id AND removed_at IS NULL'),
    pruneFlows: p<[number]>('DELETE FROM flows WHERE expires_at <= ?'),
    insertFlow: p<FlowRecord>(
      `INSERT INTO flows (${FLOW_COLUMNS})
       VALUES (@id, @provider, @realm, @intent, @subject, @pairingIntentId, @state, @createdAt, @expiresAt)`,
    ),
    consumeFlow: p<{ id: string; now: number; latest: number }, FlowRow>(
      `UPDATE flows SET consumed_at = @now WHERE id = @id AND ${consumableFlowSql('@now', '@latest')} RETURNING ${FLOW_COLUMNS}`,
    ),

    countEvent: p<[string]>('INSERT INTO audit_counts (type, n) VALUES (?, 1) ON CONFLICT (type) DO UPDATE SET n = n + 1'),

    endedSessionIds: p<{ before: number; limit: number }, string>(
      'SELECT id FROM sessions WHERE expires_at <= @before UNION SELECT id FROM sessions WHERE revoked_at <= @before LIMIT @limit',
    ).pluck(true),
    deleteRetiredOf: p<[string]>('DELETE FROM retired_refresh_tokens WHERE session_id = ?'),
    deleteSession: p<[string]>('DELETE FROM sessions WHERE id = ?'),
    pruneEndedIntents: p<{ before: number; limit: number }>(
      'DELETE FROM pairing_intents WHERE id IN (SELECT id FROM pairing_intents WHERE expires_at <= @before LIMIT @limit)',
    ),
  };
}

type Statements = ReturnType<typeof prepareStatements>;

const INVALID: RotationOutcome = Object.freeze({ kind: 'invalid' });
const NOT_SHARED: AttemptReservation = Object.freeze({ reserved: true, shared: false, windows: Object.freeze([]) });

/** Sessions the bearer-check cache keeps by default (about 1 KiB each with their principals). */
const BEARER_CACHE_SESSIONS = 10_000;

/** Rows of each kind one retention batch deletes. */
const PRUNE_BATCH = 1000;

/** Writes waiting this long for the lock make health report `locked` even before they give up. */
const LOCK_WAIT_DEGRADED_MS = 1000;

/** Commits after which the background thread starts, if the diagnostics have not started it already. */
const BACKGROUND_AFTER_COMMITS = 32;

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
  readonly #durability: 'normal' | 'full';
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
    this.#durability = durability;
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
  }

  /** Runs `fn` as one atomic write (see WriteQueue.run) and resolves after its commit. */
  #write<T>(fn: () => T, critical = false): Promise<T> {
    return this.#writes.run(fn, critical);
  }

  /** Seals `draft` after the current head and appends it. Call only inside a write transaction. */
  #append(draft: AuditEventDraft): AuditEvent {
    const head = this.#writes.head ?? this.#s.auditHead.get();
    const event = sealAuditEvent(draft, head?.seq ?? 0, head?.hash ?? GENESIS_HASH);
    this.#s.insertEvent.run({
      seq: event.seq,
      id: event.id,
      at: event.at,
      type: event.type,
      realm: event.realm,
      subject: event.subject,
      deviceId: event.deviceId,
      sessionId: event.sessionId,
      data: JSON.stringify(event.data),
      prevHash: event.prevHash,
      hash: event.hash,
    });
    this.#s.countEvent.run(event.type);
    this.#writes.head = { seq: event.seq, hash: event.hash };
    return event;
  }

  #activeDeviceWithKey(publicKey: string): DeviceRow | undefined {
    return this.#s.deviceByKey.get(publicKey);
  }

  #insertDevice(device: DeviceRecord): DeviceRecord {
    this.#s.insertDevice.run({
      id: device.id,
      publicKey: device.publicKey,
      realm: device.realm,
      subject: device.subject,
      name: device.name,
      createdAt: device.createdAt,
    });
    const row = this.#s.deviceById.get(device.id);
    if (row === undefined) throw new Error(`device ${device.id} vanished inside the transaction that inserted it`);
    return toDevice(row);
  }

  #rotate(input: Parameters<Store['rotateRefreshToken']>[0], audit: Parameters<Store['rotateRefreshToken']>[1]): RotationOutcome {
    const { presentedDigest, now, next } = input;
    const s = this.#s.sessionForRotation.get(input.sessionId);
    // The rule and the outcome are core's; this only writes what the plan says.
    let plan = planRotation(s, input);
    if (s !== undefined && plan.kind === 'check_retired') {
      plan = planRotation(s, input, this.#s.isRetired.get(s.id, presentedDigest) !== undefined);
    }
    if (s === undefined || plan.kind === 'invalid' || plan.kind === 'check_retired') return INVALID;
    if (plan.kind === 'rotate') {
      if (plan.retire !== null) this.#s.retireRefresh.run(s.id, plan.retire, now);
      this.#accessCache.drop(s.id);
      this.#s.setPair.run({
        id: s.id,
        accessDigest: next.accessDigest,
        accessExpiresAt: plan.accessExpiresAt,
        refreshDigest: next.refreshDigest,
        refreshExpiresAt: plan.refreshExpiresAt,
        prevRefreshDigest: s.refresh_digest,
        prevRotatedAt: now,
        prevSuccessor: input.sealedSuccessor,
        now,
      });
    } else if (plan.kind === 'reuse') {
      this.#accessCache.drop(s.id);
      this.#s.revokeSession.run({ id: s.id, now, reason: REVOKED_REFRESH_REUSED });
    }
    this.#append(audit(plan.outcome));
    return plan.outcome;
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
    const row = this.#s.getProject.get();
    return row === undefined ? null : { projectId: row.project_id, createdAt: row.created_at };
  }

  async initProject(input: { readonly projectId: string; readonly createdAt: number }): Promise<{ readonly projectId: string }> {
    return this.#write(() => {
      this.#s.insertProject.run(input.projectId, input.createdAt);
      const row = this.#s.getProject.get();
      if (row === undefined) throw new Error('the project row vanished after it was written');
      return { projectId: row.project_id };
    }, true);
  }

  async issueBootstrapToken(
    input: { readonly id: string; readonly digest: string; readonly createdAt: number; readonly expiresAt: number },
    event: AuditEventDraft,
  ): Promise<void> {
    await this.#write(() => {
      this.#s.supersedeBootstrap.run(input.createdAt);
      this.#s.insertBootstrap.run(input.id, input.digest, input.createdAt, input.expiresAt);
      this.#append(event);
    }, true);
  }

  async consumeBootstrapToken(
    input: { readonly digest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<BootstrapOutcome> {
    return this.#write((): BootstrapOutcome => {
      const token = this.#s.bootstrapByDigest.get(input.digest);
      const decision = decideBootstrapConsumption(
        token && { usedAt: token.used_at, supersededAt: token.superseded_at, expiresAt: token.expires_at },
        { now: input.now, keyTaken: this.#activeDeviceWithKey(input.device.publicKey) !== undefined },
      );
      if (decision.kind !== 'consume') return decision;
      const device = this.#insertDevice(input.device);
      this.#s.useBootstrap.run(input.now, device.id, input.digest);
      this.#append(event);
      return { kind: 'enrolled', device };
    }, true);
  }

  async enrollDevice(device: DeviceRecord, event: AuditEventDraft): Promise<'enrolled' | 'already_enrolled'> {
    return this.#write(() => {
      if (this.#activeDeviceWithKey(device.publicKey) !== undefined) return 'already_enrolled';
      this.#insertDevice(device);
      this.#append(event);
      return 'enrolled';
    }, true);
  }

  async findDeviceByPublicKey(publicKey: string): Promise<DeviceRecord | null> {
    const row = this.#activeDeviceWithKey(publicKey);
    return row === undefined ? null : toDevice(row);
  }

  async getDevice(id: string): Promise<DeviceRecord | null> {
    const row = this.#s.deviceById.get(id);
    return row === undefined ? null : toDevice(row);
  }

  async listDevices(filter: { readonly realm?: Realm; readonly subject?: string }): Promise<readonly DeviceRecord[]> {
    return this.#s.listDevices.all({ realm: filter.realm ?? null, subject: filter.subject ?? null }).map(toDevice);
  }

  async countDevices(realm: Realm): Promise<number> {
    return this.#s.countDevices.get(realm)?.n ?? 0;
  }

  async removeDevice(
    input: { readonly deviceId: string; readonly now: number; readonly keepLast?: boolean },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly last?: true }> {
    return this.#write(() => {
      // Inside the write transaction (BEGIN IMMEDIATE: one writer at a time), so the count
      // cannot change between this check and the removal.
      const row = this.#s.deviceById.get(input.deviceId);
      const active = row !== undefined && row.removed_at === null;
      const keepLast = input.keepLast === true;
      const decision = decideDeviceRemoval({
        active,
        activeInRealm: active && keepLast ? (this.#s.countDevices.get(row.realm)?.n ?? 0) : 0,
        keepLast,
      });
      if (decision === 'last') return { removed: false, revokedSessions: 0, last: true as const };
      if (decision === 'not_found' || this.#s.removeDevice.run(input.now, input.deviceId).changes === 0) {
        return { removed: false, revokedSessions: 0 };
      }
      this.#accessCache.clear();
      const revoked = this.#s.revokeDeviceSessions.run({
        deviceId: input.deviceId,
        now: input.now,
        reason: REVOKED_DEVICE_REMOVED,
      }).changes;
      this.#append(event);
      return { removed: true, revokedSessions: revoked };
    }, true);
  }

  async createChallenge(challenge: ChallengeRecord): Promise<void> {
    await this.#write(() => {
      this.#s.pruneChallenges.run(challenge.createdAt);
      this.#s.insertChallenge.run({
        id: challenge.id,
        publicKey: challenge.publicKey,
        realm: challenge.realm,
        challenge: challenge.challenge,
        createdAt: challenge.createdAt,
        expiresAt: challenge.expiresAt,
      });
    });
  }

  async consumeChallenge(input: { readonly id: string; readonly now: number }): Promise<ChallengeRecord | null> {
    // One conditional UPDATE ... RETURNING: the first caller flips used_at, every other sees no row.
    const latest = latestTrustedTime(input.now);
    const row = await this.#write(() => this.#s.consumeChallenge.get({ id: input.id, now: input.now, latest }));
    return row === undefined ? null : toChallenge(row);
  }

  async useDpopProof(input: { readonly key: string; readonly expiresAt: number; readonly now: number }): Promise<boolean> {
    // One write transaction: the INSERT (or the UPDATE of an expired record) changes a row only
    // for the first of any number of callers, in this process or another one on the same file.
    return this.#write(() => {
      this.#s.pruneDpopProofs.run(input.now);
      return this.#s.useDpopProof.run({ key: input.key, expiresAt: input.expiresAt, now: input.now }).changes === 1;
    });
  }

  async hasDpopRecord(input: { readonly key: string; readonly now: number }): Promise<boolean> {
    return this.#s.hasDpopRecord.get(input.key, input.now) !== undefined;
  }

  async createSession(session: SessionRecord, pair: TokenPairDigests, event: AuditEventDraft): Promise<boolean> {
    return this.#write(() => {
      // The device is re-read inside the write transaction: a removal committed after the
      // sign-in looked the device up must win, never leave a live session behind.
      const device = this.#s.deviceById.get(session.deviceId);
      if (device === undefined || device.removed_at !== null) return false;
      this.#insertSession(session, pair);
      this.#append(event);
      return true;
    });
  }

  #insertSession(session: SessionRecord, pair: TokenPairDigests): void {
    const expiries = clampPairToSession(pair, session.expiresAt);
    this.#s.insertSession.run({
      id: session.id,
      realm: session.realm,
      subject: session.subject,
      deviceId: session.deviceId,
      createdAt: session.createdAt,
      expiresAt: session.expiresAt,
      accessDigest: pair.accessDigest,
      accessExpiresAt: expiries.accessExpiresAt,
      refreshDigest: pair.refreshDigest,
      refreshExpiresAt: expiries.refreshExpiresAt,
      generation: session.generation,
      lastRotatedAt: session.lastRotatedAt,
      revokedAt: session.revokedAt,
      revokedReason: session.revokedReason,
      clientAddress: session.clientAddress,
      userAgent: session.userAgent,
      amr: amrText(session.amr),
      jkt: session.jkt ?? null,
    });
  }

  /** The bearer check: see BearerCache (checks of one event-loop turn share one freshness read). */
  findSessionByAccessDigest(sessionId: string, digest: string): Promise<SessionRecord | null> {
    return this.#accessCache.find(sessionId, digest);
  }

  async getSession(id: string): Promise<SessionRecord | null> {
    const row = this.#s.sessionById.get(id);
    return row === undefined ? null : toSession(row);
  }

  async listActiveSessions(filter: {
    readonly now: number;
    readonly realm?: Realm;
    readonly deviceId?: string;
    readonly subject?: string;
  }): Promise<readonly SessionRecord[]> {
    const rows = this.#s.listActiveSessions.all({
      now: filter.now,
      realm: filter.realm ?? null,
      deviceId: filter.deviceId ?? null,
      subject: filter.subject ?? null,
    });
    return rows.map(toSession);
  }

  async rotateRefreshToken(
    input: Parameters<Store['rotateRefreshToken']>[0],
    audit: (outcome: Exclude<RotationOutcome, { kind: 'invalid' }>) => AuditEventDraft,
  ): Promise<RotationOutcome> {
    // Anything but the current refresh token may be a reuse, whose revocation must be durable:
    // those presentations (rare) commit fsynced. A reuse that raced past this look still gets
    // a checkpoint, which syncs the WAL.
    let critical = false;
    if (this.#durability === 'normal') {
      const current = this.#s.currentRefreshDigest.get(input.sessionId);
      critical = current === undefined || !digestsEqual(current, input.presentedDigest);
    }
    const outcome = await this.#write(() => this.#rotate(input, audit), critical);
    if (outcome.kind === 'reused' && !critical && this.#durability === 'normal') this.#db.pragma('wal_checkpoint(PASSIVE)');
    return outcome;
  }

  async revokeSession(
    input: { readonly sessionId: string; readonly now: number; readonly reason: string },
    event: AuditEventDraft,
  ): Promise<boolean> {
    return this.#write(() => {
      this.#accessCache.drop(input.sessionId);
      if (this.#s.revokeSession.run({ id: input.sessionId, now: input.now, reason: input.reason }).changes === 0) return false;
      this.#append(event);
      return true;
    }, true);
  }

  async pruneRetiredRefreshTokens(input: Parameters<Store['pruneRetiredRefreshTokens']>[0]): Promise<number> {
    return this.#write(() => {
      this.#s.eraseEndedGracePairs.run(input.graceEndedBefore);
      return this.#s.pruneRetired.run({ now: input.now, retiredBefore: input.retiredBefore }).changes;
    });
  }

  async appendAuditEvent(event: AuditEventDraft): Promise<AuditEvent> {
    return this.#write(() => this.#append(event));
  }

  async listAuditEvents(input: { readonly afterSeq: number; readonly limit: number }): Promise<readonly AuditEvent[]> {
    const page = auditPage(input);
    const rows = this.#s.listEvents.all(page.afterSeq, page.limit);
    return rows.map(toEvent);
  }

  async auditHead(): Promise<{ readonly seq: number; readonly hash: string } | null> {
    const head = this.#s.auditHead.get();
    return head === undefined ? null : { seq: head.seq, hash: head.hash };
  }

  async createPairingIntent(intent: PairingIntentRecord, event: AuditEventDraft): Promise<void> {
    await this.#write(() => {
      this.#s.insertIntent.run({
        id: intent.id,
        realm: intent.realm,
        subject: intent.subject,
        name: intent.name,
        codeDigest: intent.codeDigest,
        createdAt: intent.createdAt,
        expiresAt: intent.expiresAt,
        createdBy: intent.createdBy,
        failures: intent.failures,
        completedAt: intent.completedAt,
        burnedAt: intent.burnedAt,
        deviceId: intent.deviceId,
      });
      this.#append(event);
    }, true);
  }

  async getPairingIntent(id: string): Promise<PairingIntentRecord | null> {
    const row = this.#s.intentById.get(id);
    return row === undefined ? null : toIntent(row);
  }

  async recordPairingFailure(
    input: { readonly id: string; readonly now: number; readonly maxFailures: number },
    event: (failures: number, burned: boolean) => AuditEventDraft,
  ): Promise<{ readonly failures: number; readonly burned: boolean } | null> {
    return this.#write(() => {
      const row = this.#s.failIntent.get({ id: input.id, now: input.now, maxFailures: input.maxFailures }) as
        | { failures: number; burned_at: number | null }
        | undefined;
      if (row === undefined) return null;
      const result = { failures: row.failures, burned: row.burned_at !== null };
      this.#append(event(result.failures, result.burned));
      return result;
    }, true);
  }

  async completePairing(
    input: { readonly id: string; readonly codeDigest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<PairingCompletion> {
    return this.#write((): PairingCompletion => {
      const intent = this.#s.intentById.get(input.id);
      const decision = decidePairingCompletion(intent && toIntent(intent), {
        codeDigest: input.codeDigest,
        now: input.now,
        keyTaken: this.#activeDeviceWithKey(input.device.publicKey) !== undefined,
      });
      if (decision.kind !== 'complete') return decision;
      const device = this.#insertDevice(input.device);
      this.#s.completeIntent.run({ id: input.id, now: input.now, deviceId: device.id });
      this.#append(event);
      return { kind: 'completed', device };
    }, true);
  }

  async pruneEndedRecords(input: {
    readonly endedBefore: number;
  }): Promise<{ readonly sessions: number; readonly pairingIntents: number }> {
    const before = input.endedBefore;
    const total = { sessions: 0, pairingIntents: 0 };
    // In batches, each its own write: a first run over a large backlog never holds the write
    // lock (nor, SQLite being synchronous, the event loop) for long.
    for (;;) {
      const batch = await this.#write(() => {
        const ids = this.#s.endedSessionIds.all({ before, limit: PRUNE_BATCH });
        for (const id of ids) {
          this.#s.deleteRetiredOf.run(id);
          this.#s.deleteSession.run(id);
          this.#accessCache.drop(id);
        }
        return { sessions: ids.length, pairingIntents: this.#s.pruneEndedIntents.run({ before, limit: PRUNE_BATCH }).changes };
      });
      total.sessions += batch.sessions;
      total.pairingIntents += batch.pairingIntents;
      if (batch.sessions < PRUNE_BATCH && batch.pairingIntents < PRUNE_BATCH) return total;
    }
  }

  /** The diagnostics counters, read on the background thread (see BackgroundThread.stats). */
  async stats(now: number): Promise<StoreStats> {
    return this.#background.stats(now);
  }

  async createLink(
    link: LinkRecord,
    event: AuditEventDraft,
    pairing?: Parameters<Store['createLink']>[2],
  ): Promise<'created' | 'already_linked' | 'intent_invalid'> {
    return this.#write((): 'created' | 'already_linked' | 'intent_invalid' => {
      if (pairing !== undefined) {
        const intent = this.#s.intentById.get(pairing.id);
        const decision = decidePairingCompletion(intent && toIntent(intent), {
          codeDigest: pairing.codeDigest,
          now: pairing.now,
          keyTaken: false,
        });
        if (decision.kind !== 'complete') return 'intent_invalid';
      }
      // The partial unique index decides: a live link of the same identity makes this a no-op.
      if (this.#s.insertLink.run(link).changes === 0) return 'already_linked';
      // `device_id` stays null: it names devices only; the `link.created` event names the intent.
      if (pairing !== undefined) this.#s.completeLinkIntent.run({ id: pairing.id, now: pairing.now });
      this.#append(event);
      return 'created';
    }, true);
  }

  async getLink(id: string): Promise<LinkRecord | null> {
    const row = this.#s.linkById.get(id);
    return row === undefined ? null : toLink(row);
  }

  async findLiveLink(input: {
    readonly realm: Realm;
    readonly issuer: string;
    readonly externalSubject: string;
  }): Promise<LinkRecord | null> {
    const row = this.#s.liveLink.get({ realm: input.realm, issuer: input.issuer, externalSubject: input.externalSubject });
    return row === undefined ? null : toLink(row);
  }

  async listLinks(filter: {
    readonly realm?: Realm;
    readonly subject?: string;
    readonly provider?: string;
  }): Promise<readonly LinkRecord[]> {
    return this.#s.listLinks
      .all({ realm: filter.realm ?? null, subject: filter.subject ?? null, provider: filter.provider ?? null })
      .map(toLink);
  }

  async removeLink(
    input: { readonly linkId: string; readonly now: number },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number }> {
    return this.#write(() => {
      if (this.#s.removeLink.run(input.now, input.linkId).changes === 0) return { removed: false, revokedSessions: 0 };
      this.#accessCache.clear();
      const revoked = this.#s.revokeDeviceSessions.run({ deviceId: input.linkId, now: input.now, reason: REVOKED_LINK_REMOVED }).changes;
      this.#append(event);
      return { removed: true, revokedSessions: revoked };
    }, true);
  }

  async createLinkSession(
    input: Parameters<Store['createLinkSession']>[0],
    events: readonly AuditEventDraft[],
  ): Promise<LinkSessionOutcome> {
    return this.#write((): LinkSessionOutcome => {
      const { session, now } = input;
      // Inside the write transaction (one writer at a time): the link's state cannot change
      // between this conditional update and the session's insert.
      const used =
        input.counter === 'unchanged'
          ? this.#s.touchLink.run({ id: session.deviceId, now }).changes
          : this.#s.useLink.run({ id: session.deviceId, now, counter: input.counter }).changes;
      if (used === 0) {
        const link = this.#s.linkById.get(session.deviceId);
        if (link === undefined || link.removed_at !== null) return { kind: 'link_removed' };
        return { kind: 'counter_regressed', stored: link.counter };
      }
      this.#insertSession(session, input.pair);
      for (const event of events) this.#append(event);
      return { kind: 'created' };
    });
  }

  async createFlow(flow: FlowRecord): Promise<void> {
    await this.#write(() => {
      // Expired flows can never be consumed again, so they are only clutter.
      this.#s.pruneFlows.run(flow.createdAt);
      this.#s.insertFlow.run({
        id: flow.id,
        provider: flow.provider,
        realm: flow.realm,
        intent: flow.intent,
        subject: flow.subject,
        pairingIntentId: flow.pairingIntentId,
        state: flow.state,
        createdAt: flow.createdAt,
        expiresAt: flow.expiresAt,
      });
    });
  }

  async consumeFlow(input: { readonly id: string; readonly now: number }): Promise<FlowRecord | null> {
    // One conditional UPDATE ... RETURNING: the first caller flips consumed_at, every other sees no row.
    const row = await this.#write(() => this.#s.consumeFlow.get({ id: input.id, now: input.now, latest: latestTrustedTime(input.now) }));
    return row === undefined ? null : toFlow(row);
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

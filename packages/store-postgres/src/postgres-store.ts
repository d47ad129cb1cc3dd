import {
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
  liveIntentSql,
  liveSessionSql,
  pairingFailureSql,
  REFRESH_COLUMNS,
  SESSION_COLUMNS,
  statsSql,
  usableBootstrapSql,
} from '@svc/core/sql-rows';
import {
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
  type EventRow,
  type FlowRecord,
  type FlowRow,
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
  type RealmCountRow,
  type RefreshRow,
  type RotationOutcome,
  type SessionRecord,
  type SessionRow,
  STORE_OPERATIONS,
  type Store,
  type StoreStats,
  type TokenPairDigests,
  toChallenge,
  toDevice,
  toEvent,
  toFlow,
  toIntent,
  toLink,
  toSession,
  toStoreStats,
} from '@svc/core/store';
import type { Pool, PoolClient, QueryConfig } from 'pg';
import { AttemptBudget } from './attempt-budget.js';
import { AuditSealer, PENDING_COLUMNS, pendingParams, pendingValues } from './audit-sealer.js';
import { BearerBatch } from './bearer-batch.js';
import { postgresFault } from './faults.js';
import { changes, first, rollback, rows, run, transaction } from './sql.js';

export { SEAL_DELAY_MS } from './audit-sealer.js';

const INVALID: RotationOutcome = Object.freeze({ kind: 'invalid' });

/** The columns a new session is inserted with, in the order of {@link sessionValues}. */
const NEW_SESSION_COLUMNS = `id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at, refresh_digest,
  refresh_expires_at, generation, last_rotated_at, revoked_at, revoked_reason, client_address, user_agent, amr, jkt`;

/** The 18 values of a new session for {@link NEW_SESSION_COLUMNS}; its pair's expiries clamped to the session's. */
function sessionValues(session: SessionRecord, pair: TokenPairDigests): unknown[] {
  const expiries = clampPairToSession(pair, session.expiresAt);
  return [
    session.id,
    session.realm,
    session.subject,
    session.deviceId,
    session.createdAt,
    session.expiresAt,
    pair.accessDigest,
    expiries.accessExpiresAt,
    pair.refreshDigest,
    expiries.refreshExpiresAt,
    session.generation,
    session.lastRotatedAt,
    session.revokedAt,
    session.revokedReason,
    session.clientAddress,
    session.userAgent,
    amrText(session.amr),
    session.jkt ?? null,
  ];
}

/** Rows of each kind one retention batch deletes. */
const PRUNE_BATCH = 1000;

/** The bound on a maintenance statement (pruning), far above the request bounds. */
const MAINTENANCE_TIMEOUT_MS = 300_000;

const INSERT_DEVICE = `INSERT INTO devices (id, public_key, realm, subject, name, created_at, removed_at)
  VALUES ($1, $2, $3, $4, $5, $6, NULL)
  ON CONFLICT (public_key) WHERE removed_at IS NULL DO NOTHING
  RETURNING ${DEVICE_COLUMNS}`;

// A rotation's new pair; the rotation writes it in one statement with its retired token and its event.
const SET_PAIR = `UPDATE sessions SET access_digest = $2, access_expires_at = $3, refresh_digest = $4, refresh_expires_at = $5,
    prev_refresh_digest = $6, prev_rotated_at = $7, prev_successor = $9, generation = generation + 1, last_rotated_at = $8
  WHERE id = $1
  RETURNING generation`;

// Revoking erases the sealed grace pair too: a revoked session answers no grace, and a restore must not bring it back.
const REVOKE_SESSION = `UPDATE sessions SET revoked_at = $2, revoked_reason = $3, prev_successor = NULL WHERE id = $1 AND revoked_at IS NULL
  RETURNING ${SESSION_COLUMNS}`;

/**
 * The multi-node control store on PostgreSQL. Obtain one with `openPostgresStore`. Many nodes
 * (processes, pools) may share one schema; the guarantees hold across all of them:
 * - every state change and its audit event commit in one READ COMMITTED transaction: the
 *   event as a pending row (`audit_pending`), which takes no shared lock, so the writes of every
 *   node commit side by side;
 * - a sealer chains pending events in batches under a row lock on the single `audit_head` row
 *   (taken first in its own short transaction), within {@link SEAL_DELAY_MS} of their commit
 *   and always before the trail, its head or its counts are read: one chain, no gaps, no fork;
 * - single-use credentials are used up by one conditional `UPDATE ... WHERE <still unused>`:
 *   a blocked UPDATE re-checks its WHERE against the winner's committed row, so exactly one
 *   of N concurrent attempts matches;
 * - a refresh rotation locks its session row (`SELECT ... FOR UPDATE`) and decides on the
 *   latest committed state, so concurrent presentations are decided one after the other.
 */
export class PostgresStore implements Store {
  /** The schema every table lives in. */
  readonly schema: string;
  readonly #pool: Pool;
  /** The attempt budget's writes (`reserveAttempts`, `settleAttempts`): see `budgetPoolConfig`. */
  readonly #budgetPool: Pool;
  readonly #budget: AttemptBudget;
  readonly #bearer: BearerBatch;
  #closed = false;
  // Chains the pending audit events this store's writes record.
  readonly #sealer: AuditSealer;

  /** Wraps open pools on a migrated schema; use `openPostgresStore` rather than calling this. */
  constructor(pool: Pool, schema: string, budgetPool: Pool = pool) {
    this.#pool = pool;
    this.#budgetPool = budgetPool;
    this.schema = schema;
    this.#sealer = new AuditSealer(pool, schema);
    this.#budget = new AttemptBudget(budgetPool);
    this.#bearer = new BearerBatch(pool);
  }

  /** Runs `fn` in one READ COMMITTED transaction on one pooled connection (see `transaction`). */
  #tx<T>(fn: (c: PoolClient) => Promise<T>): Promise<T> {
    return transaction(this.#pool, fn);
  }

  /** Records `draft` as a pending event of the transaction `c` (see AuditSealer.append). */
  #append(c: PoolClient, draft: AuditEventDraft): Promise<void> {
    return this.#sealer.append(c, draft);
  }

  /** Asks for a sealing pass soon (see AuditSealer.schedule). */
  #scheduleSeal(): void {
    this.#sealer.schedule();
  }

  /** Chains every pending event committed before the call (see AuditSealer.sealPending). */
  #sealPending(): Promise<void> {
    return this.#sealer.sealPending();
  }

  /** Inserts `device` unless an active device has its key (the partial unique index decides, also between nodes). */
  async #insertDevice(c: PoolClient, device: DeviceRecord): Promise<DeviceRecord | null> {
    const row = await first<DeviceRow>(c, INSERT_DEVICE, [
      device.id,
      device.publicKey,
      device.realm,
      device.subject,
      device.name,
      device.createdAt,
    ]);
    return row === undefined ? null : toDevice(row);
  }

  async ping(): Promise<void> {
    await this.#pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    // What this node wrote is chained before it goes (another node's sealer would do it too).
    await this.#sealer.close();
    this.#closed = true;
    await this.#pool.end();
    if (this.#budgetPool !== this.#pool) await this.#budgetPool.end();
  }

  async getProject(): Promise<{ readonly projectId: string; readonly createdAt: number } | null> {
    const row = await first<{ project_id: string; created_at: number }>(this.#pool, 'SELECT project_id, created_at FROM project');
    return row === undefined ? null : { projectId: row.project_id, createdAt: row.created_at };
  }

  async initProject(input: { readonly projectId: string; readonly createdAt: number }): Promise<{ readonly projectId: string }> {
    // A concurrent insert from another node makes this one wait, then do nothing; the read
    // after it sees whichever id was committed first.
    await this.#pool.query('INSERT INTO project (singleton, project_id, created_at) VALUES (TRUE, $1, $2) ON CONFLICT DO NOTHING', [
      input.projectId,
      input.createdAt,
    ]);
    const row = await first<{ project_id: string }>(this.#pool, 'SELECT project_id FROM project');
    if (row === undefined) throw new Error('the project row vanished after it was written');
    return { projectId: row.project_id };
  }

  async issueBootstrapToken(
    input: { readonly id: string; readonly digest: string; readonly createdAt: number; readonly expiresAt: number },
    event: AuditEventDraft,
  ): Promise<void> {
    await this.#tx(async (c) => {
      // Two nodes issuing at once would each supersede only the tokens they can see and leave
      // two live ones. This self-conflicting table lock makes issuers take turns; consumers
      // (ROW EXCLUSIVE) wait for it too. Taken first, before any row lock, so it cannot deadlock.
      await c.query('LOCK TABLE bootstrap_tokens IN SHARE ROW EXCLUSIVE MODE');
      await c.query('UPDATE bootstrap_tokens SET superseded_at = $1 WHERE used_at IS NULL AND superseded_at IS NULL', [input.createdAt]);
      await c.query('INSERT INTO bootstrap_tokens (id, digest, created_at, expires_at) VALUES ($1, $2, $3, $4)', [
        input.id,
        input.digest,
        input.createdAt,
        input.expiresAt,
      ]);
      await this.#append(c, event);
    });
  }

  async consumeBootstrapToken(
    input: { readonly digest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<BootstrapOutcome> {
    return this.#tx(async (c): Promise<BootstrapOutcome> => {
      // The one conditional update that decides the winner. device_id's foreign key is
      // deferred to COMMIT, so the claim can name the device inserted just below.
      const claimed = await changes(
        c,
        `UPDATE bootstrap_tokens SET used_at = $2, device_id = $3 WHERE digest = $1 AND ${usableBootstrapSql('$2')}`,
        [input.digest, input.now, input.device.id],
      );
      if (claimed === 0) {
        // Not live: say why, in the contract's order. States only move away from live, so
        // this later read cannot find a live token the update missed.
        const token = await first<{ used_at: number | null; superseded_at: number | null; expires_at: number }>(
          c,
          'SELECT used_at, superseded_at, expires_at FROM bootstrap_tokens WHERE digest = $1',
          [input.digest],
        );
        const decision = decideBootstrapConsumption(
          token && { usedAt: token.used_at, supersededAt: token.superseded_at, expiresAt: token.expires_at },
          // The key is checked by the insert below, after the claim: the same order as core's rule.
          { now: input.now, keyTaken: false },
        );
        return decision.kind === 'consume' ? { kind: 'unknown' } : decision;
      }
      const device = await this.#insertDevice(c, input.device);
      // The key is taken: undo the claim, the token stays usable for another key.
      if (device === null) return rollback({ kind: 'already_enrolled' });
      await this.#append(c, event);
      return { kind: 'enrolled', device };
    });
  }

  async enrollDevice(device: DeviceRecord, event: AuditEventDraft): Promise<'enrolled' | 'already_enrolled'> {
    return this.#tx(async (c) => {
      if ((await this.#insertDevice(c, device)) === null) return 'already_enrolled';
      await this.#append(c, event);
      return 'enrolled';
    });
  }

  async findDeviceByPublicKey(publicKey: string): Promise<DeviceRecord | null> {
    const row = await first<DeviceRow>(
      this.#pool,
      { name: 'svc_device_by_key', text: `SELECT ${DEVICE_COLUMNS} FROM devices WHERE public_key = $1 AND removed_at IS NULL` },
      [publicKey],
    );
    return row === undefined ? null : toDevice(row);
  }

  async getDevice(id: string): Promise<DeviceRecord | null> {
    const row = await first<DeviceRow>(this.#pool, `SELECT ${DEVICE_COLUMNS} FROM devices WHERE id = $1`, [id]);
    return row === undefined ? null : toDevice(row);
  }

  async listDevices(filter: { readonly realm?: Realm; readonly subject?: string }): Promise<readonly DeviceRecord[]> {
    const list = await rows<DeviceRow>(
      this.#pool,
      `SELECT ${DEVICE_COLUMNS} FROM devices
       WHERE removed_at IS NULL AND ($1::text IS NULL OR realm = $1) AND ($2::text IS NULL OR subject = $2)
       ORDER BY created_at, id`,
      [filter.realm ?? null, filter.subject ?? null],
    );
    return list.map(toDevice);
  }

  async countDevices(realm: Realm): Promise<number> {
    const row = await first<{ n: number }>(this.#pool, 'SELECT COUNT(*) AS n FROM devices WHERE realm = $1 AND removed_at IS NULL', [
      realm,
    ]);
    return row?.n ?? 0;
  }

  async removeDevice(
    input: { readonly deviceId: string; readonly now: number; readonly keepLast?: boolean },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly last?: true }> {
    return this.#tx(async (c) => {
      if (input.keepLast === true) {
        // Lock every active device of the realm (in id order, so two removals never deadlock):
        // a concurrent removal waits here, then re-reads the rows the winner changed and no
        // longer counts the device it removed. READ COMMITTED alone would let both count two.
        const realm = await first<{ realm: string }>(c, 'SELECT realm FROM devices WHERE id = $1 AND removed_at IS NULL', [input.deviceId]);
        if (realm !== undefined) {
          const active = await rows<{ id: string }>(
            c,
            'SELECT id FROM devices WHERE realm = $1 AND removed_at IS NULL ORDER BY id FOR UPDATE',
            [realm.realm],
          );
          const decision = decideDeviceRemoval({
            active: active.some((d) => d.id === input.deviceId),
            activeInRealm: active.length,
            keepLast: true,
          });
          if (decision === 'last') return { removed: false, revokedSessions: 0, last: true as const };
          if (decision === 'not_found') return { removed: false, revokedSessions: 0 };
        }
      }
      const removed = await changes(c, 'UPDATE devices SET removed_at = $2 WHERE id = $1 AND removed_at IS NULL', [
        input.deviceId,
        input.now,
      ]);
      if (removed === 0) return { removed: false, revokedSessions: 0 };
      const revokedSessions = await changes(
        c,
        `UPDATE sessions SET revoked_at = $2, revoked_reason = $3, prev_successor = NULL WHERE device_id = $1 AND ${liveSessionSql('$2')}`,
        [input.deviceId, input.now, REVOKED_DEVICE_REMOVED],
      );
      await this.#append(c, event);
      return { removed: true, revokedSessions };
    });
  }

  async createChallenge(challenge: ChallengeRecord): Promise<void> {
    // Expired challenges can never be consumed again, so they are only clutter. SKIP LOCKED
    // lets nodes prune side by side without waiting for (or deadlocking on) each other. The ids
    // go by value (= ANY(ARRAY(...))), not as a join: its plan is primary-key probes whatever
    // the statistics say, where a semi-join's cached plan could scan the whole table each time.
    await run(
      this.#pool,
      {
        name: 'svc_create_challenge',
        text: `WITH pruned AS (
           DELETE FROM challenges WHERE id = ANY(ARRAY(
             SELECT id FROM challenges WHERE expires_at <= $5 ORDER BY expires_at LIMIT 500 FOR UPDATE SKIP LOCKED
           ))
         )
         INSERT INTO challenges (${CHALLENGE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)`,
      },
      [challenge.id, challenge.publicKey, challenge.realm, challenge.challenge, challenge.createdAt, challenge.expiresAt],
    );
  }

  async consumeChallenge(input: { readonly id: string; readonly now: number }): Promise<ChallengeRecord | null> {
    // One conditional UPDATE ... RETURNING: the first caller flips used_at; every concurrent
    // one blocks on the row, re-checks the WHERE against the committed row and matches nothing.
    const row = await first<ChallengeRow>(
      this.#pool,
      // A challenge dated in the future (a clock stepped back) cannot be aged: refused.
      {
        name: 'svc_consume_challenge',
        text: `UPDATE challenges SET used_at = $2 WHERE id = $1 AND ${consumableChallengeSql('$2', '$3')} RETURNING ${CHALLENGE_COLUMNS}`,
      },
      [input.id, input.now, latestTrustedTime(input.now)],
    );
    return row === undefined ? null : toChallenge(row);
  }

  async createSession(session: SessionRecord, pair: TokenPairDigests, event: AuditEventDraft): Promise<boolean> {
    // One statement, so one round trip and its own transaction: the device row's share lock, the
    // session and its pending event commit together or not at all. A concurrent removeDevice
    // (which updates the device row) either waits for this session and revokes it, or commits
    // first, and then FOR SHARE re-reads the removed row, selects nothing and nothing is inserted.
    const created = await first<{ n: number }>(
      this.#pool,
      {
        name: 'svc_create_session',
        text: `WITH live AS (
         SELECT id FROM devices WHERE id = $4 AND removed_at IS NULL FOR SHARE
       ), created AS (
         INSERT INTO sessions (${NEW_SESSION_COLUMNS})
         SELECT $1, $2, $3, live.id, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18 FROM live
         RETURNING id
       ), audited AS (
         INSERT INTO audit_pending (${PENDING_COLUMNS}) SELECT ${pendingParams(19)} FROM created
       )
       SELECT count(*)::int AS n FROM created`,
      },
      [...sessionValues(session, pair), ...pendingValues(event)],
    );
    if (created?.n !== 1) return false;
    this.#scheduleSeal();
    return true;
  }

  async #insertSession(c: PoolClient, session: SessionRecord, pair: TokenPairDigests): Promise<void> {
    await c.query(
      `INSERT INTO sessions (${NEW_SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
      sessionValues(session, pair),
    );
  }

  /** The bearer check: see BearerBatch (the checks of one event-loop turn share one query). */
  findSessionByAccessDigest(sessionId: string, digest: string): Promise<SessionRecord | null> {
    return this.#bearer.find(sessionId, digest);
  }

  async getSession(id: string): Promise<SessionRecord | null> {
    const row = await first<SessionRow>(this.#pool, `SELECT ${SESSION_COLUMNS} FROM sessions WHERE id = $1`, [id]);
    return row === undefined ? null : toSession(row);
  }

  async listActiveSessions(filter: {
    readonly now: number;
    readonly realm?: Realm;
    readonly deviceId?: string;
    readonly subject?: string;
  }): Promise<readonly SessionRecord[]> {
    const list = await rows<SessionRow>(
      this.#pool,
      `SELECT ${SESSION_COLUMNS} FROM sessions
       WHERE ${activeSessionSql('$1')}
         AND ($2::text IS NULL OR realm = $2) AND ($3::text IS NULL OR device_id = $3)
         AND ($4::text IS NULL OR subject = $4)
       ORDER BY created_at DESC, id DESC`,
      [filter.now, filter.realm ?? null, filter.deviceId ?? null, filter.subject ?? null],
    );
    return list.map(toSession);
  }

  async rotateRefreshToken(
    input: Parameters<Store['rotateRefreshToken']>[0],
    audit: (outcome: Exclude<RotationOutcome, { kind: 'invalid' }>) => AuditEventDraft,
  ): Promise<RotationOutcome> {
    const { sessionId, presentedDigest, now, next } = input;
    return this.#tx(async (c): Promise<RotationOutcome> => {
      // The lock that serialises every presentation of this session's tokens, on every node:
      // a waiter wakes up with the row as the winner committed it and decides on that.
      const s = await first<RefreshRow>(
        c,
        { name: 'svc_lock_refresh', text: `SELECT ${REFRESH_COLUMNS} FROM sessions WHERE id = $1 FOR UPDATE` },
        [sessionId],
      );
      // The rule and the outcome are core's; this only writes what the plan says.
      let plan = planRotation(s, input);
      if (s !== undefined && plan.kind === 'check_retired') {
        const retired = await first(c, 'SELECT 1 FROM retired_refresh_tokens WHERE session_id = $1 AND digest = $2', [
          s.id,
          presentedDigest,
        ]);
        plan = planRotation(s, input, retired !== undefined);
      }
      if (s === undefined || plan.kind === 'invalid' || plan.kind === 'check_retired') return INVALID;
      switch (plan.kind) {
        case 'rotate': {
          // One statement for the whole change: the retired token, the new pair and the event,
          // which is built from the row this transaction locked (no re-read).
          const { outcome } = plan;
          const row = await first<{ generation: number }>(
            c,
            {
              name: 'svc_rotate',
              text: `WITH retired AS (
               INSERT INTO retired_refresh_tokens (session_id, digest, retired_at) SELECT $1, $10::text, $7 WHERE $10::text IS NOT NULL
             ), rotated AS (${SET_PAIR}), audited AS (
               INSERT INTO audit_pending (${PENDING_COLUMNS}) SELECT ${pendingParams(11)} FROM rotated
             )
             SELECT generation FROM rotated`,
            },
            [
              s.id,
              next.accessDigest,
              plan.accessExpiresAt,
              next.refreshDigest,
              plan.refreshExpiresAt,
              s.refresh_digest,
              now,
              now,
              input.sealedSuccessor,
              plan.retire,
              ...pendingValues(audit(outcome)),
            ],
          );
          if (row === undefined) throw new Error(`session ${s.id} vanished while locked`);
          if (row.generation !== outcome.session.generation) {
            throw new Error(`session ${s.id} is at generation ${row.generation}, not ${outcome.session.generation}, after its rotation`);
          }
          this.#scheduleSeal();
          return outcome;
        }
        case 'replay':
          await this.#append(c, audit(plan.outcome));
          return plan.outcome;
        case 'reuse': {
          const row = await first<SessionRow>(c, REVOKE_SESSION, [s.id, now, REVOKED_REFRESH_REUSED]);
          if (row === undefined) return INVALID;
          await this.#append(c, audit(plan.outcome));
          return plan.outcome;
        }
      }
    });
  }

  async revokeSession(
    input: { readonly sessionId: string; readonly now: number; readonly reason: string },
    event: AuditEventDraft,
  ): Promise<boolean> {
    return this.#tx(async (c) => {
      if ((await changes(c, REVOKE_SESSION, [input.sessionId, input.now, input.reason])) === 0) return false;
      await this.#append(c, event);
      return true;
    });
  }

  async pruneRetiredRefreshTokens(input: Parameters<Store['pruneRetiredRefreshTokens']>[0]): Promise<number> {
    return this.#tx(async (c) => {
      // Maintenance over up to 10 minutes of rotations, not a request: it is exempt from the
      // request bounds, or a large backlog would time out on every run and then only grow.
      await c.query(`SET LOCAL statement_timeout = ${MAINTENANCE_TIMEOUT_MS}`);
      // Found by the partial index sessions_grace_pair (migration 012): only rows still holding a pair.
      await c.query({
        text: `UPDATE sessions SET prev_successor = NULL WHERE ${gracePairEndedSql('$1')}`,
        values: [input.graceEndedBefore],
        query_timeout: MAINTENANCE_TIMEOUT_MS + 5_000,
      } as QueryConfig);
      const result = await c.query({
        // Driven by the (small) retired table, one primary-key probe per row, never a scan of sessions.
        text: `DELETE FROM retired_refresh_tokens r WHERE r.retired_at < $2
           OR EXISTS (SELECT 1 FROM sessions s WHERE s.id = r.session_id AND NOT (${liveSessionSql('$1', 's.')}))`,
        values: [input.now, input.retiredBefore],
        // pg honours a per-query query_timeout (its types only declare it on the client config).
        query_timeout: MAINTENANCE_TIMEOUT_MS + 5_000,
      } as QueryConfig);
      return result.rowCount ?? 0;
    });
  }

  async appendAuditEvent(event: AuditEventDraft): Promise<AuditEvent> {
    await this.#tx((c) => this.#append(c, event));
    // The caller gets the event as chained: sealed now (with whatever else is pending).
    await this.#sealPending();
    const row = await first<EventRow>(this.#pool, `SELECT ${EVENT_COLUMNS} FROM audit_events WHERE id = $1`, [event.id]);
    if (row === undefined) throw new Error(`audit event ${event.id} was not chained`);
    return toEvent(row);
  }

  async listAuditEvents(input: { readonly afterSeq: number; readonly limit: number }): Promise<readonly AuditEvent[]> {
    await this.#sealPending();
    const page = auditPage(input);
    const list = await rows<EventRow>(this.#pool, `SELECT ${EVENT_COLUMNS} FROM audit_events WHERE seq > $1 ORDER BY seq LIMIT $2`, [
      page.afterSeq,
      page.limit,
    ]);
    return list.map(toEvent);
  }

  async auditHead(): Promise<{ readonly seq: number; readonly hash: string } | null> {
    await this.#sealPending();
    const head = await first<{ seq: number; hash: string }>(this.#pool, 'SELECT seq, hash FROM audit_head');
    return head === undefined || head.seq === 0 ? null : { seq: head.seq, hash: head.hash };
  }

  async createPairingIntent(intent: PairingIntentRecord, event: AuditEventDraft): Promise<void> {
    await this.#tx(async (c) => {
      await c.query(`INSERT INTO pairing_intents (${INTENT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`, [
        intent.id,
        intent.realm,
        intent.subject,
        intent.name,
        intent.codeDigest,
        intent.createdAt,
        intent.expiresAt,
        intent.createdBy,
        intent.failures,
        intent.completedAt,
        intent.burnedAt,
        intent.deviceId,
      ]);
      await this.#append(c, event);
    });
  }

  async getPairingIntent(id: string): Promise<PairingIntentRecord | null> {
    const row = await first<IntentRow>(this.#pool, `SELECT ${INTENT_COLUMNS} FROM pairing_intents WHERE id = $1`, [id]);
    return row === undefined ? null : toIntent(row);
  }

  async recordPairingFailure(
    input: { readonly id: string; readonly now: number; readonly maxFailures: number },
    event: (failures: number, burned: boolean) => AuditEventDraft,
  ): Promise<{ readonly failures: number; readonly burned: boolean } | null> {
    return this.#tx(async (c) => {
      // failures + 1 is computed on the row as committed, so concurrent wrong codes on several
      // nodes each count once and exactly one of them burns the intent.
      const row = await first<{ failures: number; burned_at: number | null }>(
        c,
        `UPDATE pairing_intents ${pairingFailureSql({ id: '$1', now: '$2', maxFailures: '$3' })} RETURNING failures, burned_at`,
        [input.id, input.now, input.maxFailures],
      );
      if (row === undefined) return null;
      const result = { failures: row.failures, burned: row.burned_at !== null };
      await this.#append(c, event(result.failures, result.burned));
      return result;
    });
  }

  async completePairing(
    input: { readonly id: string; readonly codeDigest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<PairingCompletion> {
    return this.#tx(async (c): Promise<PairingCompletion> => {
      // The one conditional update that decides the winner (device_id's foreign key is checked at COMMIT).
      const claimed = await changes(
        c,
        `UPDATE pairing_intents SET completed_at = $3, device_id = $4 WHERE id = $1 AND code_digest = $2 AND ${liveIntentSql('$3')}`,
        [input.id, input.codeDigest, input.now, input.device.id],
      );
      if (claimed === 0) return { kind: 'invalid' };
      const device = await this.#insertDevice(c, input.device);
      // The intent stays live when the key is taken, like a bootstrap token: the admin's code is not wasted.
      if (device === null) return rollback({ kind: 'already_enrolled' });
      await this.#append(c, event);
      return { kind: 'completed', device };
    });
  }

  async pruneEndedRecords(input: {
    readonly endedBefore: number;
  }): Promise<{ readonly sessions: number; readonly pairingIntents: number }> {
    const total = { sessions: 0, pairingIntents: 0 };
    // In batches, each its own short transaction: a first run over a large backlog stays far
    // inside the statement timeout and never holds many row locks for long.
    for (;;) {
      const batch = await this.#tx(async (c) => {
        // One statement: the retired digests and their sessions go together (the foreign key
        // is checked at the end of the statement).
        const sessions = await changes(
          c,
          `WITH ended AS (
             SELECT id FROM sessions WHERE expires_at <= $1 UNION SELECT id FROM sessions WHERE revoked_at <= $1 LIMIT $2
           ), retired AS (
             DELETE FROM retired_refresh_tokens WHERE session_id IN (SELECT id FROM ended)
           )
           DELETE FROM sessions WHERE id IN (SELECT id FROM ended)`,
          [input.endedBefore, PRUNE_BATCH],
        );
        const pairingIntents = await changes(
          c,
          'DELETE FROM pairing_intents WHERE id IN (SELECT id FROM pairing_intents WHERE expires_at <= $1 LIMIT $2)',
          [input.endedBefore, PRUNE_BATCH],
        );
        return { sessions, pairingIntents };
      });
      total.sessions += batch.sessions;
      total.pairingIntents += batch.pairingIntents;
      if (batch.sessions < PRUNE_BATCH && batch.pairingIntents < PRUNE_BATCH) return total;
    }
  }

  async stats(now: number): Promise<StoreStats> {
    await this.#sealPending();
    const client = await this.#pool.connect();
    // As in #tx: a checked-out client needs its own 'error' listener.
    let broken: Error | undefined;
    const onError = (err: Error) => {
      broken ??= err;
    };
    client.on('error', onError);
    try {
      // One snapshot, so the counters describe a single moment.
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const sql = statsSql('$1');
      const devices = await rows<RealmCountRow>(client, sql.devices);
      const activeSessions = await rows<RealmCountRow>(client, sql.sessions, [now]);
      const events = await rows<{ type: string; n: number }>(client, sql.events);
      const head = await first<{ seq: number; hash: string }>(client, 'SELECT seq, hash FROM audit_head');
      await client.query('COMMIT');
      // The head row of an empty trail holds seq 0.
      return toStoreStats({ devices, activeSessions, events, head: head === undefined || head.seq === 0 ? undefined : head });
    } catch (err) {
      if (broken === undefined && postgresFault(err) === null) {
        await client.query('ROLLBACK').catch((rollbackError: Error) => {
          broken = rollbackError;
        });
      } else {
        broken ??= err as Error;
      }
      throw err;
    } finally {
      client.removeListener('error', onError);
      client.release(broken);
    }
  }

  async createLink(
    link: LinkRecord,
    event: AuditEventDraft,
    pairing?: Parameters<Store['createLink']>[2],
  ): Promise<'created' | 'already_linked' | 'intent_invalid'> {
    return this.#tx(async (c): Promise<'created' | 'already_linked' | 'intent_invalid'> => {
      if (pairing !== undefined) {
        // The one conditional update that decides which link completes the intent (device_id
        // stays null: it names devices only; the link.created event names the intent).
        const claimed = await changes(
          c,
          `UPDATE pairing_intents SET completed_at = $3 WHERE id = $1 AND code_digest = $2 AND ${liveIntentSql('$3')}`,
          [pairing.id, pairing.codeDigest, pairing.now],
        );
        if (claimed === 0) return 'intent_invalid';
      }
      // The partial unique index decides, also between nodes: a concurrent insert of the same
      // identity waits for this one's commit, then does nothing.
      const inserted = await changes(
        c,
        `INSERT INTO links (${LINK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL)
         ON CONFLICT (realm, issuer, external_subject) WHERE removed_at IS NULL DO NOTHING`,
        [
          link.id,
          link.realm,
          link.subject,
          link.provider,
          link.issuer,
          link.externalSubject,
          link.credentialData,
          link.counter,
          link.name,
          link.createdAt,
          link.lastUsedAt,
        ],
      );
      // With an intent, its completion above goes back too: the code is not wasted.
      if (inserted === 0) return pairing === undefined ? 'already_linked' : rollback('already_linked' as const);
      await this.#append(c, event);
      return 'created';
    });
  }

  async getLink(id: string): Promise<LinkRecord | null> {
    const row = await first<LinkRow>(this.#pool, `SELECT ${LINK_COLUMNS} FROM links WHERE id = $1`, [id]);
    return row === undefined ? null : toLink(row);
  }

  async findLiveLink(input: {
    readonly realm: Realm;
    readonly issuer: string;
    readonly externalSubject: string;
  }): Promise<LinkRecord | null> {
    const row = await first<LinkRow>(
      this.#pool,
      `SELECT ${LINK_COLUMNS} FROM links WHERE realm = $1 AND issuer = $2 AND external_subject = $3 AND removed_at IS NULL`,
      [input.realm, input.issuer, input.externalSubject],
    );
    return row === undefined ? null : toLink(row);
  }

  async listLinks(filter: {
    readonly realm?: Realm;
    readonly subject?: string;
    readonly provider?: string;
  }): Promise<readonly LinkRecord[]> {
    const list = await rows<LinkRow>(
      this.#pool,
      `SELECT ${LINK_COLUMNS} FROM links
       WHERE removed_at IS NULL AND ($1::text IS NULL OR realm = $1) AND ($2::text IS NULL OR subject = $2)
         AND ($3::text IS NULL OR provider = $3)
       ORDER BY created_at, id`,
      [filter.realm ?? null, filter.subject ?? null, filter.provider ?? null],
    );
    return list.map(toLink);
  }

  async removeLink(
    input: { readonly linkId: string; readonly now: number },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number }> {
    return this.#tx(async (c) => {
      // The row lock this update takes makes a concurrent createLinkSession wait, then see the link removed.
      const removed = await changes(c, 'UPDATE links SET removed_at = $2 WHERE id = $1 AND removed_at IS NULL', [input.linkId, input.now]);
      if (removed === 0) return { removed: false, revokedSessions: 0 };
      const revokedSessions = await changes(
        c,
        `UPDATE sessions SET revoked_at = $2, revoked_reason = $3, prev_successor = NULL WHERE device_id = $1 AND ${liveSessionSql('$2')}`,
        [input.linkId, input.now, REVOKED_LINK_REMOVED],
      );
      await this.#append(c, event);
      return { removed: true, revokedSessions };
    });
  }

  async createLinkSession(
    input: Parameters<Store['createLinkSession']>[0],
    events: readonly AuditEventDraft[],
  ): Promise<LinkSessionOutcome> {
    const { session, now } = input;
    return this.#tx(async (c): Promise<LinkSessionOutcome> => {
      // The one conditional update that decides: it locks the link row, so a concurrent removal
      // either waits for this session (and then revokes it) or commits first (and this matches
      // nothing); concurrent sign-ins presenting the same counter re-check the WHERE against the
      // winner's committed counter, and only one matches.
      const used =
        input.counter === 'unchanged'
          ? await changes(c, 'UPDATE links SET last_used_at = $2 WHERE id = $1 AND removed_at IS NULL', [session.deviceId, now])
          : await changes(
              c,
              `UPDATE links SET counter = $3, last_used_at = $2 WHERE id = $1 AND removed_at IS NULL AND ${counterAdvanceSql('$3::bigint')}`,
              [session.deviceId, now, input.counter],
            );
      if (used === 0) {
        const link = await first<{ removed_at: number | null; counter: number | null }>(
          c,
          'SELECT removed_at, counter FROM links WHERE id = $1',
          [session.deviceId],
        );
        if (link === undefined || link.removed_at !== null) return { kind: 'link_removed' };
        return { kind: 'counter_regressed', stored: link.counter };
      }
      await this.#insertSession(c, session, input.pair);
      for (const event of events) await this.#append(c, event);
      return { kind: 'created' };
    });
  }

  async createFlow(flow: FlowRecord): Promise<void> {
    // Expired flows can never be consumed, so they are only clutter. SKIP LOCKED lets nodes
    // prune side by side without waiting for each other.
    await this.#pool.query(
      `WITH pruned AS (
         DELETE FROM flows WHERE id = ANY(ARRAY(
           SELECT id FROM flows WHERE expires_at <= $8 ORDER BY expires_at LIMIT 500 FOR UPDATE SKIP LOCKED)
         )
       )
       INSERT INTO flows (${FLOW_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [flow.id, flow.provider, flow.realm, flow.intent, flow.subject, flow.pairingIntentId, flow.state, flow.createdAt, flow.expiresAt],
    );
  }

  async consumeFlow(input: { readonly id: string; readonly now: number }): Promise<FlowRecord | null> {
    // One conditional UPDATE ... RETURNING: the first caller flips consumed_at; every concurrent
    // one blocks on the row, re-checks the WHERE against the committed row and matches nothing.
    const row = await first<FlowRow>(
      this.#pool,
      `UPDATE flows SET consumed_at = $2 WHERE id = $1 AND ${consumableFlowSql('$2', '$3')} RETURNING ${FLOW_COLUMNS}`,
      [input.id, input.now, latestTrustedTime(input.now)],
    );
    return row === undefined ? null : toFlow(row);
  }

  async useDpopProof(input: { readonly key: string; readonly expiresAt: number; readonly now: number }): Promise<boolean> {
    // One statement: the INSERT, or the UPDATE of an expired record of the key, returns a row for
    // exactly one of N concurrent callers on any node (a loser waits on the winner's row, then its
    // ON CONFLICT sees a live record and changes nothing). Expired records of other keys are
    // pruned along the way, SKIP LOCKED so nodes never wait on each other for it.
    const used = await first<{ n: number }>(
      this.#pool,
      {
        name: 'svc_use_dpop_proof',
        text: `WITH pruned AS (
           DELETE FROM dpop_proofs WHERE proof_key = ANY(ARRAY(
             SELECT proof_key FROM dpop_proofs WHERE expires_at <= $3 AND proof_key <> $1
             ORDER BY expires_at LIMIT 500 FOR UPDATE SKIP LOCKED
           ))
         )
         INSERT INTO dpop_proofs (proof_key, expires_at) VALUES ($1, $2)
         ON CONFLICT (proof_key) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE dpop_proofs.expires_at <= $3
         RETURNING 1 AS n`,
      },
      [input.key, input.expiresAt, input.now],
    );
    return used !== undefined;
  }

  async hasDpopRecord(input: { readonly key: string; readonly now: number }): Promise<boolean> {
    const row = await first<{ n: number }>(
      this.#pool,
      { name: 'svc_has_dpop_record', text: 'SELECT 1 AS n FROM dpop_proofs WHERE proof_key = $1 AND expires_at > $2' },
      [input.key, input.now],
    );
    return row !== undefined;
  }

  async reserveAttempts(input: Parameters<Store['reserveAttempts']>[0]): Promise<AttemptReservation> {
    return this.#budget.reserve(input);
  }

  async settleAttempts(input: Parameters<Store['settleAttempts']>[0]): Promise<void> {
    return this.#budget.settle(input);
  }
}

// Outages (connection lost, timeouts, lock waits, disk full) become `503 store_unavailable`
// with the fault named, in every operation.
classifyStoreErrors(PostgresStore.prototype, STORE_OPERATIONS, postgresFault);

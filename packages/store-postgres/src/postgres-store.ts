import type { AuditEvent, AuditEventDraft, Realm } from '@svc/core';
import type { ControlStateRow, ExportOptions, ImportOutcome } from '@svc/core/store';
import {
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
  type TokenPairDigests,
  type UserChange,
  type UserChangeContext,
  type UserChangeOutcome,
  type UserFilter,
  type UserRecord,
} from '@svc/core/store';
import type { Pool, PoolClient, QueryResult } from 'pg';
import * as assertionKeys from './assertion-keys.js';
import { AttemptBudget } from './attempt-budget.js';
import { AuditSealer } from './audit-sealer.js';
import * as auditTrail from './audit-trail.js';
import { BearerBatch } from './bearer-batch.js';
import { Challenges } from './challenges.js';
import { type PgContext, SWEEP_EVERY, type SweptTable } from './context.js';
import { exportPostgresState, importPostgresState } from './control-state.js';
import * as devices from './devices.js';
import { DpopProofs } from './dpop-proofs.js';
import { postgresFault } from './faults.js';
import * as maintenance from './maintenance.js';
import { NewSessions } from './new-sessions.js';
import * as pairing from './pairing.js';
import * as providers from './providers.js';
import { SessionReads } from './session-reads.js';
import * as sessions from './sessions.js';
import { transaction } from './sql.js';
import * as users from './users.js';

export { SEAL_DELAY_MS } from './audit-sealer.js';

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
 * - a refresh rotation plans on its session row read without a lock and writes only while the
 *   row is still as read (one statement); when it changed, or for any plan but a rotation, it
 *   locks the row (`SELECT ... FOR UPDATE`) and decides on the latest committed state, so
 *   concurrent presentations are decided one after the other;
 * - every write acknowledged was confirmed by the synchronous standby, if there is one: a
 *   transaction's COMMIT and a statement committed on its own (`runReplicated`) alike;
 * - a sign-in takes its device (or link) row, then its user row (the UPDATE recording the
 *   sign-in re-checks that the user is not disabled); a user change takes the subject's device
 *   and link rows, then the user rows it decides on (for a management user, the realm's active
 *   ones, in subject order), in the same order, so a disable or removal racing sign-ins never
 *   deadlocks and leaves no live session, and N concurrent disables of the last N leave one.
 */
export class PostgresStore implements Store {
  /** The schema every table lives in. */
  readonly schema: string;
  readonly #pool: Pool;
  /** The attempt budget's writes (`reserveAttempts`, `settleAttempts`): see `budgetPoolConfig`. */
  readonly #budgetPool: Pool;
  readonly #budget: AttemptBudget;
  readonly #bearer: BearerBatch;
  /** Sign-in challenges, stored and used up in per-turn batches (see Challenges). */
  readonly #challenges: Challenges;
  /** New sessions, created in per-turn batches (see NewSessions). */
  readonly #newSessions: NewSessions;
  /** DPoP proof records, written in per-turn batches (see DpopProofs). */
  readonly #dpopProofs: DpopProofs;
  /** Sessions read by id, in per-turn batches (see SessionReads). */
  readonly #sessionReads: SessionReads;
  /** This node's writes of each swept table since its last sweep of it (see `PgContext.sweepDue`). */
  readonly #sinceSweep = new Map<SweptTable, number>();
  // What the operation modules run with.
  readonly #ctx: PgContext;
  #closed = false;
  // Chains the pending audit events this store's writes record.
  readonly #sealer: AuditSealer;
  // The transactions of `#tx` (by their client) that recorded pending audit events.
  readonly #wrotePending = new WeakSet<PoolClient>();

  /** Wraps open pools on a migrated schema; use `openPostgresStore` rather than calling this. */
  constructor(pool: Pool, schema: string, budgetPool: Pool = pool) {
    this.#pool = pool;
    this.#budgetPool = budgetPool;
    this.schema = schema;
    this.#sealer = new AuditSealer(pool, schema);
    this.#budget = new AttemptBudget(budgetPool);
    this.#bearer = new BearerBatch(pool);
    this.#ctx = {
      schema,
      pool,
      tx: (fn, opening) => this.#tx(fn, opening),
      append: (c, draft) => this.#append(c, draft),
      wrotePending: (c) => {
        this.#wrotePending.add(c);
      },
      sealPending: () => this.#sealPending(),
      scheduleSeal: () => this.#scheduleSeal(),
      sweepDue: (table) => {
        // A node's first write of the table finds it due.
        const since = (this.#sinceSweep.get(table) ?? SWEEP_EVERY - 1) + 1;
        const due = since >= SWEEP_EVERY && pool.waitingCount === 0;
        this.#sinceSweep.set(table, due ? 0 : since);
        return due;
      },
    };
    this.#challenges = new Challenges(this.#ctx);
    this.#newSessions = new NewSessions(this.#ctx);
    this.#dpopProofs = new DpopProofs(this.#ctx);
    this.#sessionReads = new SessionReads(pool);
  }

  /**
   * Runs `fn` in one READ COMMITTED transaction on one pooled connection (see `transaction`), and
   * asks for a sealing pass after its commit when it recorded pending audit events: a pass asked
   * for before the commit could read the table before them.
   */
  async #tx<T>(fn: (c: PoolClient, opened: readonly QueryResult[]) => Promise<T>, opening?: string): Promise<T> {
    let wrote = false;
    const result = await transaction(
      this.#pool,
      async (c, opened) => {
        this.#wrotePending.delete(c);
        try {
          return await fn(c, opened);
        } finally {
          wrote = this.#wrotePending.delete(c);
        }
      },
      opening,
    );
    if (wrote) this.#sealer.schedule();
    return result;
  }

  /** Records `draft` as a pending event of the transaction `c` (see AuditSealer.append). */
  async #append(c: PoolClient, draft: AuditEventDraft): Promise<void> {
    await this.#sealer.append(c, draft);
    this.#wrotePending.add(c);
  }

  /** Asks for a sealing pass soon (see AuditSealer.schedule). */
  #scheduleSeal(): void {
    this.#sealer.schedule();
  }

  /** Chains every pending event committed before the call (see AuditSealer.sealPending). */
  #sealPending(): Promise<void> {
    return this.#sealer.sealPending();
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
    return devices.getProject(this.#ctx);
  }

  async initProject(input: { readonly projectId: string; readonly createdAt: number }): Promise<{ readonly projectId: string }> {
    return devices.initProject(this.#ctx, input);
  }

  async issueBootstrapToken(
    input: { readonly id: string; readonly digest: string; readonly createdAt: number; readonly expiresAt: number },
    event: AuditEventDraft,
  ): Promise<void> {
    return devices.issueBootstrapToken(this.#ctx, input, event);
  }

  async consumeBootstrapToken(
    input: { readonly digest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<BootstrapOutcome> {
    return devices.consumeBootstrapToken(this.#ctx, input, event);
  }

  async enrollDevice(device: DeviceRecord, event: AuditEventDraft): Promise<'enrolled' | 'already_enrolled'> {
    return devices.enrollDevice(this.#ctx, device, event);
  }

  async findDeviceByPublicKey(publicKey: string): Promise<DeviceRecord | null> {
    return devices.findDeviceByPublicKey(this.#ctx, publicKey);
  }

  async getDevice(id: string): Promise<DeviceRecord | null> {
    return devices.getDevice(this.#ctx, id);
  }

  async listDevices(filter: { readonly realm?: Realm; readonly subject?: string }): Promise<readonly DeviceRecord[]> {
    return devices.listDevices(this.#ctx, filter);
  }

  async countDevices(realm: Realm): Promise<number> {
    return devices.countDevices(this.#ctx, realm);
  }

  async removeDevice(
    input: { readonly deviceId: string; readonly now: number; readonly keepLast?: boolean },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly last?: true }> {
    return devices.removeDevice(this.#ctx, input, event);
  }

  async createChallenge(challenge: ChallengeRecord): Promise<void> {
    return this.#challenges.create(challenge);
  }

  async consumeChallenge(input: { readonly id: string; readonly now: number }): Promise<ConsumedChallenge | null> {
    return this.#challenges.consume(input);
  }

  async readChallenge(input: { readonly id: string; readonly now: number }): Promise<ConsumedChallenge | null> {
    return this.#challenges.read(input);
  }

  async createSession(
    session: SessionRecord,
    pair: TokenPairDigests,
    event: AuditEventDraft,
    challenge?: { readonly id: string; readonly now: number },
  ): Promise<SessionCreation> {
    return this.#newSessions.create({ session, pair, event, challenge });
  }

  /** The bearer check: see BearerBatch (the checks of one event-loop turn share one query). */
  findSessionByAccessDigest(sessionId: string, digest: string): Promise<SessionRecord | null> {
    return this.#bearer.find(sessionId, digest);
  }

  async getSession(id: string): Promise<SessionRecord | null> {
    return this.#sessionReads.get(id);
  }

  async listActiveSessions(filter: {
    readonly now: number;
    readonly realm?: Realm;
    readonly deviceId?: string;
    readonly subject?: string;
  }): Promise<readonly SessionRecord[]> {
    return sessions.listActiveSessions(this.#ctx, filter);
  }

  async rotateRefreshToken(
    input: Parameters<Store['rotateRefreshToken']>[0],
    audit: (outcome: AuditedRotation) => AuditEventDraft,
  ): Promise<RotationOutcome> {
    return sessions.rotateRefreshToken(this.#ctx, this.#sessionReads, input, audit);
  }

  async revokeSession(
    input: { readonly sessionId: string; readonly now: number; readonly reason: string },
    event: AuditEventDraft,
  ): Promise<boolean> {
    return sessions.revokeSession(this.#ctx, input, event);
  }

  async revokeSessionFamily(
    input: { readonly sessionId: string; readonly now: number; readonly reason: string },
    event: (session: SessionRecord) => AuditEventDraft,
  ): Promise<readonly string[]> {
    return sessions.revokeSessionFamily(this.#ctx, input, event);
  }

  async createHandoffCode(code: HandoffCodeRecord): Promise<void> {
    return sessions.createHandoffCode(this.#ctx, code);
  }

  async consumeHandoffCode(
    input: Parameters<Store['consumeHandoffCode']>[0],
    audit: (outcome: HandoffOutcome) => readonly AuditEventDraft[],
  ): Promise<HandoffOutcome> {
    return sessions.consumeHandoffCode(this.#ctx, input, audit);
  }

  async pruneRetiredRefreshTokens(input: Parameters<Store['pruneRetiredRefreshTokens']>[0]): Promise<number> {
    return sessions.pruneRetiredRefreshTokens(this.#ctx, input);
  }

  async appendAuditEvent(event: AuditEventDraft): Promise<AuditEvent> {
    return auditTrail.appendAuditEvent(this.#ctx, event);
  }

  async listAuditEvents(input: { readonly afterSeq: number; readonly limit: number }): Promise<readonly AuditEvent[]> {
    return auditTrail.listAuditEvents(this.#ctx, input);
  }

  async auditHead(): Promise<{ readonly seq: number; readonly hash: string } | null> {
    return auditTrail.auditHead(this.#ctx);
  }

  async createPairingIntent(intent: PairingIntentRecord, event: AuditEventDraft): Promise<void> {
    return pairing.createPairingIntent(this.#ctx, intent, event);
  }

  async getPairingIntent(id: string): Promise<PairingIntentRecord | null> {
    return pairing.getPairingIntent(this.#ctx, id);
  }

  async recordPairingFailure(
    input: { readonly id: string; readonly now: number; readonly maxFailures: number },
    event: (failures: number, burned: boolean) => AuditEventDraft,
  ): Promise<{ readonly failures: number; readonly burned: boolean } | null> {
    return pairing.recordPairingFailure(this.#ctx, input, event);
  }

  async completePairing(
    input: { readonly id: string; readonly codeDigest: string; readonly now: number; readonly device: DeviceRecord },
    event: AuditEventDraft,
  ): Promise<PairingCompletion> {
    return pairing.completePairing(this.#ctx, input, event);
  }

  async pruneEndedRecords(input: {
    readonly endedBefore: number;
  }): Promise<{ readonly sessions: number; readonly pairingIntents: number }> {
    return maintenance.pruneEndedRecords(this.#ctx, input);
  }

  async stats(now: number): Promise<StoreStats> {
    return maintenance.stats(this.#ctx, now);
  }

  async createLink(
    link: LinkRecord,
    event: AuditEventDraft | readonly AuditEventDraft[],
    pairing?: Parameters<Store['createLink']>[2],
    user?: UserRecord,
  ): Promise<'created' | 'already_linked' | 'intent_invalid' | 'user_disabled'> {
    return providers.createLink(this.#ctx, link, event, pairing, user);
  }

  async getLink(id: string): Promise<LinkRecord | null> {
    return providers.getLink(this.#ctx, id);
  }

  async findLiveLink(input: {
    readonly realm: Realm;
    readonly issuer: string;
    readonly externalSubject: string;
  }): Promise<LinkRecord | null> {
    return providers.findLiveLink(this.#ctx, input);
  }

  async listLinks(filter: {
    readonly realm?: Realm;
    readonly subject?: string;
    readonly provider?: string;
  }): Promise<readonly LinkRecord[]> {
    return providers.listLinks(this.#ctx, filter);
  }

  async removeLink(
    input: { readonly linkId: string; readonly now: number; readonly keepAnotherWayIn?: boolean },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly lastWayIn?: boolean }> {
    return providers.removeLink(this.#ctx, input, event);
  }

  async renameLink(input: { readonly linkId: string; readonly name: string }, event: AuditEventDraft): Promise<boolean> {
    return providers.renameLink(this.#ctx, input, event);
  }

  async createLinkSession(
    input: Parameters<Store['createLinkSession']>[0],
    events: readonly AuditEventDraft[],
  ): Promise<LinkSessionOutcome> {
    return providers.createLinkSession(this.#ctx, input, events);
  }

  async createFlow(flow: FlowRecord): Promise<void> {
    return providers.createFlow(this.#ctx, flow);
  }

  async consumeFlow(input: { readonly id: string; readonly now: number }): Promise<FlowRecord | null> {
    return providers.consumeFlow(this.#ctx, input);
  }

  async useDpopProof(input: { readonly key: string; readonly expiresAt: number; readonly now: number }): Promise<boolean> {
    return this.#dpopProofs.use(input);
  }

  async hasDpopRecord(input: { readonly key: string; readonly now: number }): Promise<boolean> {
    return sessions.hasDpopRecord(this.#ctx, input);
  }

  async getUser(subject: string): Promise<UserRecord | null> {
    return users.getUser(this.#ctx, subject);
  }

  async listUsers(filter: UserFilter): Promise<readonly UserRecord[]> {
    return users.listUsers(this.#ctx, filter);
  }

  async createUser(user: UserRecord, event: AuditEventDraft): Promise<'created' | 'exists' | 'user_name_taken'> {
    return users.createUser(this.#ctx, user, event);
  }

  async changeUser(
    input: { readonly subject: string; readonly now: number },
    decide: (current: UserRecord, context: UserChangeContext) => UserChange,
  ): Promise<UserChangeOutcome | { readonly kind: 'user_name_taken' }> {
    return users.changeUser(this.#ctx, input, decide);
  }

  async listGroups(filter: { readonly realm?: Realm }): Promise<readonly GroupSummary[]> {
    return users.listGroups(this.#ctx, filter);
  }

  async getGroup(id: string): Promise<GroupRecord | null> {
    return users.getGroup(this.#ctx, id);
  }

  async saveGroup(group: GroupRecord, event: AuditEventDraft): Promise<'saved' | 'name_taken'> {
    return users.saveGroup(this.#ctx, group, event);
  }

  async deleteGroup(input: { readonly id: string; readonly now: number }, event: AuditEventDraft): Promise<boolean> {
    return users.deleteGroup(this.#ctx, input, event);
  }

  async createScimToken(token: ScimTokenRecord, event: AuditEventDraft): Promise<void> {
    return users.createScimToken(this.#ctx, token, event);
  }

  async useScimToken(input: { readonly digest: string; readonly now: number }): Promise<ScimTokenRecord | null> {
    return users.useScimToken(this.#ctx, input);
  }

  async listScimTokens(): Promise<readonly ScimTokenRecord[]> {
    return users.listScimTokens(this.#ctx);
  }

  async revokeScimToken(input: { readonly id: string; readonly now: number }, event: AuditEventDraft): Promise<boolean> {
    return users.revokeScimToken(this.#ctx, input, event);
  }

  /** The control state in one REPEATABLE READ snapshot (see `exportPostgresState`). */
  async exportState(opts: ExportOptions): Promise<AsyncIterable<ControlStateRow>> {
    return exportPostgresState(this.#ctx, opts);
  }

  /** An export into this empty schema, in one transaction (see `importPostgresState`). */
  async importState(rows: AsyncIterable<ControlStateRow>): Promise<ImportOutcome> {
    return importPostgresState(this.#ctx, rows);
  }

  async getAssertionKeys(): Promise<AssertionKeysRecord | null> {
    return assertionKeys.getAssertionKeys(this.#ctx);
  }

  async saveAssertionKeys(
    input: { readonly expectedVersion: number; readonly keySet: string; readonly now: number },
    events: readonly AuditEventDraft[],
  ): Promise<AssertionKeysSave> {
    return assertionKeys.saveAssertionKeys(this.#ctx, input, events);
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

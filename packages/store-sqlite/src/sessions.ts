// The SQLite store's operations on challenges, sessions and their rotation, DPoP proofs (see `SqliteStore`, whose methods call these).
import { type AuditEventDraft, digestsEqual, type Realm } from '@svc/core';
import {
  activeSessionSql,
  CHALLENGE_COLUMNS,
  consumableChallengeSql,
  gracePairEndedSql,
  HANDOFF_CODE_COLUMNS,
  liveSessionSql,
  NEW_SESSION_COLUMNS,
  type NewSessionValues,
  newSessionValues,
  REFRESH_COLUMNS,
  SESSION_COLUMNS,
} from '@svc/core/sql-rows';
import {
  type AuditedRotation,
  type ChallengeRecord,
  type ConsumedChallenge,
  consumedChallenge,
  decideHandoff,
  type HandoffCodeRecord,
  type HandoffCodeRow,
  type HandoffOutcome,
  latestTrustedTime,
  PROOF_REPLAYED,
  PROOF_REQUIRED,
  planRotation,
  REVOKED_REFRESH_REUSED,
  type RotationOutcome,
  rotationProof,
  type SessionCreation,
  type SessionRecord,
  type SessionRow,
  type Store,
  type TokenPairDigests,
  toChallenge,
  toDevice,
  toHandoffCode,
  toSession,
} from '@svc/core/store';
import type Database from 'better-sqlite3';
import type { SqliteContext } from './context.js';
import { DpopReplayLog } from './dpop-replay.js';
import {
  CHALLENGE_TUPLE,
  type ChallengeTuple,
  challengeRowOf,
  inColumnOrder,
  type PairUpdate,
  REFRESH_TUPLE,
  type RefreshTuple,
  refreshRowOf,
} from './rows.js';

const INVALID: RotationOutcome = Object.freeze({ kind: 'invalid' });

/** The statements of this module, prepared once per connection. */
function prepare(db: Database.Database) {
  // Each statement declares its parameters and row, so reads need no casts.
  const p = <Params extends unknown[] | object = [], Row = unknown>(sql: string) => db.prepare<Params, Row>(sql);
  return {
    // Expired challenges nobody answered (a used one goes when it is used): only clutter.
    pruneChallenges: p<[number]>('DELETE FROM challenges WHERE expires_at <= ?'),
    // The statements of every sign-in take positional parameters (see PairUpdate) and answer arrays (see inColumnOrder).
    insertChallenge: p<[id: string, publicKey: string, realm: Realm, challenge: string, createdAt: number, expiresAt: number]>(
      'INSERT INTO challenges (id, public_key, realm, challenge, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    // A challenge dated in the future (the clock was stepped back) cannot be aged: refused. Named
    // parameters here: core's fragment places them, in an order this statement must not assume.
    consumeChallenge: inColumnOrder(
      p<{ id: string; now: number; latest: number }, ChallengeTuple>(
        `DELETE FROM challenges WHERE id = @id AND ${consumableChallengeSql('@now', '@latest')} RETURNING ${CHALLENGE_COLUMNS}`,
      ),
      CHALLENGE_TUPLE,
    ),
    // The same challenge read without using it up (a sign-in checks its signature in between).
    readChallenge: inColumnOrder(
      p<{ id: string; now: number; latest: number }, ChallengeTuple>(
        `SELECT ${CHALLENGE_COLUMNS} FROM challenges WHERE id = @id AND ${consumableChallengeSql('@now', '@latest')}`,
      ),
      CHALLENGE_TUPLE,
    ),
    // The same challenge used up in its sign-in's session transaction: only whether it was.
    useChallenge: p<{ id: string; now: number; latest: number }>(
      `DELETE FROM challenges WHERE id = @id AND ${consumableChallengeSql('@now', '@latest')}`,
    ),
    // Core's new-session values in NEW_SESSION_COLUMNS' order, then a handed-off session's parent.
    insertSession: p<[...NewSessionValues, parentId: string | null]>(
      `INSERT INTO sessions (${NEW_SESSION_COLUMNS}, parent_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    // Whether the device is active (1), removed (0) or unknown (undefined).
    deviceActive: p<[string], number>('SELECT removed_at IS NULL FROM devices WHERE id = ?').pluck(true),
    // The named session and the sessions handed off from it, each not yet revoked; the named one first.
    sessionFamily: p<{ id: string }, SessionRow>(
      `SELECT ${SESSION_COLUMNS} FROM sessions WHERE (id = @id OR parent_id = @id) AND revoked_at IS NULL
       ORDER BY CASE WHEN id = @id THEN 0 ELSE 1 END, created_at, id`,
    ),
    // Expired handoff codes can never be redeemed: only clutter.
    pruneHandoffCodes: p<[number]>('DELETE FROM handoff_codes WHERE expires_at <= ?'),
    insertHandoffCode: p<HandoffCodeRecord>(
      `INSERT INTO handoff_codes (digest, session_id, origin, binding_digest, created_at, expires_at)
       VALUES (@digest, @sessionId, @origin, @bindingDigest, @createdAt, @expiresAt)`,
    ),
    // One conditional UPDATE ... RETURNING: the first redemption flips used_at, every other sees no row.
    useHandoffCode: p<{ digest: string; now: number }, HandoffCodeRow>(
      `UPDATE handoff_codes SET used_at = @now WHERE digest = @digest AND used_at IS NULL RETURNING ${HANDOFF_CODE_COLUMNS}`,
    ),
    sessionById: p<[string], SessionRow>(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE id = ?`),
    listActiveSessions: p<{ now: number; realm: Realm | null; deviceId: string | null; subject: string | null }, SessionRow>(
      `SELECT ${SESSION_COLUMNS} FROM sessions
       WHERE ${activeSessionSql('@now')}
         AND (@realm IS NULL OR realm = @realm) AND (@deviceId IS NULL OR device_id = @deviceId)
         AND (@subject IS NULL OR subject = @subject)
       ORDER BY created_at DESC, id DESC`,
    ),
    // Read by every rotation: an array (see inColumnOrder).
    sessionForRotation: inColumnOrder(p<[string], RefreshTuple>(`SELECT ${REFRESH_COLUMNS} FROM sessions WHERE id = ?`), REFRESH_TUPLE),
    /** What a refresh looks at before its write: the current token (for durability) and the binding (for the proof). */
    rotationPreRead: p<[string], { refresh_digest: string; realm: string; jkt: string | null }>(
      'SELECT refresh_digest, realm, jkt FROM sessions WHERE id = ?',
    ),
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
      `UPDATE sessions SET access_digest = ?, access_expires_at = ?, refresh_digest = ?, refresh_expires_at = ?,
         prev_refresh_digest = ?, prev_rotated_at = ?, prev_successor = ?, generation = generation + 1, last_rotated_at = ?
       WHERE id = ?`,
    ),
    revokeSession: p<{ id: string; now: number; reason: string }>(
      'UPDATE sessions SET revoked_at = @now, revoked_reason = @reason, prev_successor = NULL WHERE id = @id AND revoked_at IS NULL',
    ),
  };
}

/** The SQLite store's operations on challenges, sessions and their rotation, DPoP proofs, on the store's connection. */
export class SqliteSessions {
  readonly #ctx: SqliteContext;
  readonly #s: ReturnType<typeof prepare>;
  /** Challenges written by this connection: every 64th (and the first) also prunes the expired ones. */
  #challengeWrites = 0;
  readonly #replay: DpopReplayLog;

  constructor(ctx: SqliteContext) {
    this.#ctx = ctx;
    this.#s = prepare(ctx.db);
    this.#replay = new DpopReplayLog(ctx.db, ctx.writes);
  }

  #rotate(input: Parameters<Store['rotateRefreshToken']>[0], audit: Parameters<Store['rotateRefreshToken']>[1]): RotationOutcome {
    const { presentedDigest, now, next } = input;
    const read = this.#s.sessionForRotation.get(input.sessionId);
    const s = read === undefined ? undefined : refreshRowOf(read);
    // The rules and the outcome are core's; this only writes what they say. The proof first: a
    // bound session is rotated only with one by its key, recorded in this transaction whatever
    // the plan (one write transaction per refresh, where `useDpopProof` made it two).
    const proof = rotationProof(s, input);
    if (proof === 'required') return PROOF_REQUIRED;
    if (proof !== null && !this.#replay.use(proof.key, proof.expiresAt, now)) return PROOF_REPLAYED;
    let plan = planRotation(s, input);
    if (s !== undefined && plan.kind === 'check_retired') {
      plan = planRotation(s, input, this.#s.isRetired.get(s.id, presentedDigest) !== undefined);
    }
    if (s === undefined || plan.kind === 'invalid' || plan.kind === 'check_retired') return INVALID;
    if (plan.kind === 'rotate') {
      if (plan.retire !== null) this.#s.retireRefresh.run(s.id, plan.retire, now);
      this.#ctx.cache.drop(s.id);
      this.#s.setPair.run(
        next.accessDigest,
        plan.accessExpiresAt,
        next.refreshDigest,
        plan.refreshExpiresAt,
        s.refresh_digest,
        now,
        input.sealedSuccessor,
        now,
        s.id,
      );
    } else if (plan.kind === 'reuse') {
      this.#ctx.cache.drop(s.id);
      this.#s.revokeSession.run({ id: s.id, now, reason: REVOKED_REFRESH_REUSED });
    }
    this.#ctx.append(audit(plan.outcome));
    return plan.outcome;
  }

  async createChallenge(challenge: ChallengeRecord): Promise<void> {
    await this.#ctx.writes.run(() => {
      if (this.#challengeWrites++ % 64 === 0) this.#s.pruneChallenges.run(challenge.createdAt);
      this.#s.insertChallenge.run(
        challenge.id,
        challenge.publicKey,
        challenge.realm,
        challenge.challenge,
        challenge.createdAt,
        challenge.expiresAt,
      );
    });
  }

  async consumeChallenge(input: { readonly id: string; readonly now: number }): Promise<ConsumedChallenge | null> {
    // One conditional DELETE ... RETURNING: the first caller takes the row, every other sees none
    // (a used challenge is gone, as on PostgreSQL). The key's active device is read in the same
    // transaction.
    const latest = latestTrustedTime(input.now);
    return this.#ctx.writes.run(() => {
      const row = this.#s.consumeChallenge.get({ id: input.id, now: input.now, latest });
      return row === undefined ? null : this.#withDevice(row);
    });
  }

  async readChallenge(input: { readonly id: string; readonly now: number }): Promise<ConsumedChallenge | null> {
    // A read outside any write transaction: what it answers is used up, or found gone, by the
    // session's transaction (createSession's `challenge`).
    const row = this.#s.readChallenge.get({ id: input.id, now: input.now, latest: latestTrustedTime(input.now) });
    return row === undefined ? null : this.#withDevice(row);
  }

  /** A challenge's row as a record, with the active device of its key. */
  #withDevice(row: ChallengeTuple): ConsumedChallenge {
    const challenge = toChallenge(challengeRowOf(row));
    const device = this.#ctx.activeDeviceWithKey(challenge.publicKey);
    return consumedChallenge(challenge, device === undefined ? null : toDevice(device));
  }

  async useDpopProof(input: { readonly key: string; readonly expiresAt: number; readonly now: number }): Promise<boolean> {
    // Decided inside a write transaction, which holds the write lock: the first of any number of
    // callers wins, in this process or another one on the same file (see DpopReplayLog).
    return this.#ctx.writes.run(() => this.#replay.use(input.key, input.expiresAt, input.now));
  }

  async hasDpopRecord(input: { readonly key: string; readonly now: number }): Promise<boolean> {
    return this.#replay.has(input.key, input.now);
  }

  async createSession(
    session: SessionRecord,
    pair: TokenPairDigests,
    event: AuditEventDraft,
    challenge?: { readonly id: string; readonly now: number },
  ): Promise<SessionCreation> {
    return this.#ctx.writes.run((): SessionCreation => {
      // The sign-in's challenge first: the first transaction to use it up is the one that signs in.
      if (challenge !== undefined) {
        const use = { id: challenge.id, now: challenge.now, latest: latestTrustedTime(challenge.now) };
        if (this.#s.useChallenge.run(use).changes === 0) return 'challenge_used';
      }
      // The device and the user are re-read inside the write transaction: a removal or a
      // disable committed after the sign-in looked the device up must win, never leave a live
      // session behind.
      if (this.#s.deviceActive.get(session.deviceId) !== 1) return 'device_inactive';
      if (this.#ctx.userStatus(session.subject) === 'disabled') return 'user_disabled';
      this.#ctx.insertSession(session, pair);
      this.#ctx.signedIn(session.subject, session.createdAt);
      this.#ctx.append(event);
      return 'created';
    });
  }

  insertSession(session: SessionRecord, pair: TokenPairDigests): void {
    this.#s.insertSession.run(...newSessionValues(session, pair), session.parentId ?? null);
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
    audit: (outcome: AuditedRotation) => AuditEventDraft,
  ): Promise<RotationOutcome> {
    const pre = this.#s.rotationPreRead.get(input.sessionId);
    // A refresh that the rotation's write would refuse for its proof, without writing anything,
    // is refused after this read: the binding never changes once the session exists, and a
    // replay this process knows of stays one. The write decides again (another process may have
    // recorded the proof meanwhile).
    const proof = rotationProof(pre, input);
    if (proof === 'required') return PROOF_REQUIRED;
    if (proof !== null && this.#replay.knownLive(proof.key, input.now)) return PROOF_REPLAYED;
    // Anything but the current refresh token may be a reuse, whose revocation must be durable:
    // those presentations (rare) commit fsynced. A reuse that raced past this look still gets
    // a checkpoint, which syncs the WAL.
    const critical = this.#ctx.durability === 'normal' && (pre === undefined || !digestsEqual(pre.refresh_digest, input.presentedDigest));
    const outcome = await this.#ctx.writes.run(() => this.#rotate(input, audit), critical);
    if (outcome.kind === 'reused' && !critical && this.#ctx.durability === 'normal') this.#ctx.db.pragma('wal_checkpoint(PASSIVE)');
    return outcome;
  }

  async revokeSession(
    input: { readonly sessionId: string; readonly now: number; readonly reason: string },
    event: AuditEventDraft,
  ): Promise<boolean> {
    return this.#ctx.writes.run(() => {
      this.#ctx.cache.drop(input.sessionId);
      if (this.#s.revokeSession.run({ id: input.sessionId, now: input.now, reason: input.reason }).changes === 0) return false;
      this.#ctx.append(event);
      return true;
    }, true);
  }

  async revokeSessionFamily(
    input: { readonly sessionId: string; readonly now: number; readonly reason: string },
    event: (session: SessionRecord) => AuditEventDraft,
  ): Promise<readonly string[]> {
    return this.#ctx.writes.run(() => {
      const family = this.#s.sessionFamily.all({ id: input.sessionId }).map(toSession);
      // Every event is made before anything is written: a callback that throws rolls back nothing half done.
      const events = family.map(event);
      for (const s of family) {
        this.#ctx.cache.drop(s.id);
        this.#s.revokeSession.run({ id: s.id, now: input.now, reason: input.reason });
      }
      for (const e of events) this.#ctx.append(e);
      return family.map((s) => s.id);
    }, true);
  }

  async createHandoffCode(code: HandoffCodeRecord): Promise<void> {
    await this.#ctx.writes.run(() => {
      this.#s.pruneHandoffCodes.run(code.createdAt);
      this.#s.insertHandoffCode.run({
        digest: code.digest,
        sessionId: code.sessionId,
        origin: code.origin,
        bindingDigest: code.bindingDigest,
        createdAt: code.createdAt,
        expiresAt: code.expiresAt,
      });
    });
  }

  async consumeHandoffCode(
    input: Parameters<Store['consumeHandoffCode']>[0],
    audit: (outcome: HandoffOutcome) => readonly AuditEventDraft[],
  ): Promise<HandoffOutcome> {
    return this.#ctx.writes.run(() => {
      const row = this.#s.useHandoffCode.get({ digest: input.digest, now: input.now });
      const code = row === undefined ? null : toHandoffCode(row);
      const parentRow = code === null ? undefined : this.#s.sessionById.get(code.sessionId);
      let outcome = decideHandoff({
        code,
        parent: parentRow === undefined ? null : toSession(parentRow),
        origin: input.origin,
        bindingDigest: input.bindingDigest,
        now: input.now,
        child: input.child,
      });
      if (outcome.kind === 'created' && this.#ctx.userRow(outcome.session.subject)?.status === 'disabled') {
        outcome = { kind: 'refused', reason: 'user_disabled', code };
      }
      const events = audit(outcome);
      if (outcome.kind === 'created') this.insertSession(outcome.session, input.pair);
      for (const e of events) this.#ctx.append(e);
      return outcome;
    });
  }

  async pruneRetiredRefreshTokens(input: Parameters<Store['pruneRetiredRefreshTokens']>[0]): Promise<number> {
    return this.#ctx.writes.run(() => {
      this.#s.eraseEndedGracePairs.run(input.graceEndedBefore);
      return this.#s.pruneRetired.run({ now: input.now, retiredBefore: input.retiredBefore }).changes;
    });
  }
}

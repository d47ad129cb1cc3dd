// The PostgreSQL store's operations on sessions and their rotation, handoff codes and DPoP records (see `PostgresStore`, whose methods call these).
import { type AuditEventDraft, isIdOfKind, type Realm } from '@svc/core';
import {
  activeSessionSql,
  consumableChallengeSql,
  gracePairEndedSql,
  HANDOFF_CODE_COLUMNS,
  liveSessionSql,
  NEW_SESSION_COLUMNS,
  newSessionValues,
  REFRESH_COLUMNS,
  SESSION_COLUMNS,
} from '@svc/core/sql-rows';
import {
  type AuditedRotation,
  decideHandoff,
  type HandoffCodeRecord,
  type HandoffCodeRow,
  type HandoffOutcome,
  latestTrustedTime,
  PROOF_REPLAYED,
  PROOF_REQUIRED,
  planRotation,
  REVOKED_REFRESH_REUSED,
  type RefreshRow,
  type RotationOutcome,
  type RotationPlan,
  rotationProof,
  type SessionCreation,
  type SessionRecord,
  type SessionRow,
  type Store,
  type TokenPairDigests,
  toHandoffCode,
  toSession,
} from '@svc/core/store';
import { escapeLiteral, type PoolClient, type QueryConfig } from 'pg';
import { PENDING_COLUMNS, pendingParams, pendingValues } from './audit-sealer.js';
import {
  INVALID,
  MAINTENANCE_TIMEOUT_MS,
  type PgContext,
  REVOKE_SESSION,
  SET_PAIR,
  SET_PAIR_IF_UNCHANGED,
  SET_PAIR_IF_UNCHANGED_AND_PROVEN,
  type SweptTable,
} from './context.js';
import type { SessionReads } from './session-reads.js';
import { changes, first, type Named, rows, run, runReplicated, writtenRows } from './sql.js';
import { lockedUserStatus } from './users.js';

/** The key column of each swept table. */
const SWEPT_KEYS: Readonly<Record<SweptTable, string>> = { challenges: 'id', dpop_proofs: 'proof_key', handoff_codes: 'digest' };

/**
 * Deletes up to 500 rows of `table` that expired by `now`, on the writes `ctx.sweepDue` picks:
 * a node's first and then one in 64, so the oldest 500 expired rows go within 64 writes of a
 * node and a node deletes up to about eight for each row it adds. While the pool has callers
 * waiting for a connection, a due sweep waits for a later write: it is not worth a caller's
 * wait. Expired challenges, DPoP records and handoff codes can never be used again: they are
 * only clutter. SKIP LOCKED lets nodes sweep side by side without waiting for (or deadlocking
 * on) each other. The keys go by value (= ANY(ARRAY(...))), not as a join: its plan is
 * primary-key probes whatever the statistics say, where a semi-join's plan could scan the whole
 * table.
 *
 * Not part of the write's own named statement, as it was: a plan for `expires_at <= $n` depends
 * on the value, so on a table of some thousands of live rows PostgreSQL planned that statement
 * anew on every write (docs/performance.md, 2026-11-28 at 16:00). This statement is unnamed,
 * planned when it runs, one write in 64. A sweep that fails (a busy pool, an outage) does not
 * fail the write it follows, which has committed: the next one takes over.
 */
export async function sweepExpired(ctx: PgContext, table: SweptTable, now: number): Promise<void> {
  if (!ctx.sweepDue(table)) return;
  const key = SWEPT_KEYS[table];
  await run(
    ctx.pool,
    `DELETE FROM ${table} WHERE ${key} = ANY(ARRAY(
       SELECT ${key} FROM ${table} WHERE expires_at <= $1 ORDER BY expires_at LIMIT 500 FOR UPDATE SKIP LOCKED))`,
    [now],
  ).catch(() => undefined);
}

/**
 * A sign-in's challenge as `createSession`'s statements take it: its id, the time it is used up
 * at and the latest creation time that time trusts (`latestTrustedTime`); all null without one.
 */
export function challengeUse(
  challenge: { readonly id: string; readonly now: number } | undefined,
): [string | null, number | null, number | null] {
  return challenge === undefined ? [null, null, null] : [challenge.id, challenge.now, latestTrustedTime(challenge.now)];
}

const CREATE_SESSION: Named = {
  name: 'svc_create_session',
  text: `WITH used AS (
       DELETE FROM challenges WHERE id = $27 AND ${consumableChallengeSql('$28', '$29')} RETURNING 1
     ), usable AS (
       SELECT 1 WHERE $27::text IS NULL OR EXISTS (SELECT 1 FROM used)
     ), live AS (
       SELECT id FROM devices WHERE id = $4 AND removed_at IS NULL FOR SHARE
     ), known AS (
       SELECT 1 FROM users WHERE subject = $3
     ), signed AS (
       UPDATE users SET last_sign_in_at = $5
        WHERE subject = $3 AND status <> 'disabled' AND EXISTS (SELECT 1 FROM live) AND EXISTS (SELECT 1 FROM usable) RETURNING 1
     ), created AS (
       INSERT INTO sessions (${NEW_SESSION_COLUMNS})
       SELECT $1, $2, $3, live.id, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18 FROM live
        WHERE EXISTS (SELECT 1 FROM usable) AND (EXISTS (SELECT 1 FROM signed) OR NOT EXISTS (SELECT 1 FROM known))
       RETURNING id
     ), audited AS (
       INSERT INTO audit_pending (${PENDING_COLUMNS}) SELECT ${pendingParams(19)} FROM created
     )
     SELECT (SELECT count(*)::int FROM created) AS n, (SELECT count(*)::int FROM live) AS live,
            EXISTS (SELECT 1 FROM usable) AS usable`,
};

export async function createSession(
  ctx: PgContext,
  session: SessionRecord,
  pair: TokenPairDigests,
  event: AuditEventDraft,
  challenge?: { readonly id: string; readonly now: number },
): Promise<SessionCreation> {
  // One statement, so one round trip and its own transaction: the sign-in's challenge used up,
  // the device row's share lock, the user's sign-in time, the session and its pending event
  // commit together or not at all. Of concurrent sign-ins with one challenge, the first DELETE
  // takes the row; every other one waits for it, finds it gone when the first commits, and
  // writes nothing. A concurrent removeDevice (which updates the device row) either waits for this session and
  // revokes it, or commits first, and then FOR SHARE re-reads the removed row, selects nothing
  // and nothing is inserted. The user row is taken after the device row (changeUser takes them
  // in the same order) by the UPDATE that records the sign-in: a changeUser that disables the
  // user either waits for this session and revokes it, or commits first, and then the UPDATE
  // re-checks its WHERE on the disabled row and matches nothing. (An UPDATE rather than a share
  // lock: two sign-ins of one user that each held a share lock and then updated would deadlock.)
  // A subject without a user row (read in the statement's snapshot) signs in as before.
  const [created] = await writtenRows<{ n: number; live: number; usable: boolean }>(ctx.pool, CREATE_SESSION, [
    ...newSessionValues(session, pair),
    ...pendingValues(event),
    ...challengeUse(challenge),
  ]);
  if (created?.usable === false) return 'challenge_used';
  if (created?.n !== 1) return created?.live === 1 ? 'user_disabled' : 'device_inactive';
  ctx.scheduleSeal();
  return 'created';
}

export async function insertSession(_ctx: PgContext, c: PoolClient, session: SessionRecord, pair: TokenPairDigests): Promise<void> {
  await c.query(
    `INSERT INTO sessions (${NEW_SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
    newSessionValues(session, pair),
  );
}

export async function listActiveSessions(
  ctx: PgContext,
  filter: {
    readonly now: number;
    readonly realm?: Realm;
    readonly deviceId?: string;
    readonly subject?: string;
  },
): Promise<readonly SessionRecord[]> {
  const list = await rows<SessionRow>(
    ctx.pool,
    `SELECT ${SESSION_COLUMNS} FROM sessions
     WHERE ${activeSessionSql('$1')}
       AND ($2::text IS NULL OR realm = $2) AND ($3::text IS NULL OR device_id = $3)
       AND ($4::text IS NULL OR subject = $4)
     ORDER BY created_at DESC, id DESC`,
    [filter.now, filter.realm ?? null, filter.deviceId ?? null, filter.subject ?? null],
  );
  return list.map(toSession);
}

/** The CTEs of a rotation's whole change (see `rotationValues`): the new pair, the retired token and the event. */
function rotationChange(setPair: string): string {
  return `rotated AS (${setPair}), retired AS (
       INSERT INTO retired_refresh_tokens (session_id, digest, retired_at) SELECT $1, $10::text, $7 FROM rotated WHERE $10::text IS NOT NULL
     ), audited AS (
       INSERT INTO audit_pending (${PENDING_COLUMNS}) SELECT ${pendingParams(11)} FROM rotated
     )`;
}

/** A rotation on the row its transaction locked. */
const ROTATE: Named = { name: 'svc_rotate', text: `WITH ${rotationChange(SET_PAIR)} SELECT generation FROM rotated` };
/** A rotation on the row read without a lock: it writes nothing unless the row is still as read (see `SET_PAIR_IF_UNCHANGED`). */
const ROTATE_IF_UNCHANGED: Named = {
  name: 'svc_rotate_if_unchanged',
  text: `WITH ${rotationChange(SET_PAIR_IF_UNCHANGED)} SELECT generation FROM rotated`,
};
/**
 * {@link ROTATE_IF_UNCHANGED} with the refresh's DPoP proof (`$22` until `$23`) recorded in the
 * same statement, as `useDpopProof` records one (a live record refuses it), where it was a commit
 * of its own before every rotation of a bound session. The session changes only if the proof was
 * recorded; the proof is recorded whether or not the row was still as read. One row always:
 * `recorded` (0: a replay, nothing written) and the new `generation` (null: not rotated).
 */
const ROTATE_WITH_PROOF_IF_UNCHANGED: Named = {
  name: 'svc_rotate_with_proof_if_unchanged',
  text: `WITH proof AS (
       INSERT INTO dpop_proofs (proof_key, expires_at) VALUES ($22, $23)
       ON CONFLICT (proof_key) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE dpop_proofs.expires_at <= $7
       RETURNING 1
     ), ${rotationChange(SET_PAIR_IF_UNCHANGED_AND_PROVEN)}
     SELECT (SELECT count(*) FROM proof)::int AS recorded, (SELECT generation FROM rotated) AS generation`,
};

/** The values of {@link ROTATE} (and the first 18 of {@link ROTATE_IF_UNCHANGED}) for `plan` on row `s`. */
function rotationValues(
  s: RefreshRow,
  plan: Extract<RotationPlan, { kind: 'rotate' }>,
  input: Parameters<Store['rotateRefreshToken']>[0],
  audit: (outcome: AuditedRotation) => AuditEventDraft,
): unknown[] {
  return [
    s.id,
    input.next.accessDigest,
    plan.accessExpiresAt,
    input.next.refreshDigest,
    plan.refreshExpiresAt,
    s.refresh_digest,
    input.now,
    input.now,
    input.sealedSuccessor,
    plan.retire,
    ...pendingValues(audit(plan.outcome)),
  ];
}

/** Refuses a rotation whose statement left the session at another generation than its plan's. */
function checkGeneration(id: string, row: { generation: number }, plan: Extract<RotationPlan, { kind: 'rotate' }>): void {
  if (row.generation !== plan.outcome.session.generation) {
    throw new Error(`session ${id} is at generation ${row.generation}, not ${plan.outcome.session.generation}, after its rotation`);
  }
}

/**
 * `rotateRefreshToken` of the PostgreSQL store. Core decides (`planRotation`); this writes what
 * the plan says.
 *
 * The usual presentation (the current token of a live session) takes one statement: the row is
 * read without a lock (the turn's session reads share it, see `SessionReads`), and the new pair,
 * the retired token and the event are written by one statement that changes the row only while it
 * is still as read (`SET_PAIR_IF_UNCHANGED`), committed on its own, the standby's confirmation
 * checked (`runReplicated`). It was BEGIN with the lock, the change and COMMIT: three round trips
 * on every refresh (docs/performance.md, 2026-11-29 at 10:00).
 *
 * Everything else takes the lock: a plan other than `rotate` on the row read (a replay within
 * grace, a reuse, a token to look up among the retired ones, an unknown or dead session), and a
 * rotation whose row changed after it was read. Of two presentations of one token racing on any
 * nodes, at most one changes the row; the other finds it changed and decides again on the locked
 * row, as the winner committed it: within grace that is a replay of the winner's pair.
 */
export async function rotateRefreshToken(
  ctx: PgContext,
  reads: SessionReads,
  input: Parameters<Store['rotateRefreshToken']>[0],
  audit: (outcome: AuditedRotation) => AuditEventDraft,
): Promise<RotationOutcome> {
  const { sessionId } = input;
  // An id no session can have names none: nothing to lock, nothing to write.
  if (!isIdOfKind(sessionId, 'session')) return INVALID;
  const seen = await reads.row(sessionId);
  // The binding never changes once the session exists: the row read without a lock decides
  // what to do with the proof.
  const proof = rotationProof(seen ?? undefined, input);
  if (proof === 'required') return PROOF_REQUIRED;
  let recorded = proof === null;
  if (seen !== null) {
    const plan = planRotation(seen, input);
    if (plan.kind === 'rotate') {
      const values = [...rotationValues(seen, plan, input, audit), seen.generation, seen.expires_at, seen.refresh_expires_at];
      let row: { generation: number | null; recorded?: number } | undefined;
      if (proof === null) row = (await runReplicated<{ generation: number }>(ctx.pool, ROTATE_IF_UNCHANGED, values)).rows[0];
      else {
        row = (
          await runReplicated<{ generation: number | null; recorded: number }>(ctx.pool, ROTATE_WITH_PROOF_IF_UNCHANGED, [
            ...values,
            proof.key,
            proof.expiresAt,
          ])
        ).rows[0];
        if (row?.recorded !== 1) return PROOF_REPLAYED;
        recorded = true;
        await sweepExpired(ctx, 'dpop_proofs', input.now);
      }
      if (row !== undefined && row.generation !== null) {
        checkGeneration(seen.id, row as { generation: number }, plan);
        ctx.scheduleSeal();
        return plan.outcome;
      }
    }
  }
  // A presentation that takes the lock records its proof (unless the statement above did) in the
  // same transaction, before the lock, in the same round trip: the statement above takes a
  // proof's row before the session's too, so no two presentations wait on each other in a cycle.
  const record = proof !== null && !recorded ? recordProofSql(proof, input.now) : null;
  const outcome = await ctx.tx(
    async (c, opened): Promise<RotationOutcome> => {
      // A live record of the proof was there: nothing written (the lock is let go at COMMIT).
      if (record !== null && opened[0]?.rowCount !== 1) return PROOF_REPLAYED;
      return rotateLocked(ctx, c, opened[record === null ? 0 : 1]?.rows[0] as RefreshRow | undefined, input, audit);
    },
    record === null ? lockRefreshSql(sessionId) : `${record}; ${lockRefreshSql(sessionId)}`,
  );
  if (record !== null && outcome !== PROOF_REPLAYED) await sweepExpired(ctx, 'dpop_proofs', input.now);
  return outcome;
}

/** A rotation on the row `s` its transaction `c` locked (undefined: no such session). */
async function rotateLocked(
  ctx: PgContext,
  c: PoolClient,
  s: RefreshRow | undefined,
  input: Parameters<Store['rotateRefreshToken']>[0],
  audit: (outcome: AuditedRotation) => AuditEventDraft,
): Promise<RotationOutcome> {
  // The rule and the outcome are core's; this only writes what the plan says.
  let plan = planRotation(s, input);
  if (s !== undefined && plan.kind === 'check_retired') {
    const retired = await first(c, 'SELECT 1 FROM retired_refresh_tokens WHERE session_id = $1 AND digest = $2', [
      s.id,
      input.presentedDigest,
    ]);
    plan = planRotation(s, input, retired !== undefined);
  }
  if (s === undefined || plan.kind === 'invalid' || plan.kind === 'check_retired') return INVALID;
  switch (plan.kind) {
    case 'rotate': {
      // The event is built from the row this transaction locked (no re-read).
      const row = await first<{ generation: number }>(c, ROTATE, rotationValues(s, plan, input, audit));
      if (row === undefined) throw new Error(`session ${s.id} vanished while locked`);
      checkGeneration(s.id, row, plan);
      ctx.wrotePending(c);
      return plan.outcome;
    }
    case 'replay':
      await ctx.append(c, audit(plan.outcome));
      return plan.outcome;
    case 'reuse': {
      const row = await first<SessionRow>(c, REVOKE_SESSION, [s.id, input.now, REVOKED_REFRESH_REUSED]);
      if (row === undefined) return INVALID;
      await ctx.append(c, audit(plan.outcome));
      return plan.outcome;
    }
  }
}

/**
 * The statement that records a rotation's proof as `useDpopProof` does, for the simple query that
 * begins a locked rotation: its values written into it, checked first (the key is core's
 * `dpopReplayKey`, 64 hex digits; the times are whole milliseconds).
 */
function recordProofSql(proof: { readonly key: string; readonly expiresAt: number }, now: number): string {
  if (!/^[0-9a-f]{64}$/.test(proof.key)) throw new TypeError('a DPoP replay key is 64 hex digits');
  if (!Number.isSafeInteger(proof.expiresAt) || !Number.isSafeInteger(now)) throw new TypeError('times are whole milliseconds');
  return `INSERT INTO dpop_proofs (proof_key, expires_at) VALUES (${escapeLiteral(proof.key)}, ${proof.expiresAt})
     ON CONFLICT (proof_key) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE dpop_proofs.expires_at <= ${now}
     RETURNING 1`;
}

/**
 * The lock that serialises every presentation of a session's tokens, on every node: a waiter
 * wakes up with the row as the winner committed it and decides on that. It goes with the
 * rotation's BEGIN, in one round trip (a simple query: its id written into it, one of the
 * session id's own alphabet only, and quoted as a literal), where it was a round trip of its own
 * on every refresh (docs/performance.md, 2026-11-29).
 */
function lockRefreshSql(sessionId: string): string {
  if (!isIdOfKind(sessionId, 'session')) throw new TypeError('not a session id');
  return `SELECT ${REFRESH_COLUMNS} FROM sessions WHERE id = ${escapeLiteral(sessionId)} FOR UPDATE`;
}

export async function revokeSession(
  ctx: PgContext,
  input: { readonly sessionId: string; readonly now: number; readonly reason: string },
  event: AuditEventDraft,
): Promise<boolean> {
  return ctx.tx(async (c) => {
    if ((await changes(c, REVOKE_SESSION, [input.sessionId, input.now, input.reason])) === 0) return false;
    await ctx.append(c, event);
    return true;
  });
}

export async function pruneRetiredRefreshTokens(ctx: PgContext, input: Parameters<Store['pruneRetiredRefreshTokens']>[0]): Promise<number> {
  return ctx.tx(async (c) => {
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

export async function hasDpopRecord(ctx: PgContext, input: { readonly key: string; readonly now: number }): Promise<boolean> {
  const row = await first<{ n: number }>(
    ctx.pool,
    { name: 'svc_has_dpop_record', text: 'SELECT 1 AS n FROM dpop_proofs WHERE proof_key = $1 AND expires_at > $2' },
    [input.key, input.now],
  );
  return row !== undefined;
}

export async function revokeSessionFamily(
  ctx: PgContext,
  input: { readonly sessionId: string; readonly now: number; readonly reason: string },
  event: (session: SessionRecord) => AuditEventDraft,
): Promise<readonly string[]> {
  return ctx.tx(async (c) => {
    // The named session first, then (a new statement, a new snapshot) the sessions handed off
    // from it: a redemption that held the parent's share lock has committed its child by then.
    const named = await rows<SessionRow>(c, REVOKE_SESSION, [input.sessionId, input.now, input.reason]);
    const children = await rows<SessionRow>(
      c,
      `UPDATE sessions SET revoked_at = $2, revoked_reason = $3, prev_successor = NULL
        WHERE parent_id = $1 AND revoked_at IS NULL RETURNING ${SESSION_COLUMNS}`,
      [input.sessionId, input.now, input.reason],
    );
    const family = [...named, ...children.sort((a, b) => Number(a.created_at) - Number(b.created_at))].map(toSession);
    for (const s of family) await ctx.append(c, event(s));
    return family.map((s) => s.id);
  });
}

export async function createHandoffCode(ctx: PgContext, code: HandoffCodeRecord): Promise<void> {
  await runReplicated(
    ctx.pool,
    { name: 'svc_create_handoff_code', text: `INSERT INTO handoff_codes (${HANDOFF_CODE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)` },
    [code.digest, code.sessionId, code.origin, code.bindingDigest, code.createdAt, code.expiresAt],
  );
  // Expired codes can never be redeemed.
  await sweepExpired(ctx, 'handoff_codes', code.createdAt);
}

export async function consumeHandoffCode(
  ctx: PgContext,
  input: Parameters<Store['consumeHandoffCode']>[0],
  audit: (outcome: HandoffOutcome) => readonly AuditEventDraft[],
): Promise<HandoffOutcome> {
  return ctx.tx(async (c) => {
    // One conditional UPDATE: of N concurrent redemptions on any nodes, one sees the row.
    const row = await first<HandoffCodeRow>(
      c,
      `UPDATE handoff_codes SET used_at = $2 WHERE digest = $1 AND used_at IS NULL RETURNING ${HANDOFF_CODE_COLUMNS}`,
      [input.digest, input.now],
    );
    const code = row === undefined ? null : toHandoffCode(row);
    // The parent under a share lock: a family revocation either commits first (and is seen
    // here) or waits for this child and then revokes it too.
    const parent =
      code === null
        ? undefined
        : await first<SessionRow>(c, `SELECT ${SESSION_COLUMNS} FROM sessions WHERE id = $1 FOR SHARE`, [code.sessionId]);
    let outcome = decideHandoff({
      code,
      parent: parent === undefined ? null : toSession(parent),
      origin: input.origin,
      bindingDigest: input.bindingDigest,
      now: input.now,
      child: input.child,
    });
    if (outcome.kind === 'created' && (await lockedUserStatus(c, outcome.session.subject)) === 'disabled') {
      outcome = { kind: 'refused', reason: 'user_disabled', code };
    }
    const events = audit(outcome);
    if (outcome.kind === 'created') {
      await c.query(
        `INSERT INTO sessions (${NEW_SESSION_COLUMNS}, parent_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
        [...newSessionValues(outcome.session, input.pair), outcome.session.parentId ?? null],
      );
    }
    for (const e of events) await ctx.append(c, e);
    return outcome;
  });
}

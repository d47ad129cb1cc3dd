import {
  ACCESS_COLUMNS,
  activeSessionSql,
  attemptWindowSql,
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
  storedAttemptWindow,
  usableBootstrapSql,
} from '@svc/core/sql-rows';
import {
  type AccessRow,
  type AttemptReservation,
  type AttemptWindow,
  type AuditData,
  type AuditEvent,
  type AuditEventDraft,
  type AuditEventType,
  amrText,
  auditPage,
  type BootstrapOutcome,
  type ChallengeRecord,
  type ChallengeRow,
  clampPairToSession,
  classifyStoreErrors,
  type DeviceRecord,
  type DeviceRow,
  decideAttemptWindow,
  decideBootstrapConsumption,
  decideDeviceRemoval,
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
  type RealmCountRow,
  type RefreshRow,
  type RotationOutcome,
  type SessionRecord,
  type SessionRow,
  STORE_OPERATIONS,
  type Store,
  type StoreStats,
  sealAuditEvent,
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
import type { Pool, PoolClient, QueryConfig, QueryResultRow } from 'pg';
import { postgresFault } from './faults.js';

/** Something that runs queries: the pool (autocommit) or a client inside a transaction. */
type Queryable = Pick<PoolClient, 'query'>;

/** Thrown inside {@link PostgresStore.#tx} to roll back and still answer `value`. */
class Rollback {
  readonly value: unknown;
  constructor(value: unknown) {
    this.value = value;
  }
}

/** Rolls the current transaction back and makes it answer `value`: for outcomes that must write nothing. */
function rollback(value: unknown): never {
  throw new Rollback(value);
}

/**
 * A statement of the hot paths (sign-in, rotation, the attempt budget, the audit trail's writes
 * and sealing), prepared once per connection under its name: each later execution skips the
 * server's parse and analysis and, once PostgreSQL settles on a generic plan, its planning: about
 * a third of PostgreSQL's CPU under two-node load (perf), when every statement came as new text.
 */
type Named = Readonly<Omit<QueryConfig, 'values'> & { name: string }>;

/** SQL text (parsed and planned on every execution) or a {@link Named} statement. */
type Sql = string | Named;

function run<R extends QueryResultRow>(db: Queryable, sql: Sql, values: readonly unknown[]) {
  return typeof sql === 'string' ? db.query<R>(sql, values as unknown[]) : db.query<R>({ ...sql, values: values as unknown[] });
}

async function rows<R extends QueryResultRow>(db: Queryable, sql: Sql, values: readonly unknown[] = []): Promise<R[]> {
  return (await run<R>(db, sql, values)).rows;
}

async function first<R extends QueryResultRow>(db: Queryable, sql: Sql, values: readonly unknown[] = []): Promise<R | undefined> {
  return (await run<R>(db, sql, values)).rows[0];
}

async function changes(db: Queryable, sql: Sql, values: readonly unknown[]): Promise<number> {
  return (await run(db, sql, values)).rowCount ?? 0;
}

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

/** The columns of a pending audit event as a write inserts it (`pos` is the commit order the sequence gives). */
const PENDING_COLUMNS = 'id, at, type, realm, subject, device_id, session_id, data';

/** The values of `draft` for {@link PENDING_COLUMNS}, in order. */
function pendingValues(draft: AuditEventDraft): unknown[] {
  return [
    draft.id,
    draft.at,
    draft.type,
    draft.realm,
    draft.subject,
    draft.deviceId,
    draft.sessionId,
    // JSON text, not JSONB: it gives back exactly the values that are hashed at sealing.
    JSON.stringify(draft.data),
  ];
}

/** `$from, $from+1, ...` for the eight values of {@link pendingValues}, as a select list. */
function pendingParams(from: number): string {
  return Array.from({ length: 8 }, (_, i) => `$${from + i}`).join(', ');
}

/** Rows of each kind one retention batch deletes. */
const PRUNE_BATCH = 1000;

/**
 * How long after a write its pending audit event waits for the sealer: the writes of these few
 * milliseconds, of every connection of this node, are chained by one transaction.
 */
export const SEAL_DELAY_MS = 5;

/** Pending events one sealing transaction chains at most. */
const SEAL_BATCH = 1000;

/** A pending audit event: a draft in commit order (`pos`), not yet chained. */
interface PendingRow {
  pos: number;
  id: string;
  at: number;
  type: AuditEventType;
  realm: Realm | null;
  subject: string | null;
  device_id: string | null;
  session_id: string | null;
  data: string;
}

/** The bound on a maintenance statement (pruning), far above the request bounds. */
const MAINTENANCE_TIMEOUT_MS = 300_000;

// The hot path of every authenticated request: a named statement, so each connection parses
// and plans it once. One primary-key lookup; the digest is then compared in constant time.
const SESSION_FOR_ACCESS: Omit<QueryConfig, 'values'> = {
  name: 'svc_session_for_access',
  text: `SELECT ${ACCESS_COLUMNS} FROM sessions WHERE id = $1`,
};

// The same lookup for the bearer checks of one event-loop turn at once (see `findSessionByAccessDigest`).
const SESSIONS_FOR_ACCESS: Omit<QueryConfig, 'values'> = {
  name: 'svc_sessions_for_access',
  text: `SELECT ${ACCESS_COLUMNS} FROM sessions WHERE id = ANY($1::text[])`,
};

/** The most bearer checks one query answers; a busier turn sends several. */
const BEARER_BATCH_MAX = 256;

/** A bearer check waiting for its turn's query. */
interface BearerLookup {
  readonly sessionId: string;
  readonly digest: string;
  readonly resolve: (session: SessionRecord | null) => void;
  readonly reject: (error: unknown) => void;
}

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
  #closed = false;
  #reservations = 0;
  // The background sealing this store's writes asked for, if one is pending or running.
  #sealTimer: NodeJS.Timeout | undefined;
  #sealing: Promise<void> | undefined;

  /** Wraps open pools on a migrated schema; use `openPostgresStore` rather than calling this. */
  constructor(pool: Pool, schema: string, budgetPool: Pool = pool) {
    this.#pool = pool;
    this.#budgetPool = budgetPool;
    this.schema = schema;
  }

  /**
   * Runs `fn` in one READ COMMITTED transaction on one pooled connection. A {@link Rollback}
   * thrown by `fn` rolls back and answers its value; any other error rolls back and is
   * rethrown (a connection failure included: callers turn it into a 5xx, nothing is swallowed).
   */
  async #tx<T>(fn: (c: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    // The pool takes its own 'error' listener off a client while it is checked out: without one
    // here, a server restart (57P01) or a dropped connection between two statements of this
    // transaction is an unhandled 'error' event, and that kills the process.
    let lost: Error | undefined;
    const onError = (err: Error) => {
      lost ??= err;
    };
    client.on('error', onError);
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      if (lost !== undefined || postgresFault(err) !== null) {
        // The connection is lost or stuck: a ROLLBACK would only wait out another timeout. The
        // server rolls the transaction back when the connection closes.
        broken = lost ?? (err as Error);
      } else {
        try {
          await client.query('ROLLBACK');
        } catch (rollbackError) {
          // The connection is unusable: destroy it instead of returning it to the pool.
          broken = rollbackError as Error;
        }
      }
      if (err instanceof Rollback) return err.value as T;
      throw err;
    } finally {
      client.removeListener('error', onError);
      client.release(broken ?? lost);
    }
  }

  /**
   * Records `draft` as a pending event of the transaction `c`: it commits (or rolls back) with
   * the change it records, and takes no lock another writer waits for. The sealer chains it
   * shortly after the commit ({@link SEAL_DELAY_MS}), and every read of the trail first.
   */
  async #append(c: PoolClient, draft: AuditEventDraft): Promise<void> {
    await run(
      c,
      { name: 'svc_audit_pending', text: `INSERT INTO audit_pending (${PENDING_COLUMNS}) VALUES (${pendingParams(1)})` },
      pendingValues(draft),
    );
    this.#scheduleSeal();
  }

  /** Asks for a sealing pass soon: the writes of the next few milliseconds share it. */
  #scheduleSeal(): void {
    if (this.#sealTimer !== undefined || this.#closed) return;
    this.#sealTimer = setTimeout(() => {
      this.#sealTimer = undefined;
      this.#sealPending().catch((error: unknown) => {
        // Not lost: the rows stay pending, and the next pass or read chains them.
        const fault = postgresFault(error);
        if (fault === null) process.emitWarning(`svc-store-postgres: sealing the audit trail failed: ${(error as Error).message}`);
      });
    }, SEAL_DELAY_MS);
    this.#sealTimer.unref();
  }

  /**
   * Chains every pending event committed before the call, of every node: in batches of
   * {@link SEAL_BATCH}, each one transaction under the `audit_head` lock that reads the pending
   * rows in `pos` order, seals them after the head with core's `sealAuditEvent`, inserts them,
   * adds them to the kept counts, deletes them from `audit_pending` and moves the head. Two
   * sealers (two nodes, or a read and the timer) take turns on the lock; the second finds the
   * rows the first chained gone. Cheap when there is nothing to do: one indexed read, no lock.
   */
  async #sealPending(): Promise<void> {
    // One pass of this store at a time; a caller arriving meanwhile waits for it, then runs its
    // own (rows committed after the running pass read the table are chained by the next).
    const previous = this.#sealing;
    const pass = (async () => {
      await previous?.catch(() => undefined);
      for (;;) {
        const pending = await first<{ any: boolean }>(this.#pool, {
          name: 'svc_any_pending',
          text: 'SELECT EXISTS (SELECT 1 FROM audit_pending) AS any',
        });
        if (pending?.any !== true) return;
        const sealed = await this.#tx((c) => this.#sealBatch(c));
        if (sealed < SEAL_BATCH) return;
      }
    })();
    this.#sealing = pass;
    try {
      await pass;
    } finally {
      if (this.#sealing === pass) this.#sealing = undefined;
    }
  }

  /** One sealing batch inside transaction `c`; answers how many events it chained. */
  async #sealBatch(c: PoolClient): Promise<number> {
    const head = await first<{ seq: number; hash: string }>(c, {
      name: 'svc_lock_head',
      text: 'SELECT seq, hash FROM audit_head WHERE singleton FOR UPDATE',
    });
    if (head === undefined) throw new Error(`the audit_head row of schema ${this.schema} is missing`);
    // Read after the lock is held: a READ COMMITTED statement sees every pending row committed
    // before it, and none that a sealer before it already chained and deleted.
    const batch = await rows<PendingRow>(
      c,
      {
        name: 'svc_pending_batch',
        text: 'SELECT pos, id, at, type, realm, subject, device_id, session_id, data FROM audit_pending ORDER BY pos LIMIT $1',
      },
      [SEAL_BATCH],
    );
    if (batch.length === 0) return 0;
    let seq = head.seq;
    let hash = head.seq === 0 ? GENESIS_HASH : head.hash;
    const events: AuditEvent[] = [];
    for (const row of batch) {
      const event = sealAuditEvent(
        {
          id: row.id,
          at: row.at,
          type: row.type,
          realm: row.realm,
          subject: row.subject,
          deviceId: row.device_id,
          sessionId: row.session_id,
          data: JSON.parse(row.data) as AuditData,
        },
        seq,
        hash,
      );
      events.push(event);
      seq = event.seq;
      hash = event.hash;
    }
    const column = <K extends keyof AuditEvent>(key: K) => events.map((e) => e[key]);
    const counts = new Map<string, number>();
    for (const e of events) counts.set(e.type, (counts.get(e.type) ?? 0) + 1);
    await run(
      c,
      {
        name: 'svc_seal_batch',
        text: `WITH sealed AS (
         INSERT INTO audit_events (${EVENT_COLUMNS})
         SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                              $9::text[], $10::text[], $11::text[])
       ), counted AS (
         INSERT INTO audit_counts (type, n) SELECT * FROM unnest($12::text[], $13::bigint[])
         ON CONFLICT (type) DO UPDATE SET n = audit_counts.n + EXCLUDED.n
       ), chained AS (
         DELETE FROM audit_pending WHERE pos = ANY($14::bigint[])
       )
       UPDATE audit_head SET seq = $15, hash = $16 WHERE singleton`,
      },
      [
        column('seq'),
        column('id'),
        column('at'),
        column('type'),
        column('realm'),
        column('subject'),
        column('deviceId'),
        column('sessionId'),
        // The exact JSON text that was pending, which is what the hash covers.
        batch.map((r) => r.data),
        column('prevHash'),
        column('hash'),
        [...counts.keys()],
        [...counts.values()],
        batch.map((r) => r.pos),
        seq,
        hash,
      ],
    );
    return batch.length;
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
    clearTimeout(this.#sealTimer);
    this.#sealTimer = undefined;
    // What this node wrote is chained before it goes (another node's sealer would do it too).
    await this.#sealing?.catch(() => undefined);
    await this.#sealPending().catch(() => undefined);
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

  /**
   * The bearer check, against the database's truth on every request. The checks that arrive in
   * one turn of the event loop wait for its check phase (`setImmediate`) and go to the
   * database as one query (`id = ANY(...)`): one round trip and one pool connection for all of
   * them instead of one each. The query is sent after every check of the batch was asked for,
   * so after its request was read: a revocation committed before that is seen, as before.
   */
  findSessionByAccessDigest(sessionId: string, digest: string): Promise<SessionRecord | null> {
    return new Promise((resolve, reject) => {
      if (this.#bearerBatch.length === 0) setImmediate(this.#sendBearerBatch);
      this.#bearerBatch.push({ sessionId, digest, resolve, reject });
    });
  }

  #bearerBatch: BearerLookup[] = [];

  readonly #sendBearerBatch = (): void => {
    const all = this.#bearerBatch;
    this.#bearerBatch = [];
    for (let i = 0; i < all.length; i += BEARER_BATCH_MAX) void this.#answerBearerBatch(all.slice(i, i + BEARER_BATCH_MAX));
  };

  async #answerBearerBatch(batch: readonly BearerLookup[]): Promise<void> {
    let rows: readonly AccessRow[];
    try {
      rows =
        batch.length === 1
          ? (await this.#pool.query<AccessRow>({ ...SESSION_FOR_ACCESS, values: [batch[0]?.sessionId] })).rows
          : (await this.#pool.query<AccessRow>({ ...SESSIONS_FOR_ACCESS, values: [[...new Set(batch.map((l) => l.sessionId))]] })).rows;
    } catch (error) {
      // Each check's rejection is classified (an outage becomes store_unavailable) by the wrapper every operation has.
      for (const lookup of batch) lookup.reject(error);
      return;
    }
    const byId = new Map(rows.map((row) => [row.id, row]));
    for (const lookup of batch) {
      const row = byId.get(lookup.sessionId);
      lookup.resolve(row === undefined || !digestsEqual(row.access_digest, lookup.digest) ? null : toSession(row));
    }
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
    const keys = [...new Set(input.keys)].sort();
    if (keys.length === 0) return { reserved: true, shared: true, windows: [] };
    for (let pass = 0; ; pass++) {
      // One statement decides and reserves (core's `attemptWindowSql`): it locks every row of
      // `keys` in key order (two reservations never wait on each other in a cycle), reads the
      // counts as the latest commit left them, and moves every window only when every key
      // reserves. Its row locks last for this statement alone, never across a round trip, so the
      // budget of one busy address is not a queue of transactions. It answers the rows as
      // locked, each with the window it moved it to (null when it moved none).
      const locked = await rows<{
        key: string;
        window_start: number;
        failures: number;
        pending: number;
        pending_since: number;
        moved_start: number | null;
        moved_failures: number | null;
        moved_pending: number | null;
        moved_pending_since: number | null;
      }>(
        this.#budgetPool,
        {
          name: 'svc_reserve_attempt_windows',
          text: `WITH locked AS (
             SELECT key, window_start, failures, pending, pending_since FROM attempt_budget WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE
           ), decided AS (
             SELECT key, window_start, failures, pending, pending_since,
                    ${attemptWindowSql({ now: '$2::bigint', windowMs: '$3::bigint', max: '$4::int', leaseMs: '$5::bigint' })}
             FROM locked
           ), moved AS (
             UPDATE attempt_budget AS b
             SET window_start = d.new_start, failures = d.new_failures, pending = d.new_pending, pending_since = d.new_pending_since
             FROM decided AS d
             WHERE b.key = d.key AND (SELECT count(*) = cardinality($1::text[]) AND bool_and(reserve) FROM decided)
             RETURNING b.key, b.window_start, b.failures, b.pending, b.pending_since
           )
           SELECT d.key, d.window_start, d.failures, d.pending, d.pending_since,
                  m.window_start AS moved_start, m.failures AS moved_failures, m.pending AS moved_pending,
                  m.pending_since AS moved_pending_since
           FROM decided AS d LEFT JOIN moved AS m ON m.key = d.key ORDER BY d.key`,
        },
        [keys, input.now, input.windowMs, input.max, input.leaseMs],
      );
      if (locked.length < keys.length) {
        // A key seen for the first time (or pruned since): its row is created empty, and the
        // statement runs again. Another node creating it meanwhile is the same row.
        if (pass >= 2) throw new Error('attempt_budget rows were deleted while they were being reserved');
        await run(
          this.#budgetPool,
          {
            name: 'svc_open_attempt_windows',
            text: 'INSERT INTO attempt_budget (key, window_start, failures, pending, pending_since) SELECT k, $2, 0, 0, $2 FROM unnest($1::text[]) AS k ON CONFLICT (key) DO NOTHING',
          },
          [keys, input.now],
        );
        continue;
      }
      // The rule is core's: decided again here on the rows as the statement locked them.
      const windows: AttemptWindow[] = [];
      let retryAfterMs = 0;
      let busy = false;
      for (const r of locked) {
        const d = decideAttemptWindow(r.key, storedAttemptWindow(r), input);
        if (d.kind === 'refuse') retryAfterMs = Math.max(retryAfterMs, d.retryAfterMs);
        else if (d.kind === 'busy') busy = true;
        else windows.push(d.window);
      }
      // Fail closed if the SQL form and the rule ever drift apart: no attempt runs on a
      // reservation the rule would not have made, or whose window settling would not find.
      const reserved = windows.length === keys.length;
      const agrees = locked.every((r, i) => {
        const w = windows[i];
        return reserved && w !== undefined
          ? r.moved_start === w.start &&
              r.moved_failures === w.failures &&
              r.moved_pending === w.pending &&
              r.moved_pending_since === w.pendingSince
          : r.moved_start === null;
      });
      if (!agrees) throw new Error('attempt_budget: the reservation statement and decideAttemptWindow disagree');
      // Windows that ended long ago are clutter: every 64th reservation of this node sweeps a
      // few away, never waiting on a lock. Not awaited: the reservation has committed, and a
      // sweep that fails (a busy pool, an outage) must not turn it into an error whose windows
      // the caller could never settle; the next sweep takes over.
      if (++this.#reservations % 64 === 0) {
        run(
          this.#budgetPool,
          `DELETE FROM attempt_budget WHERE key = ANY(ARRAY(
             SELECT key FROM attempt_budget WHERE window_start < $1 ORDER BY window_start LIMIT 500 FOR UPDATE SKIP LOCKED))`,
          [input.now - 2 * input.windowMs],
        ).catch(() => undefined);
      }
      if (retryAfterMs > 0) return { reserved: false, busy: false, retryAfterMs };
      if (busy) return { reserved: false, busy: true, retryAfterMs: 1000 };
      return { reserved: true, shared: true, windows };
    }
  }

  async settleAttempts(input: Parameters<Store['settleAttempts']>[0]): Promise<void> {
    if (input.windows.length === 0) return;
    // Only a window that is still the one reserved in changes; a newer one owes nothing. The
    // rows are locked in key order first, as a reservation locks them, so a settle and a
    // reservation of the same keys (a refresh: its address and its session) never deadlock.
    await run(
      this.#budgetPool,
      {
        name: 'svc_settle_attempts',
        text: `WITH settled AS (
           SELECT b.key, w.since FROM attempt_budget AS b JOIN unnest($1::text[], $2::bigint[], $4::bigint[]) AS w (key, start, since)
             ON b.key = w.key AND b.window_start = w.start
           ORDER BY b.key FOR UPDATE OF b
         )
         UPDATE attempt_budget AS b
         SET pending = CASE WHEN b.pending_since = s.since THEN GREATEST(b.pending - 1, 0) ELSE b.pending END,
             failures = b.failures + $3
         FROM settled AS s WHERE b.key = s.key`,
      },
      [input.windows.map((w) => w.key), input.windows.map((w) => w.start), input.failed ? 1 : 0, input.windows.map((w) => w.pendingSince)],
    );
  }
}

// Outages (connection lost, timeouts, lock waits, disk full) become `503 store_unavailable`
// with the fault named, in every operation.
classifyStoreErrors(PostgresStore.prototype, STORE_OPERATIONS, postgresFault);

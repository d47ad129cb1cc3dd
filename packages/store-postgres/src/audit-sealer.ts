// The audit trail's sealer: writes record their events as pending rows (no shared lock), and
// this chains them shortly after, in batches, under the lock of the single audit_head row.

import {
  type AuditData,
  type AuditEvent,
  type AuditEventDraft,
  type AuditEventType,
  GENESIS_HASH,
  type Realm,
  sealAuditEvent,
} from '@svc/core';
import { EVENT_COLUMNS } from '@svc/core/sql-rows';
import type { Pool, PoolClient, QueryResult } from 'pg';
import { postgresFault } from './faults.js';
import { first, run, transaction } from './sql.js';

/** The columns of a pending audit event as a write inserts it (`pos` is the commit order the sequence gives). */
export const PENDING_COLUMNS = 'id, at, type, realm, subject, device_id, session_id, data';

/** The values of `draft` for {@link PENDING_COLUMNS}, in order. */
export function pendingValues(draft: AuditEventDraft): unknown[] {
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
export function pendingParams(from: number): string {
  return Array.from({ length: 8 }, (_, i) => `$${from + i}`).join(', ');
}

/**
 * How long after a write its pending audit event waits for the sealer: the writes of these few
 * milliseconds, of every connection of this node, are chained by one transaction.
 */
export const SEAL_DELAY_MS = 5;

/** Pending events one sealing transaction chains at most. */
const SEAL_BATCH = 1000;

/**
 * What a sealing transaction begins with, in the BEGIN's round trip: the `audit_head` lock, and
 * then the pending rows. Two statements: the second's snapshot is taken after the lock is held,
 * so it sees every pending row committed before it, and none that a sealer before it already
 * chained and deleted (one statement would read them as of before its wait for the lock).
 */
const LOCK_AND_READ = `SELECT seq, hash FROM audit_head WHERE singleton FOR UPDATE;
  SELECT pos, id, at, type, realm, subject, device_id, session_id, data FROM audit_pending ORDER BY pos LIMIT ${SEAL_BATCH}`;

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

/**
 * Chains the pending audit events of a schema (see `PostgresStore`): {@link AuditSealer.append}
 * records an event inside a write's transaction, {@link AuditSealer.schedule} asks for a pass
 * within {@link SEAL_DELAY_MS}, and {@link AuditSealer.sealPending} runs one now (every read
 * of the trail does first).
 *
 * @example
 * const sealer = new AuditSealer(pool, 'svc_auth');
 * await transaction(pool, (c) => sealer.append(c, draft));
 * await sealer.sealPending();
 */
export class AuditSealer {
  readonly #pool: Pool;
  readonly #schema: string;
  #closed = false;
  // The background sealing this store's writes asked for, if one is pending or running.
  #sealTimer: NodeJS.Timeout | undefined;
  #sealing: Promise<void> | undefined;
  // How many times this store's writes asked for a pass, and how many of those asked before the
  // latest pass's read began (that read saw what they committed).
  #asked = 0;
  #readUpTo = 0;

  constructor(pool: Pool, schema: string) {
    this.#pool = pool;
    this.#schema = schema;
  }

  /** Chains what this node wrote before it goes (another node's sealer would do it too); no pass is scheduled after. */
  async close(): Promise<void> {
    clearTimeout(this.#sealTimer);
    this.#sealTimer = undefined;
    await this.#sealing?.catch(() => undefined);
    await this.sealPending().catch(() => undefined);
    this.#closed = true;
  }

  /**
   * Records `draft` as a pending event of the transaction `c`: it commits (or rolls back) with
   * the change it records, and takes no lock another writer waits for. The sealer chains it
   * shortly after the commit ({@link SEAL_DELAY_MS}), and every read of the trail first.
   */
  async append(c: PoolClient, draft: AuditEventDraft): Promise<void> {
    await run(
      c,
      { name: 'svc_audit_pending', text: `INSERT INTO audit_pending (${PENDING_COLUMNS}) VALUES (${pendingParams(1)})` },
      pendingValues(draft),
    );
  }

  /**
   * Asks for a sealing pass soon: the writes of the next few milliseconds share it. Called after
   * the commit of a write that recorded pending events (see `PgContext.wrotePending`), so the pass it
   * asks for sees them.
   */
  schedule(): void {
    this.#asked++;
    if (this.#sealTimer !== undefined || this.#closed) return;
    this.#sealTimer = setTimeout(() => {
      this.#sealTimer = undefined;
      this.#pass(true).catch((error: unknown) => {
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
  sealPending(): Promise<void> {
    return this.#pass(false);
  }

  /**
   * One pass (see {@link AuditSealer.sealPending}). A pass a write asked for ({@link
   * AuditSealer.schedule}, `asked`) skips the check for pending rows, since that write committed
   * some, and does not run at all when no write asked for one since the last pass began reading:
   * that pass saw everything they committed. Each batch is three round trips: the BEGIN with
   * the head's lock and the read of the pending rows, the sealing statement, the COMMIT.
   */
  #pass(asked: boolean): Promise<void> {
    // One pass of this store at a time; a caller arriving meanwhile waits for it, then runs its
    // own (rows committed after the running pass read the table are chained by the next).
    const previous = this.#sealing;
    const pass = (async () => {
      await previous?.catch(() => undefined);
      if (asked && this.#asked === this.#readUpTo) return;
      if (!asked) {
        const pending = await first<{ any: boolean }>(this.#pool, {
          name: 'svc_any_pending',
          text: 'SELECT EXISTS (SELECT 1 FROM audit_pending) AS any',
        });
        if (pending?.any !== true) return;
      }
      for (;;) {
        // Every write that asked before this read began committed before it: a read that took
        // every pending row (fewer than a batch) chained what they wrote. A full batch may have
        // left some: the next one reads again, and if it fails, a later pass must not be skipped.
        const upTo = this.#asked;
        const sealed = await transaction(this.#pool, (c, opened) => this.#sealBatch(c, opened), LOCK_AND_READ);
        if (sealed < SEAL_BATCH) {
          this.#readUpTo = Math.max(this.#readUpTo, upTo);
          return;
        }
      }
    })();
    this.#sealing = pass;
    return pass.finally(() => {
      if (this.#sealing === pass) this.#sealing = undefined;
    });
  }

  /**
   * One sealing batch inside transaction `c`, which began with {@link LOCK_AND_READ} (`opened`:
   * the head as locked, and the pending rows read after the lock was held); answers how many
   * events it chained.
   */
  async #sealBatch(c: PoolClient, opened: readonly QueryResult[]): Promise<number> {
    const head = opened[0]?.rows[0] as { seq: number; hash: string } | undefined;
    if (head === undefined) throw new Error(`the audit_head row of schema ${this.#schema} is missing`);
    const batch = (opened[1]?.rows ?? []) as PendingRow[];
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
}

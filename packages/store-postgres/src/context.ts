// What the PostgreSQL store's operation modules share: the context they run in (the pool, the
// transaction wrapper, the audit trail's pending append and sealer) and the SQL of more than one.
import type { AuditEventDraft } from '@svc/core';
import { DEVICE_COLUMNS, SESSION_COLUMNS } from '@svc/core/sql-rows';
import type { RotationOutcome } from '@svc/core/store';
import type { Pool, PoolClient, QueryResult } from 'pg';

/** What an operation of the PostgreSQL store runs with (see `PostgresStore`). */
export interface PgContext {
  /** The schema every table lives in. */
  readonly schema: string;
  /** The request pool (autocommit reads and writes). */
  readonly pool: Pool;
  /** Runs `fn` in one READ COMMITTED transaction, begun with `opening` when given (see `transaction`). */
  tx<T>(fn: (c: PoolClient, opened: readonly QueryResult[]) => Promise<T>, opening?: string): Promise<T>;
  /** Records `draft` as a pending audit event of the transaction `c` (of `tx`): a sealing pass is asked for after its commit. */
  append(c: PoolClient, draft: AuditEventDraft): Promise<void>;
  /** Says that the transaction `c` (of `tx`) inserted pending audit events itself: a sealing pass is asked for after its commit. */
  wrotePending(c: PoolClient): void;
  /** Chains every pending audit event committed before the call (every read of the trail first). */
  sealPending(): Promise<void>;
  /** Asks for a sealing pass soon; after the commit of a statement that inserted pending audit events. */
  scheduleSeal(): void;
  /**
   * Counts a write of `table` and says whether it also sweeps the table's expired rows (see
   * `sweepExpired`): this node's first, then the first after 63 more, except while the pool has
   * callers waiting for a connection (the sweep then waits for a write when it has room).
   */
  sweepDue(table: SweptTable): boolean;
}

/** The tables of short-lived records whose expired rows the writes sweep (see `sweepExpired` in sessions.ts). */
export type SweptTable = 'challenges' | 'dpop_proofs' | 'handoff_codes';

/** One write in this many of a {@link SweptTable} on a node sweeps its expired rows. */
export const SWEEP_EVERY = 64;

export const INVALID: RotationOutcome = Object.freeze({ kind: 'invalid' });

/** Rows of each kind one retention batch deletes. */
export const PRUNE_BATCH = 1000;

/** The bound on a maintenance statement (pruning), far above the request bounds. */
export const MAINTENANCE_TIMEOUT_MS = 300_000;

export const INSERT_DEVICE = `INSERT INTO devices (id, public_key, realm, subject, name, created_at, removed_at)
  VALUES ($1, $2, $3, $4, $5, $6, NULL)
  ON CONFLICT (public_key) WHERE removed_at IS NULL DO NOTHING
  RETURNING ${DEVICE_COLUMNS}`;

const SET_PAIR_COLUMNS = `access_digest = $2, access_expires_at = $3, refresh_digest = $4, refresh_expires_at = $5,
    prev_refresh_digest = $6, prev_rotated_at = $7, prev_successor = $9, generation = generation + 1, last_rotated_at = $8`;

// A rotation's new pair; the rotation writes it in one statement with its retired token and its event.
export const SET_PAIR = `UPDATE sessions SET ${SET_PAIR_COLUMNS}
  WHERE id = $1
  RETURNING generation`;

/**
 * The same, only while the row is as the rotation read it unlocked: the same generation ($19),
 * the presented refresh token still its current one ($6), not revoked, and the same expiries
 * ($20, $21). Every change a rotation's decision depends on moves one of them: a rotation bumps
 * the generation and replaces the refresh token, a revocation sets `revoked_at`.
 */
export const SET_PAIR_IF_UNCHANGED = setPairIfUnchanged('');

/**
 * {@link SET_PAIR_IF_UNCHANGED}, only if the statement's `proof` (a data-modifying CTE that records
 * the rotation's DPoP proof) recorded it: a replayed proof rotates nothing.
 */
export const SET_PAIR_IF_UNCHANGED_AND_PROVEN = setPairIfUnchanged(' AND EXISTS (SELECT 1 FROM proof)');

function setPairIfUnchanged(also: string): string {
  return `UPDATE sessions SET ${SET_PAIR_COLUMNS}
  WHERE id = $1 AND generation = $19 AND refresh_digest = $6 AND revoked_at IS NULL AND expires_at = $20 AND refresh_expires_at = $21${also}
  RETURNING generation`;
}

// Revoking erases the sealed grace pair too: a revoked session answers no grace, and a restore must not bring it back.
export const REVOKE_SESSION = `UPDATE sessions SET revoked_at = $2, revoked_reason = $3, prev_successor = NULL WHERE id = $1 AND revoked_at IS NULL
  RETURNING ${SESSION_COLUMNS}`;

// The PostgreSQL store's export and import of the whole control state (see `Store.exportState`,
// `Store.importState`), in core's store-neutral form: driven by core's CONTROL_STATE_TABLES
// alone, so a column this file does not name cannot be left behind.
import {
  CONTROL_STATE_TABLES,
  type ControlStateCounts,
  type ControlStateRow,
  type ControlTable,
  type ControlValue,
  checkControlRow,
  controlTable,
  type ExportOptions,
  exportedTables,
  type ImportOutcome,
  inImportOrder,
  neutralRow,
} from '@svc/core/store';
import type { PoolClient } from 'pg';
import { OWN_BACKENDS, svcApplicationName } from './connections.js';
import type { PgContext } from './context.js';

/** An export refused because other processes (running nodes) use the schema: stop them first. */
export class StoreInUseError extends Error {
  readonly code = 'store_in_use' as const;
  /** How many other connections were found. */
  readonly connections: number;
  constructor(schema: string, connections: number) {
    super(`${connections} other svc connection(s) use the PostgreSQL schema ${schema} (is a node running on it?); stop every node first`);
    this.name = 'StoreInUseError';
    this.connections = connections;
  }
}

/** How many connections of other processes use `schema` (by the application name every store's pool sets). */
async function otherConnections(c: PoolClient, schema: string): Promise<number> {
  const found = await c.query<{ n: number }>(
    `SELECT COUNT(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid() AND NOT (pid = ANY($2::int[]))`,
    [svcApplicationName(schema), [...OWN_BACKENDS]],
  );
  return found.rows[0]?.n ?? 0;
}

/** Rows one FETCH of an export reads, and one INSERT of an import writes. */
const BATCH = 500;

/** The ORDER BY of a table's key: text in byte order (COLLATE "C"), as SQLite and JavaScript compare it. */
function orderBy(table: ControlTable): string {
  return table.key.map((k) => (table.columns[k] === 'text' ? `${k} COLLATE "C"` : k)).join(', ');
}

/**
 * Reads the control state in one REPEATABLE READ, READ ONLY transaction on a connection of its
 * own (one snapshot of every table, which concurrent writers of other nodes do not change),
 * after chaining the pending audit events, through a cursor per table. Refused with a
 * {@link StoreInUseError} while connections of another process use the schema (a running node).
 */
export async function exportPostgresState(ctx: PgContext, opts: ExportOptions): Promise<AsyncIterable<ControlStateRow>> {
  await ctx.sealPending();
  const client = await ctx.pool.connect();
  try {
    // A node still serving would write after the snapshot, and its writes would be lost to the move.
    const others = await otherConnections(client, ctx.schema);
    if (others > 0) throw new StoreInUseError(ctx.schema, others);
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    // The first statement takes the snapshot, before the caller gets the rows.
    await client.query('SELECT 1 FROM project LIMIT 1');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release(error instanceof Error ? error : true);
    throw error;
  }
  const tables = exportedTables(opts);
  async function* rows(): AsyncGenerator<ControlStateRow> {
    let ended = false;
    let clean = true;
    try {
      for (const table of tables) {
        await client.query(`DECLARE svc_export NO SCROLL CURSOR FOR SELECT ${Object.keys(table.columns).join(', ')}
          FROM ${table.name} ORDER BY ${orderBy(table)}`);
        for (;;) {
          const page = await client.query<Record<string, unknown>>(`FETCH ${BATCH} FROM svc_export`);
          for (const raw of page.rows) yield { table: table.name as ControlStateRow['table'], row: neutralRow(table, raw) };
          if (page.rows.length < BATCH) break;
        }
        await client.query('CLOSE svc_export');
      }
      await client.query('COMMIT');
      ended = true;
    } finally {
      // The caller stopped early, or a read failed: the snapshot ends; a connection that cannot say so is discarded.
      if (!ended) await client.query('ROLLBACK').catch(() => (clean = false));
      client.release(clean ? undefined : true);
    }
  }
  return rows();
}

/** The first table of the control state (or a pending audit event) that holds a row, or null. */
async function firstNonEmptyTable(c: PoolClient): Promise<string | null> {
  for (const name of [...CONTROL_STATE_TABLES.map((t) => t.name as string), 'audit_pending']) {
    const found = await c.query(`SELECT 1 FROM ${name} LIMIT 1`);
    if (found.rows.length > 0) return name;
  }
  return null;
}

async function insertBatch(c: PoolClient, table: ControlTable, batch: readonly Readonly<Record<string, ControlValue>>[]): Promise<void> {
  if (batch.length === 0) return;
  const columns = Object.keys(table.columns);
  const values: ControlValue[] = [];
  const tuples = batch.map((row) => {
    const params = columns.map((column) => {
      values.push(row[column] ?? null);
      return `$${values.length}`;
    });
    return `(${params.join(', ')})`;
  });
  await c.query(`INSERT INTO ${table.name} (${columns.join(', ')}) VALUES ${tuples.join(', ')}`, values);
}

/**
 * Writes an export into an empty schema in ONE transaction, with every table of the state
 * locked against other writers (SHARE ROW EXCLUSIVE: readers go on, a second import or a
 * node's write waits), so the emptiness checked is the emptiness written into. The audit head
 * becomes the last imported event.
 */
export async function importPostgresState(ctx: PgContext, source: AsyncIterable<ControlStateRow>): Promise<ImportOutcome> {
  const c = await ctx.pool.connect();
  let broken = false;
  try {
    await c.query('BEGIN');
    // An import is as long as its rows: the request bounds of the pool do not apply to it.
    await c.query('SET LOCAL statement_timeout = 0');
    await c.query(
      `LOCK TABLE ${[...CONTROL_STATE_TABLES.map((t) => t.name as string), 'audit_pending', 'audit_head'].join(', ')} IN SHARE ROW EXCLUSIVE MODE`,
    );
    const nonEmpty = await firstNonEmptyTable(c);
    if (nonEmpty !== null) {
      await c.query('ROLLBACK');
      return { kind: 'not_empty', table: nonEmpty };
    }
    const counts: Record<string, number> = {};
    let previous: string | null = null;
    let batch: Readonly<Record<string, ControlValue>>[] = [];
    let head: { seq: number; hash: string } | null = null;
    for await (const item of source) {
      const problem = checkControlRow(item);
      if (problem !== null) throw new TypeError(`importState: ${problem}`);
      if (!inImportOrder(previous, item.table))
        throw new TypeError(`importState: ${item.table} rows after ${previous} rows (out of order)`);
      if (previous !== null && previous !== item.table) {
        await insertBatch(c, controlTable(previous) as ControlTable, batch);
        batch = [];
      }
      previous = item.table;
      batch.push(item.row);
      if (item.table === 'audit_events') head = { seq: item.row.seq as number, hash: item.row.hash as string };
      counts[item.table] = (counts[item.table] ?? 0) + 1;
      if (batch.length >= BATCH) {
        await insertBatch(c, controlTable(item.table) as ControlTable, batch);
        batch = [];
      }
    }
    if (previous !== null) await insertBatch(c, controlTable(previous) as ControlTable, batch);
    if (head !== null) await c.query('UPDATE audit_head SET seq = $1, hash = $2 WHERE singleton', [head.seq, head.hash]);
    await c.query('COMMIT');
    return { kind: 'imported', counts: counts as ControlStateCounts };
  } catch (error) {
    await c.query('ROLLBACK').catch(() => {
      broken = true;
    });
    throw error;
  } finally {
    c.release(broken ? true : undefined);
  }
}

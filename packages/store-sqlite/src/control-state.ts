// The SQLite store's export and import of the whole control state (see `Store.exportState`,
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
import type Database from 'better-sqlite3';
import type { SqliteContext } from './context.js';

function selectSql(table: ControlTable): string {
  return `SELECT ${Object.keys(table.columns).join(', ')} FROM ${table.name} ORDER BY ${table.key.join(', ')}`;
}

function insertSql(table: ControlTable): string {
  const columns = [...(table.implied ?? []), ...Object.keys(table.columns)];
  const values = [...(table.implied ?? []).map(() => '1'), ...Object.keys(table.columns).map((c) => `@${c}`)];
  return `INSERT INTO ${table.name} (${columns.join(', ')}) VALUES (${values.join(', ')})`;
}

/** A neutral row as better-sqlite3 binds it: booleans as 0/1. */
function bindable(row: Readonly<Record<string, ControlValue>>): Record<string, string | number | null> {
  const out: Record<string, string | number | null> = {};
  for (const [k, v] of Object.entries(row)) out[k] = typeof v === 'boolean' ? (v ? 1 : 0) : v;
  return out;
}

/** The first table of the control state that holds a row, or null when the store is empty. */
export function firstNonEmptyTable(db: Database.Database): string | null {
  for (const table of CONTROL_STATE_TABLES) {
    if (db.prepare(`SELECT 1 FROM ${table.name} LIMIT 1`).get() !== undefined) return table.name;
  }
  return null;
}

/**
 * Reads the control state in one read transaction (a WAL snapshot as of one commit, which no
 * writer of another process disturbs), table by table in import order, each by its key.
 */
export async function exportSqliteState(ctx: SqliteContext, opts: ExportOptions): Promise<AsyncIterable<ControlStateRow>> {
  const { db } = ctx;
  if (db.inTransaction) throw new Error('exportState: the connection is in a transaction; export on a handle of its own');
  db.exec('BEGIN DEFERRED');
  try {
    // The first read fixes the snapshot before the caller gets the rows.
    db.prepare('SELECT COUNT(*) FROM project').get();
  } catch (error) {
    db.exec('ROLLBACK');
    throw error;
  }
  const tables = exportedTables(opts);
  async function* rows(): AsyncGenerator<ControlStateRow> {
    try {
      for (const table of tables) {
        for (const raw of db.prepare(selectSql(table)).iterate() as IterableIterator<Record<string, unknown>>) {
          yield { table: table.name as ControlStateRow['table'], row: neutralRow(table, raw) };
        }
      }
    } finally {
      if (db.inTransaction) db.exec('COMMIT');
    }
  }
  return rows();
}

/**
 * Writes an export into an empty store in ONE `BEGIN IMMEDIATE` transaction (the write lock
 * held throughout, so no other process writes in between); any problem rolls it all back.
 */
export async function importSqliteState(ctx: SqliteContext, source: AsyncIterable<ControlStateRow>): Promise<ImportOutcome> {
  const { db } = ctx;
  if (db.inTransaction) throw new Error('importState: the connection is in a transaction; import on a handle of its own');
  db.exec('BEGIN IMMEDIATE');
  let done = false;
  try {
    const nonEmpty = firstNonEmptyTable(db);
    if (nonEmpty !== null) return { kind: 'not_empty', table: nonEmpty };
    const inserts = new Map<string, Database.Statement>();
    const counts: Record<string, number> = {};
    let previous: string | null = null;
    for await (const item of source) {
      const problem = checkControlRow(item);
      if (problem !== null) throw new TypeError(`importState: ${problem}`);
      if (!inImportOrder(previous, item.table))
        throw new TypeError(`importState: ${item.table} rows after ${previous} rows (out of order)`);
      previous = item.table;
      let insert = inserts.get(item.table);
      if (insert === undefined) {
        insert = db.prepare(insertSql(controlTable(item.table) as ControlTable));
        inserts.set(item.table, insert);
      }
      insert.run(bindable(item.row));
      counts[item.table] = (counts[item.table] ?? 0) + 1;
    }
    db.exec('COMMIT');
    done = true;
    return { kind: 'imported', counts: counts as ControlStateCounts };
  } finally {
    if (!done && db.inTransaction) db.exec('ROLLBACK');
    // The chain's head as the write path remembers it is whatever the rows made it: read afresh.
    ctx.writes.head = undefined;
  }
}

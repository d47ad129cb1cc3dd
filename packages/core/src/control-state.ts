// The control state in a store-neutral form, for moving a project between stores
// (`Store.exportState` / `Store.importState`). Rows use the column names both SQL stores share
// (store-rows.ts); values are JSON-safe: text, whole numbers (times in ms, counts), booleans,
// null. ONE list, CONTROL_STATE_TABLES, says what the control state is: the exporters read
// exactly these columns, the importers write exactly these, and a test of each SQL store fails
// when its schema has a table or column this list neither copies nor names in NOT_COPIED, so a
// new column cannot be dropped silently by a migration between stores.

/** The kind of a column's neutral value (null is allowed for every nullable column). */
export type ControlColumnKind = 'text' | 'integer' | 'boolean';

/**
 * What a table holds, which decides whether a move copies it: `state` always (who may sign in,
 * with what, and the audit trail); `sessions` only when asked (`--sessions`): what keeps users
 * signed in (token digests, the refresh grace data, the DPoP replay cache, challenges and
 * provider flows in progress). Without it nobody stays signed in: every device signs in again.
 */
export type ControlTableClass = 'state' | 'sessions';

/** One table of the control state. */
export interface ControlTable {
  readonly name: string;
  readonly class: ControlTableClass;
  /** Its columns and their neutral kinds, in a fixed order. */
  readonly columns: Readonly<Record<string, ControlColumnKind>>;
  /** The columns that order its rows in an export (a unique key), so two exports compare equal. */
  readonly key: readonly string[];
  /** Columns of the schema that the importer fills in itself (a singleton marker), never exported. */
  readonly implied?: readonly string[];
}

const t = 'text' as const;
const i = 'integer' as const;
const b = 'boolean' as const;

/**
 * Every table of the control state, in the order an import writes them (what a row refers to
 * comes before it). Both SQL stores' schemas are checked against it by a test.
 */
export const CONTROL_STATE_TABLES = [
  { name: 'project', class: 'state', columns: { project_id: t, created_at: i }, key: ['project_id'], implied: ['singleton'] },
  {
    name: 'users',
    class: 'state',
    columns: {
      subject: t,
      realm: t,
      user_name: t,
      external_id: t,
      name: t,
      name_source: t,
      email: t,
      email_verified: b,
      email_source: t,
      groups: t,
      groups_source: t,
      status: t,
      created_at: i,
      updated_at: i,
      last_sign_in_at: i,
      disabled_at: i,
    },
    key: ['subject'],
  },
  {
    name: 'groups',
    class: 'state',
    columns: { id: t, realm: t, name: t, external_id: t, created_at: i, updated_at: i },
    key: ['id'],
  },
  {
    name: 'scim_tokens',
    class: 'state',
    columns: { id: t, digest: t, name: t, created_at: i, created_by: t, last_used_at: i, revoked_at: i },
    key: ['id'],
  },
  {
    // The cluster's assertion key set (store contract 9), copied as stored: its private halves
    // stay sealed under the same key-encryption key, which the target's nodes are given too.
    name: 'assertion_keys',
    class: 'state',
    columns: { singleton: i, version: i, key_set: t, updated_at: i },
    key: ['singleton'],
  },
  {
    name: 'devices',
    class: 'state',
    columns: { id: t, public_key: t, realm: t, subject: t, name: t, created_at: i, removed_at: i },
    key: ['id'],
  },
  {
    name: 'links',
    class: 'state',
    columns: {
      id: t,
      realm: t,
      subject: t,
      provider: t,
      issuer: t,
      external_subject: t,
      credential_data: t,
      counter: i,
      name: t,
      created_at: i,
      last_used_at: i,
      removed_at: i,
    },
    key: ['id'],
  },
  {
    name: 'bootstrap_tokens',
    class: 'state',
    columns: { id: t, digest: t, created_at: i, expires_at: i, used_at: i, superseded_at: i, device_id: t },
    key: ['id'],
  },
  {
    name: 'pairing_intents',
    class: 'state',
    columns: {
      id: t,
      realm: t,
      subject: t,
      name: t,
      code_digest: t,
      created_at: i,
      expires_at: i,
      created_by: t,
      failures: i,
      completed_at: i,
      burned_at: i,
      device_id: t,
      prepared_by_node: t,
    },
    key: ['id'],
  },
  {
    name: 'audit_events',
    class: 'state',
    columns: {
      seq: i,
      id: t,
      at: i,
      type: t,
      realm: t,
      subject: t,
      device_id: t,
      session_id: t,
      data: t,
      prev_hash: t,
      hash: t,
    },
    key: ['seq'],
  },
  { name: 'audit_counts', class: 'state', columns: { type: t, n: i }, key: ['type'] },
  {
    name: 'sessions',
    class: 'sessions',
    columns: {
      id: t,
      realm: t,
      subject: t,
      device_id: t,
      created_at: i,
      expires_at: i,
      access_digest: t,
      access_expires_at: i,
      refresh_digest: t,
      refresh_expires_at: i,
      prev_refresh_digest: t,
      prev_rotated_at: i,
      generation: i,
      last_rotated_at: i,
      revoked_at: i,
      revoked_reason: t,
      prev_successor: t,
      client_address: t,
      user_agent: t,
      amr: t,
      jkt: t,
      parent_id: t,
    },
    key: ['id'],
  },
  {
    // One sign-in across route hosts: codes in flight (30 s), only their digests.
    name: 'handoff_codes',
    class: 'sessions',
    columns: { digest: t, session_id: t, origin: t, binding_digest: t, created_at: i, expires_at: i, used_at: i },
    key: ['digest'],
  },
  {
    name: 'retired_refresh_tokens',
    class: 'sessions',
    columns: { session_id: t, digest: t, retired_at: i },
    key: ['session_id', 'digest'],
  },
  {
    name: 'challenges',
    class: 'sessions',
    columns: { id: t, public_key: t, realm: t, challenge: t, created_at: i, expires_at: i, used_at: i },
    key: ['id'],
  },
  {
    name: 'flows',
    class: 'sessions',
    columns: {
      id: t,
      provider: t,
      realm: t,
      intent: t,
      subject: t,
      pairing_intent_id: t,
      state: t,
      created_at: i,
      expires_at: i,
      consumed_at: i,
    },
    key: ['id'],
  },
  { name: 'dpop_proofs', class: 'sessions', columns: { proof_key: t, expires_at: i }, key: ['proof_key'] },
] as const satisfies readonly ControlTable[];

/** The name of a table of the control state. */
export type ControlTableName = (typeof CONTROL_STATE_TABLES)[number]['name'];

/**
 * Tables a store's schema has that are deliberately not part of the neutral state, each with
 * why: the coverage test accepts these and nothing else. `schema_migrations` is each store's own
 * migration bookkeeping.
 */
export const NOT_COPIED: Readonly<Record<string, string>> = Object.freeze({
  schema_migrations: "each store's own migration bookkeeping (the target has its own)",
  user_groups: "SQLite: the users of each group, derived from users.groups by the schema's triggers (an import's users rows refill it)",
  audit_head: 'PostgreSQL: the last event of the chain, set by the importer from the last audit event',
  audit_pending: 'PostgreSQL: events not yet chained; the exporter seals them first, so it is empty when read',
  attempt_budget:
    'PostgreSQL: windows of failed sign-in attempts (a minute or so); a move needs the service stopped, and the windows restart',
  dpop_replay_log: 'SQLite: the DPoP replay records, moved as the dpop_proofs view over it (one row per key, its latest expiry)',
});

/** A neutral value. */
export type ControlValue = string | number | boolean | null;

/** One row of the control state: a table and its columns' neutral values. */
export interface ControlStateRow {
  readonly table: ControlTableName;
  readonly row: Readonly<Record<string, ControlValue>>;
}

/** What an import wrote: rows per table. */
export type ControlStateCounts = Readonly<Partial<Record<ControlTableName, number>>>;

/** What {@link Store.importState} led to. */
export type ImportOutcome =
  | { readonly kind: 'imported'; readonly counts: ControlStateCounts }
  /** The target already holds control state (`table` is the first that has rows): nothing written. */
  | { readonly kind: 'not_empty'; readonly table: string };

/** What an export reads. */
export interface ExportOptions {
  /** Also the `sessions` tables (see {@link ControlTableClass}). */
  readonly sessions: boolean;
}

const BY_NAME: ReadonlyMap<string, ControlTable> = new Map(CONTROL_STATE_TABLES.map((table) => [table.name, table]));

/**
 * The tables an export with `opts` reads, in import order.
 *
 * @example
 * exportedTables({ sessions: false }).map((t) => t.name); // ['project', 'users', ...]
 */
export function exportedTables(opts: ExportOptions): readonly ControlTable[] {
  return CONTROL_STATE_TABLES.filter((table) => opts.sessions || table.class === 'state');
}

/**
 * The declared table `name`, or undefined.
 *
 * @example
 * controlTable('users')?.columns.email_verified; // 'boolean'
 */
export function controlTable(name: string): ControlTable | undefined {
  return BY_NAME.get(name);
}

/**
 * A row as a driver returned it, in the neutral form: each declared column, booleans from 0/1
 * (SQLite), whole numbers from numeric text (a BIGINT read as text). Throws a TypeError naming
 * the table and column for a value that does not fit its kind.
 *
 * @example
 * neutralRow(controlTable('users')!, sqliteRow); // { ..., email_verified: true }
 */
export function neutralRow(table: ControlTable, raw: Readonly<Record<string, unknown>>): Record<string, ControlValue> {
  const row: Record<string, ControlValue> = {};
  for (const [column, kind] of Object.entries(table.columns)) row[column] = neutralValue(table.name, column, kind, raw[column]);
  return row;
}

function neutralValue(table: string, column: string, kind: ControlColumnKind, value: unknown): ControlValue {
  if (value === null || value === undefined) return null;
  const bad = (): never => {
    throw new TypeError(`control state ${table}.${column}: expected ${kind}, found ${typeof value}`);
  };
  switch (kind) {
    case 'text':
      return typeof value === 'string' ? value : bad();
    case 'boolean':
      if (typeof value === 'boolean') return value;
      if (value === 0 || value === 1) return value === 1;
      return bad();
    case 'integer': {
      const n = typeof value === 'bigint' ? Number(value) : typeof value === 'string' && /^-?\d+$/.test(value) ? Number(value) : value;
      return typeof n === 'number' && Number.isSafeInteger(n) ? n : bad();
    }
  }
}

/**
 * Checks a row handed to an import: a declared table of the export (`allowed`), exactly its
 * columns, each value of its kind. Returns the problem, or null when it fits.
 *
 * @example
 * checkControlRow({ table: 'devices', row }); // null
 */
export function checkControlRow(item: ControlStateRow): string | null {
  const table = BY_NAME.get(item.table);
  if (table === undefined) return `unknown table ${JSON.stringify(item.table)}`;
  const columns = Object.keys(table.columns);
  const given = Object.keys(item.row);
  for (const c of given) if (!(c in table.columns)) return `${table.name}: unknown column ${c}`;
  for (const c of columns) if (!(c in item.row)) return `${table.name}: missing column ${c}`;
  for (const [c, kind] of Object.entries(table.columns)) {
    const v = item.row[c];
    if (v === null) continue;
    const fits =
      (kind === 'text' && typeof v === 'string') ||
      (kind === 'boolean' && typeof v === 'boolean') ||
      (kind === 'integer' && typeof v === 'number' && Number.isSafeInteger(v));
    if (!fits) return `${table.name}.${c}: expected ${kind}`;
  }
  return null;
}

/**
 * Whether `table` comes after `previous` in import order (or is the same): an import refuses
 * rows out of order, so a row never arrives before what it refers to.
 *
 * @example
 * inImportOrder('project', 'users'); // true
 */
export function inImportOrder(previous: string | null, table: string): boolean {
  if (previous === null) return true;
  const names = CONTROL_STATE_TABLES.map((x) => x.name as string);
  return names.indexOf(previous) <= names.indexOf(table);
}

/**
 * The problems of a schema against the declared list: each table and column of `schema`
 * (table → its columns) that is neither declared (copied, or `implied`) nor in
 * {@link NOT_COPIED}, and each declared table or column the schema lacks.
 *
 * @example
 * uncoveredSchema(new Map([['devices', ['id', 'public_key', 'colour']]])); // ['devices.colour is not in CONTROL_STATE_TABLES ...', ...]
 */
export function uncoveredSchema(schema: ReadonlyMap<string, readonly string[]>): string[] {
  const problems: string[] = [];
  for (const [name, columns] of schema) {
    if (name in NOT_COPIED) continue;
    const table = BY_NAME.get(name);
    if (table === undefined) {
      problems.push(`table ${name} is not in CONTROL_STATE_TABLES (nor NOT_COPIED): a move between stores would drop it`);
      continue;
    }
    for (const c of columns) {
      if (!(c in table.columns) && !(table.implied ?? []).includes(c)) {
        problems.push(`${name}.${c} is not in CONTROL_STATE_TABLES: a move between stores would drop it`);
      }
    }
    for (const c of Object.keys(table.columns)) if (!columns.includes(c)) problems.push(`${name}.${c} is declared but the schema lacks it`);
  }
  for (const table of CONTROL_STATE_TABLES)
    if (!schema.has(table.name)) problems.push(`table ${table.name} is declared but the schema lacks it`);
  return problems;
}

/**
 * A compare function ordering rows of `table` by its key, as every export yields them.
 *
 * @example
 * rows.sort(byKey(controlTable('devices')!));
 */
export function byKey(
  table: ControlTable,
): (a: Readonly<Record<string, ControlValue>>, b: Readonly<Record<string, ControlValue>>) => number {
  return (x, y) => {
    for (const k of table.key) {
      const a = x[k];
      const c = y[k];
      if (a === c) continue;
      if (typeof a === 'number' && typeof c === 'number') return a - c;
      return String(a) < String(c) ? -1 : 1;
    }
    return 0;
  };
}

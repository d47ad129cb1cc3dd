import { describeEdn as describe, type EdnValue, isEdnMap } from './edn-model.js';

// `:svc/audit-sinks`: where a running service ships the audit trail, its table of keys (the
// docs are generated from it) and its reader.

/** Where a running service delivers audit events and checkpoints, from `:svc/audit-sinks`. */
export interface AuditSinks {
  /** A JSON-lines file (relative paths from the project directory), or null for none. */
  readonly file: string | null;
  readonly fileMaxBytes: number;
  readonly fileKeep: number;
  readonly stdout: boolean;
  readonly batch: number;
  readonly pollMilliseconds: number;
}

/** One key of the `:svc/audit-sinks` map: how it is read, its default and its meaning (the docs table comes from here). */
export interface AuditSinkSetting {
  readonly key: string;
  readonly field: keyof AuditSinks;
  readonly kind: 'string' | 'integer' | 'boolean';
  readonly min?: number;
  readonly max?: number;
  readonly default: string | number | boolean | null;
  readonly meaning: string;
}

/**
 * Every key of `:svc/audit-sinks {...}` with its default and meaning. Without the map (or with
 * neither sink on) nothing is shipped; the trail stays in the control store either way.
 */
export const AUDIT_SINK_SETTINGS: readonly AuditSinkSetting[] = [
  {
    key: ':file',
    field: 'file',
    kind: 'string',
    default: null,
    meaning:
      'append every audit event and a signed checkpoint after each batch to this JSON-lines file (created 0600; a relative path is from the project directory). Refused, with nothing written, when it is a symbolic link, owned by another user or readable or writable by group or others, or in a directory its group or others can write (keep it in a dedicated one such as /var/log/svc, 0750). Each node ships the whole trail through its own cursor: with several nodes on one host or one shared directory, put `{node}` in the path (replaced by the shipping node\'s id, e.g. "/var/log/svc/audit-{node}.jsonl") so that each node writes its own file; every line names the node that shipped it (`shipped_by_node`)',
  },
  {
    key: ':file-max-bytes',
    field: 'fileMaxBytes',
    kind: 'integer',
    min: 4096,
    max: 1_073_741_824,
    default: 10_485_760,
    meaning: 'rotate the file before a line would make it larger than this: `audit.jsonl` becomes `audit.jsonl.1`, `.1` becomes `.2`, …',
  },
  {
    key: ':file-keep',
    field: 'fileKeep',
    kind: 'integer',
    min: 1,
    max: 1000,
    default: 5,
    meaning: 'how many rotated files to keep; older ones are deleted',
  },
  {
    key: ':stdout',
    field: 'stdout',
    kind: 'boolean',
    default: false,
    meaning: 'also write every event and checkpoint line to standard output, for container log collection',
  },
  {
    key: ':batch',
    field: 'batch',
    kind: 'integer',
    min: 1,
    max: 10_000,
    default: 500,
    meaning: 'events read and delivered per batch before the cursor is saved',
  },
  {
    key: ':poll-milliseconds',
    field: 'pollMilliseconds',
    kind: 'integer',
    min: 50,
    max: 60_000,
    default: 1000,
    meaning: 'how often the service looks for new events once it has delivered everything',
  },
];

/** The sinks when `:svc/audit-sinks` is absent: none. */
export const DEFAULT_AUDIT_SINKS: AuditSinks = Object.freeze(
  Object.fromEntries(AUDIT_SINK_SETTINGS.map((s) => [s.field, s.default])) as unknown as AuditSinks,
);

/**
 * Reads `:svc/audit-sinks` against {@link AUDIT_SINK_SETTINGS}, reporting every problem through `bad`.
 *
 * @example
 * const sinks = readAuditSinks(merged.get(':svc/audit-sinks'), bad); // DEFAULT_AUDIT_SINKS when absent
 */
export function readAuditSinks(v: EdnValue | undefined, bad: (key: string, message: string) => void): AuditSinks {
  if (v === undefined) return DEFAULT_AUDIT_SINKS;
  if (!isEdnMap(v)) {
    bad(':svc/audit-sinks', `expected a map such as {:file "audit.jsonl" :stdout true}, found ${describe(v)}`);
    return DEFAULT_AUDIT_SINKS;
  }
  const out: Record<string, string | number | boolean | null> = { ...DEFAULT_AUDIT_SINKS };
  for (const [k, value] of v) {
    const spec = AUDIT_SINK_SETTINGS.find((s) => s.key === k);
    const key = `:svc/audit-sinks ${k}`;
    if (spec === undefined) bad(key, `unknown key; expected one of ${AUDIT_SINK_SETTINGS.map((s) => s.key).join(', ')}`);
    else if (spec.kind === 'string') {
      if (typeof value === 'string' && value.length > 0) out[spec.field] = value;
      else bad(key, `expected a file path string, found ${describe(value)}`);
    } else if (spec.kind === 'boolean') {
      if (typeof value === 'boolean') out[spec.field] = value;
      else bad(key, `expected true or false, found ${describe(value)}`);
    } else if (
      typeof value !== 'number' ||
      !Number.isInteger(value) ||
      value < (spec.min ?? 0) ||
      value > (spec.max ?? Number.MAX_SAFE_INTEGER)
    ) {
      bad(key, `expected a whole number from ${spec.min} to ${spec.max}, found ${describe(value)}`);
    } else out[spec.field] = value;
  }
  return out as unknown as AuditSinks;
}

/**
 * What an audit sink file and its directory must be before a running service appends the trail
 * to them. Pure: the adapter stats the file (opened without following a symbolic link) and the
 * directory, and applies the answer.
 */

/** What the rules read of a file or directory: `fs.Stats` fits. */
export interface SinkPathStat {
  readonly uid: number;
  readonly mode: number;
  isFile(): boolean;
  isDirectory(): boolean;
}

/**
 * Why the audit sink file (opened with `O_NOFOLLOW`, then `fstat`ed) must not be written, or
 * null when it may: it must be a regular file owned by the service's own user and neither
 * readable nor writable by group or others. A pre-existing file keeps its mode when opened,
 * so a `0644` file would publish every event to every local user; one owned by someone else
 * could be read, truncated or swapped by them.
 *
 * @example
 * sinkFileRefusal(fstatSync(fd), process.getuid()); // null, or 'its mode 644 lets group or others read or write it'
 */
export function sinkFileRefusal(stat: SinkPathStat, uid: number | null): string | null {
  if (!stat.isFile()) return 'it is not a regular file';
  if (uid !== null && stat.uid !== uid) return `it is owned by uid ${stat.uid}, not by the service's uid ${uid}`;
  if ((stat.mode & 0o077) !== 0) return `its mode ${(stat.mode & 0o777).toString(8)} lets group or others read or write it`;
  return null;
}

/**
 * Why the directory of the audit sink must not hold it, or null when it may: it must be a
 * directory that neither its group nor others can write (no bit of `0o022`), like the file
 * rule, which refuses any group access. In a directory someone else can write, they could
 * replace the file (or a rotated one) between two appends, with a link to a file of their
 * choice. So the sink belongs in a dedicated directory such as `/var/log/svc` (0750 or 0700):
 * a shared one is refused, a sticky world-writable `/tmp` and a group-writable `/var/log`
 * (Ubuntu's is 0775, group `syslog`) included, by design.
 *
 * @example
 * sinkDirectoryRefusal(statSync('/var/log/svc')); // null
 */
export function sinkDirectoryRefusal(stat: SinkPathStat): string | null {
  if (!stat.isDirectory()) return 'it is not a directory';
  if ((stat.mode & 0o022) !== 0) return `its mode ${(stat.mode & 0o7777).toString(8)} lets group or others write in it`;
  return null;
}

/** The placeholder in `:svc/audit-sinks :file` replaced by the shipping node's id. */
export const AUDIT_SINK_NODE_PLACEHOLDER = '{node}';

/**
 * The sink file path a node writes: the configured path with every `{node}` replaced by the
 * node's id. Each node ships the whole trail from its own cursor, so nodes that share a host (or
 * a mounted log directory) need one file each, or every event lands in one file once per node;
 * `{node}` gives each its own. Without a node key (`nodeId` null) the placeholder cannot be
 * filled and the path is refused.
 *
 * @throws {TypeError} when the path holds `{node}` and there is no node id.
 * @example
 * auditSinkPathFor('/var/log/svc/audit-{node}.jsonl', '7K2M-...-C'); // "/var/log/svc/audit-7K2M-...-C.jsonl"
 */
export function auditSinkPathFor(template: string, nodeId: string | null): string {
  if (!template.includes(AUDIT_SINK_NODE_PLACEHOLDER)) return template;
  if (nodeId === null) throw new TypeError(`the audit sink path ${template} names {node}, but this service has no node key to name it by`);
  return template.split(AUDIT_SINK_NODE_PLACEHOLDER).join(nodeId);
}

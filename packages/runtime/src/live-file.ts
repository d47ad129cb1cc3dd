import { statSync } from 'node:fs';

/**
 * What identifies a file's current content without reading it: inode, size and modification
 * time (an atomic replace changes the inode), or `none` when it is missing.
 *
 * @example
 * fileStamp('/srv/demo/.svc/control/node.key'); // '1234:119:1763900000000.5'
 */
export function fileStamp(file: string): string {
  try {
    const s = statSync(file);
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  } catch {
    return 'none';
  }
}

/**
 * A value loaded from files and kept as they are on disk: `load` runs again when `stamp`
 * (built from {@link fileStamp}) changes; a load that fails keeps the last good value and
 * reports why. With `everyMs`, the stamp is looked at no more often than that (by `now`, a
 * monotonic clock in ms), so a per-request caller does not pay a `stat` per call.
 *
 * @example
 * const identity = liveFileValue(() => fileStamp(keyFile), () => loadNodeIdentity(keyFile), (err) => log.error({ err }));
 */
export function liveFileValue<T>(
  stamp: () => string,
  load: () => T,
  onReloadError: (error: unknown) => void,
  throttle?: { readonly everyMs: number; readonly now: () => number },
): () => T {
  let seen = stamp();
  let current = load();
  let checkedAt = throttle?.now() ?? 0;
  return () => {
    if (throttle !== undefined) {
      const t = throttle.now();
      if (t - checkedAt < throttle.everyMs) return current;
      checkedAt = t;
    }
    const now = stamp();
    if (now !== seen) {
      try {
        current = load();
        seen = now;
      } catch (error) {
        onReloadError(error);
      }
    }
    return current;
  };
}

import { chmodSync, closeSync, fsyncSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { nodeIdOf, type RetiredNodeKeyJson, rfc3339 } from '@svc/core';
import { RuntimeError } from './errors.js';

/** What `<control>/node-key-history.json` holds: when the current key took over, and every key before it. */
export interface NodeKeyHistory {
  readonly current: { readonly node_id: string; readonly public_key: string; readonly valid_from: string } | null;
  /** Newest first. */
  readonly previous: readonly RetiredNodeKeyJson[];
}

/**
 * The public record of the node's keys, beside the node key: not a secret (it holds public keys
 * and times only), but it lives in the control directory so only the node's owner can change it.
 *
 * @example
 * nodeKeyHistoryFile('/srv/demo/.svc/control/node-key.pem'); // "/srv/demo/.svc/control/node-key-history.json"
 */
export function nodeKeyHistoryFile(nodeKey: string): string {
  return join(dirname(nodeKey), 'node-key-history.json');
}

/**
 * The node key history in `file`; empty when there is none yet.
 *
 * @throws {RuntimeError} when it exists but is not readable JSON.
 * @example
 * const { previous } = readNodeKeyHistory(nodeKeyHistoryFile(project.nodeKey));
 */
export function readNodeKeyHistory(file: string): NodeKeyHistory {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { current: null, previous: [] };
    throw error;
  }
  try {
    const value = JSON.parse(text) as NodeKeyHistory;
    if (!Array.isArray(value.previous)) throw new TypeError('no "previous" list');
    for (const k of value.previous as unknown[]) {
      const e = k as Partial<RetiredNodeKeyJson> | null;
      if (
        typeof e?.node_id !== 'string' ||
        typeof e.public_key !== 'string' ||
        !/^[0-9a-f]{64}$/.test(e.public_key) ||
        (e.valid_from !== null && typeof e.valid_from !== 'string') ||
        typeof e.valid_until !== 'string'
      ) {
        throw new TypeError('an entry of "previous" is not {node_id, public_key, valid_from, valid_until}');
      }
    }
    return value;
  } catch (error) {
    throw new RuntimeError(`the node key history ${file} is not readable JSON (${(error as Error).message}); restore it from a backup`);
  }
}

/**
 * Replaces `file` with `text` so a reader sees the old or the new content, never a part: written
 * to a temporary file beside it, fsynced, renamed over it, and the directory fsynced.
 *
 * @example
 * writeFileAtomic('/srv/demo/.svc/control/cursor.json', '{"seq":3}\n', 0o600);
 */
export function writeFileAtomic(file: string, text: string, mode: number): void {
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w', mode);
  try {
    writeFileSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  chmodSync(tmp, mode);
  renameSync(tmp, file);
  const dir = openSync(dirname(file), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

/**
 * Records that the key `publicKeyHex` became the node key at `now` (a new key of `svc auth init`
 * or of a first start), so discovery can say since when it is valid.
 *
 * @example
 * recordNewNodeKey(project.nodeKey, identity.publicKeyHex, Date.now());
 */
export function recordNewNodeKey(nodeKey: string, publicKeyHex: string, now: number): void {
  const file = nodeKeyHistoryFile(nodeKey);
  const previous = readNodeKeyHistory(file).previous;
  const identity = { node_id: nodeIdOf(publicKeyHex), public_key: publicKeyHex, valid_from: rfc3339(now) };
  writeFileAtomic(file, `${JSON.stringify({ current: identity, previous }, null, 2)}\n`, 0o600);
}

import { generateKeyPairSync } from 'node:crypto';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { type RetiredNodeKeyJson, rfc3339 } from '@svc/core';
import { createNodeIdentity, type NodeIdentity } from '@svc/server';
import { RuntimeError } from './errors.js';
import { fileStamp, liveFileValue } from './live-file.js';
import { type NodeKeyHistory, nodeKeyHistoryFile, readNodeKeyHistory, writeFileAtomic } from './node-key-history.js';

/**
 * The node's identity from its key file and the key history beside it: the current key, since
 * when it is valid (null when the history does not say, e.g. a key from before rotation was
 * recorded), and the keys before it with their windows.
 *
 * @throws {RuntimeError} when the key or the history cannot be read.
 * @example
 * const identity = loadNodeIdentity(project.nodeKey);
 */
export function loadNodeIdentity(nodeKey: string): NodeIdentity {
  let pem: string;
  let base: NodeIdentity;
  try {
    pem = readFileSync(nodeKey, 'utf8');
    base = createNodeIdentity(pem);
  } catch (error) {
    throw new RuntimeError(`cannot use the node key ${nodeKey}: ${(error as Error).message}`, { cause: error });
  }
  const history = readNodeKeyHistory(nodeKeyHistoryFile(nodeKey));
  const validFrom = history.current?.public_key === base.publicKeyHex ? history.current.valid_from : null;
  return createNodeIdentity(pem, {
    validFrom,
    previousKeys: history.previous.filter((k) => k.public_key !== base.publicKeyHex),
  });
}

/**
 * The node identity as it is on disk now: re-read when the key file or its history changed
 * (two `stat` calls per use), so a running node signs with a key `svc node rotate-key` made
 * without a restart. A key that cannot be read keeps the last good identity and reports why.
 *
 * @example
 * const identity = liveNodeIdentity(project.nodeKey, (err) => log.error({ err }, 'node key reload failed'));
 * await buildNodeApp({ deps, identity, components });
 */
export function liveNodeIdentity(nodeKey: string, onReloadError: (error: unknown) => void): () => NodeIdentity {
  const historyFile = nodeKeyHistoryFile(nodeKey);
  return liveFileValue(
    () => `${fileStamp(nodeKey)}|${fileStamp(historyFile)}`,
    () => loadNodeIdentity(nodeKey),
    onReloadError,
  );
}

/**
 * Replaces the node key with a new Ed25519 key at `now`: the old key's public half goes to the
 * history with its window (valid until `now`), then the new private key replaces the old one
 * (each file replaced atomically, the history first, so a crash in between leaves the old key
 * in use and merely listed). The old private key is gone afterwards: nothing can sign as it.
 *
 * @example
 * const { previous, current } = rotateNodeKey(project.nodeKey, Date.now());
 */
export function rotateNodeKey(nodeKey: string, now: number): { readonly previous: NodeIdentity; readonly current: NodeIdentity } {
  // Two rotations at once would each retire the same key and one would drop the other's from
  // the history: older reports it signed would stop verifying. One at a time.
  const lock = join(dirname(nodeKey), 'node-key.lock');
  let fd: number;
  try {
    fd = openSync(lock, 'wx', 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    throw new RuntimeError(`another node key rotation holds ${lock}; wait for it, or remove the file if no rotation is running`);
  }
  try {
    return rotateLocked(nodeKey, now);
  } finally {
    closeSync(fd);
    rmSync(lock, { force: true });
  }
}

function rotateLocked(nodeKey: string, now: number): { readonly previous: NodeIdentity; readonly current: NodeIdentity } {
  const previous = loadNodeIdentity(nodeKey);
  const at = rfc3339(now);
  const pem = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  const next = createNodeIdentity(pem);
  const retired: RetiredNodeKeyJson = {
    node_id: previous.nodeId,
    public_key: previous.publicKeyHex,
    valid_from: previous.validFrom ?? null,
    valid_until: at,
  };
  const history: NodeKeyHistory = {
    current: { node_id: next.nodeId, public_key: next.publicKeyHex, valid_from: at },
    previous: [retired, ...(previous.previousKeys ?? [])],
  };
  writeFileAtomic(nodeKeyHistoryFile(nodeKey), `${JSON.stringify(history, null, 2)}\n`, 0o600);
  writeFileAtomic(nodeKey, pem, 0o600);
  return { previous, current: loadNodeIdentity(nodeKey) };
}

// The cluster's assertion key set, kept in the control store: every node reads the same set, a
// rotation made on any node is one compare-and-set of the stored set (the next set decided by
// core's rules, `rotateAssertionKeySet`), and each change is audited in the same transaction.
import { type KeyEncryptionKey, openAssertionKeySet, sealAssertionKeySet } from '../assertion-key-seal.js';
import {
  type AssertionKeyRotation,
  type AssertionKeySetJson,
  assertionSigningKey,
  type FreshAssertionKey,
  firstAssertionKeySet,
  pruneAssertionKeySet,
  rotateAssertionKeySet,
} from '../assertion-keys.js';
import type { AuthDeps } from '../deps.js';
import { auditDraft } from './event.js';

/** How a node opens and seals the cluster's key set. */
export interface AssertionKeyCustody {
  /** The KEKs this node holds: the one it seals with first, then any previous one it still opens with. Empty: none. */
  readonly keks: readonly KeyEncryptionKey[];
  /** Whether a private half kept in the clear is refused (a store other than the embedded one). */
  readonly requireSealed: boolean;
}

/** The cluster's key set as a node reads it: opened, with the stored version it was read at. */
export interface ClusterAssertionKeys {
  readonly version: number;
  readonly set: AssertionKeySetJson;
  readonly updatedAt: number;
}

/**
 * The cluster's key set as stored now, opened with the node's KEKs; null before the first one.
 *
 * @throws {AssertionKeySealError} when it does not open (another KEK, altered, in the clear where refused).
 * @example
 * const keys = await readClusterAssertionKeys(deps, custody);
 */
export async function readClusterAssertionKeys(
  deps: Pick<AuthDeps, 'store'>,
  custody: AssertionKeyCustody,
): Promise<ClusterAssertionKeys | null> {
  const record = await deps.store.getAssertionKeys();
  if (record === null) return null;
  const { set } = openAssertionKeySet(record.keySet, custody.keks, { requireSealed: custody.requireSealed });
  return { version: record.version, set, updatedAt: record.updatedAt };
}

/** What {@link ensureClusterAssertionKeys} found or did. */
export interface EnsuredAssertionKeys extends ClusterAssertionKeys {
  /** `generated` or `imported` when this call saved the first set; `resealed` when it re-sealed the stored one; null when it only read. */
  readonly change: 'generated' | 'imported' | 'resealed' | null;
}

/**
 * The cluster's key set, made on first need: the set `imported` (a node's former
 * `assertion-keys.json`, pruned at `now`) when given, else a first key signing from now; the save
 * is a compare-and-set from "none", so of nodes starting together one set wins and every node
 * uses it. A set kept in the clear, or sealed under a previous KEK, is sealed again under the
 * node's first KEK (`app.assertion_keys_resealed`). Each save is audited in its transaction
 * (`app.assertion_keys_created` with `source`, never a key).
 *
 * @throws {AssertionKeySealError} when the stored set does not open with the node's KEKs.
 * @example
 * const keys = await ensureClusterAssertionKeys(deps, custody, { fresh, imported: null });
 */
export async function ensureClusterAssertionKeys(
  deps: Pick<AuthDeps, 'store' | 'clock' | 'random'>,
  custody: AssertionKeyCustody,
  first: { readonly fresh: FreshAssertionKey; readonly imported: AssertionKeySetJson | null },
): Promise<EnsuredAssertionKeys> {
  const kek = custody.keks[0] ?? null;
  const record = await deps.store.getAssertionKeys();
  if (record === null) {
    const now = deps.clock.now();
    const imported = first.imported === null ? null : pruneAssertionKeySet(first.imported, now);
    const set = imported !== null && imported.keys.length > 0 ? imported : firstAssertionKeySet(first.fresh, now);
    const source = set === imported ? 'imported' : 'generated';
    const signing = assertionSigningKey(set, now);
    const saved = await deps.store.saveAssertionKeys({ expectedVersion: 0, keySet: sealAssertionKeySet(set, kek, deps.random), now }, [
      auditDraft(deps, 'app.assertion_keys_created', {
        data: { source, keys: set.keys.length, signing_kid: signing?.kid ?? null, sealed_with: kek?.id ?? null },
      }),
    ]);
    if (saved.saved) return { version: saved.record.version, set, updatedAt: saved.record.updatedAt, change: source };
    // Another node saved the first set meanwhile: that one is the cluster's.
    const read = await readClusterAssertionKeys(deps, custody);
    if (read === null) throw new Error('the assertion key set was saved by another node, and then vanished');
    return { ...read, change: null };
  }
  const opened = openAssertionKeySet(record.keySet, custody.keks, { requireSealed: custody.requireSealed });
  if (!opened.reseal || kek === null) return { version: record.version, set: opened.set, updatedAt: record.updatedAt, change: null };
  const now = deps.clock.now();
  const saved = await deps.store.saveAssertionKeys(
    { expectedVersion: record.version, keySet: sealAssertionKeySet(opened.set, kek, deps.random), now },
    [auditDraft(deps, 'app.assertion_keys_resealed', { data: { sealed_with: kek.id, was_clear: opened.clear } })],
  );
  if (saved.saved) return { version: saved.record.version, set: opened.set, updatedAt: saved.record.updatedAt, change: 'resealed' };
  const read = await readClusterAssertionKeys(deps, custody);
  if (read === null) throw new Error('the assertion key set vanished while it was being sealed again');
  return { ...read, change: null };
}

/** What {@link rotateClusterAssertionKeys} led to. */
export type ClusterAssertionKeyRotation =
  | (AssertionKeyRotation & { readonly version?: number })
  /** Another node changed the set between this node's read and its save: nothing written. */
  | { readonly outcome: 'conflict' };

/**
 * A rotation of the cluster's key set at the clock's now (core's rules: published at once, signs
 * after the pre-publication, the previous key kept for the overlap; `immediate` withdraws every
 * other key at once). The new set is saved as a compare-and-set of the version read, with
 * `app.assertion_key_rotated` in the same transaction, so of two nodes rotating at once exactly
 * one wins and the other answers `conflict`. Without any set yet, the new key is the first.
 *
 * @throws {AssertionKeySealError} when the stored set does not open with the node's KEKs.
 * @example
 * const r = await rotateClusterAssertionKeys(deps, custody, { fresh, immediate: false });
 */
export async function rotateClusterAssertionKeys(
  deps: Pick<AuthDeps, 'store' | 'clock' | 'random'>,
  custody: AssertionKeyCustody,
  input: { readonly fresh: FreshAssertionKey; readonly immediate: boolean },
): Promise<ClusterAssertionKeyRotation> {
  const current = await readClusterAssertionKeys(deps, custody);
  const now = deps.clock.now();
  const rotation = rotateAssertionKeySet(current?.set ?? { version: 1, keys: [] }, input.fresh, now, { immediate: input.immediate });
  if (rotation.outcome === 'pending') return rotation;
  const { next, previous } = rotation;
  const saved = await deps.store.saveAssertionKeys(
    { expectedVersion: current?.version ?? 0, keySet: sealAssertionKeySet(rotation.set, custody.keks[0] ?? null, deps.random), now },
    [
      auditDraft(deps, 'app.assertion_key_rotated', {
        data: { kid: next.kid, signs_from: next.signs_from, previous_kid: previous?.kid ?? null, immediate: input.immediate },
      }),
    ],
  );
  if (!saved.saved) return { outcome: 'conflict' };
  return { ...rotation, version: saved.record.version };
}

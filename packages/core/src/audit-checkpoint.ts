import { type AuditEvent, GENESIS_HASH } from './audit.js';
import { canonicalJson } from './canonical-json.js';
import { verifyEd25519 } from './ed25519.js';
import { nodeIdOf } from './node-id.js';
import { nodeKeyValidAt } from './node-keys.js';
import { rfc3339 } from './time.js';
import type { RetiredNodeKeyJson } from './wire/node.js';

/** The `type` inside every checkpoint payload: a signature over it means nothing else. */
export const AUDIT_CHECKPOINT_TYPE = 'svc-audit-checkpoint';

/** What a checkpoint asserts: the project's audit chain had `length` events ending in `head`, at `at`. */
export interface AuditCheckpointPayload {
  readonly type: typeof AUDIT_CHECKPOINT_TYPE;
  readonly project: string;
  readonly length: number;
  /** The hash of event #length (the genesis hash for an empty chain). */
  readonly head: string;
  readonly at: string;
}

/** A checkpoint signed with Ed25519 over the RFC 8785 canonical JSON of its payload: one JSON line in an export. */
export interface SignedAuditCheckpoint {
  readonly payload: AuditCheckpointPayload;
  readonly alg: 'Ed25519';
  readonly canonicalization: 'RFC8785';
  readonly public_key: string;
  readonly node_id: string;
  readonly signature: string;
}

/**
 * Signs a checkpoint of the chain head `{seq, hash}` (null for an empty chain) of `project`
 * at `now`, with `sign` (pure Ed25519 over the exact bytes) by the key `publicKeyHex`.
 *
 * @example
 * const cp = signAuditCheckpoint({ project, head: await store.auditHead(), now: clock.now() }, identity);
 */
export function signAuditCheckpoint(
  input: { readonly project: string; readonly head: { readonly seq: number; readonly hash: string } | null; readonly now: number },
  signer: { readonly publicKeyHex: string; sign(message: Uint8Array): Uint8Array },
): SignedAuditCheckpoint {
  const payload: AuditCheckpointPayload = {
    type: AUDIT_CHECKPOINT_TYPE,
    project: input.project,
    length: input.head?.seq ?? 0,
    head: input.head?.hash ?? GENESIS_HASH,
    at: rfc3339(input.now),
  };
  const signature = Buffer.from(signer.sign(Buffer.from(canonicalJson({ ...payload }), 'utf8'))).toString('hex');
  return {
    payload,
    alg: 'Ed25519',
    canonicalization: 'RFC8785',
    public_key: signer.publicKeyHex,
    node_id: nodeIdOf(signer.publicKeyHex),
    signature,
  };
}

/** The outcome of checking one exported checkpoint against the chain as it is now. */
export type CheckpointVerdict =
  | { readonly ok: true }
  | {
      readonly ok: false;
      /** `malformed`, `bad_signature`, `other_key`, `other_project`: the checkpoint proves nothing; `truncated`, `rewritten`: the chain lost or changed what it had. */
      readonly problem: 'malformed' | 'bad_signature' | 'other_key' | 'other_project' | 'truncated' | 'rewritten';
      readonly detail: string;
    };

const HEX64 = /^[0-9a-f]{64}$/;

/**
 * Checks an exported checkpoint (parsed JSON) against the current chain `events` (already
 * checked with `verifyAuditChain`, so event #n is `events[n - 1]`) of `project`: its signature
 * by `publicKeyHex` (the node key it must come from), or by one of `previousKeys` made inside
 * that key's window (a checkpoint exported before a key rotation), must verify, and the chain must still hold
 * event #length with hash `head`. A chain shorter than the checkpoint was truncated; a
 * different hash there means the chain was rewritten (even if it was re-sealed with svc's own
 * code, it cannot reproduce the exported head).
 *
 * @example
 * const verdict = checkAuditCheckpoint(JSON.parse(line), { project, events, publicKeyHex });
 */
export function checkAuditCheckpoint(
  value: unknown,
  chain: {
    readonly project: string;
    readonly events: readonly AuditEvent[];
    readonly publicKeyHex: string;
    readonly previousKeys?: readonly RetiredNodeKeyJson[];
  },
): CheckpointVerdict {
  const cp = value as Partial<SignedAuditCheckpoint> | null;
  const p = cp?.payload as Partial<AuditCheckpointPayload> | undefined;
  if (
    typeof cp !== 'object' ||
    cp === null ||
    typeof p !== 'object' ||
    p === null ||
    p.type !== AUDIT_CHECKPOINT_TYPE ||
    typeof p.project !== 'string' ||
    !Number.isSafeInteger(p.length) ||
    (p.length as number) < 0 ||
    typeof p.head !== 'string' ||
    !HEX64.test(p.head) ||
    typeof p.at !== 'string' ||
    typeof cp.public_key !== 'string' ||
    typeof cp.signature !== 'string' ||
    !/^[0-9a-f]{128}$/i.test(cp.signature)
  ) {
    return { ok: false, problem: 'malformed', detail: 'not a signed audit checkpoint' };
  }
  const payload: AuditCheckpointPayload = {
    type: AUDIT_CHECKPOINT_TYPE,
    project: p.project,
    length: p.length as number,
    head: p.head,
    at: p.at,
  };
  if (
    !/^[0-9a-f]{64}$/i.test(cp.public_key) ||
    !nodeKeyValidAt({ public_key: chain.publicKeyHex, previous_keys: chain.previousKeys ?? [] }, cp.public_key, payload.at)
  ) {
    return {
      ok: false,
      problem: 'other_key',
      detail: `signed by ${cp.public_key}, not by this node's key (nor by a previous one within its window)`,
    };
  }
  const message = Buffer.from(canonicalJson({ ...payload }), 'utf8');
  if (!verifyEd25519(cp.public_key, message, Buffer.from(cp.signature, 'hex'))) {
    return { ok: false, problem: 'bad_signature', detail: 'the signature does not verify' };
  }
  if (payload.project !== chain.project) {
    return { ok: false, problem: 'other_project', detail: `it is about project ${payload.project}` };
  }
  if (chain.events.length < payload.length) {
    return {
      ok: false,
      problem: 'truncated',
      detail: `the chain had ${payload.length} events at ${payload.at}; it now has ${chain.events.length}`,
    };
  }
  const at = payload.length === 0 ? GENESIS_HASH : chain.events[payload.length - 1]?.hash;
  if (at !== payload.head) {
    return {
      ok: false,
      problem: 'rewritten',
      detail: `event #${payload.length} had hash ${payload.head} at ${payload.at}; it now has ${at ?? 'none'}`,
    };
  }
  return { ok: true };
}

/** One checkpoint line as {@link reviewAuditCheckpoints} reports it (the wire's `AuditCheckpointReviewJson`). */
export interface AuditCheckpointReview {
  readonly line: number;
  readonly at: string | null;
  readonly length: number | null;
  readonly head: string | null;
  readonly node_id: string | null;
  readonly ok: boolean;
  readonly problem: Exclude<CheckpointVerdict, { ok: true }>['problem'] | null;
  readonly detail: string | null;
}

/**
 * Reviews an export of signed checkpoints (the text of the file, one JSON per line) against the
 * chain as it is now and the node key history: every line is checked with
 * {@link checkAuditCheckpoint}; the answer counts them all and the failures among them, and
 * lists the `latest` ones, newest (last in the file) first, each with what it claims (time,
 * length, head, signing node) and its verdict. A line that is not a checkpoint is listed as
 * `malformed` with what could not be read left null.
 *
 * @example
 * const review = reviewAuditCheckpoints(readFileSync(file, 'utf8'), { project, events, publicKeyHex }, 20);
 */
export function reviewAuditCheckpoints(
  text: string,
  chain: Parameters<typeof checkAuditCheckpoint>[1],
  latest: number,
): { readonly total: number; readonly failed: number; readonly checkpoints: readonly AuditCheckpointReview[] } {
  const reviews: AuditCheckpointReview[] = [];
  let failed = 0;
  text.split('\n').forEach((raw, i) => {
    if (raw.trim() === '') return;
    let value: unknown = null;
    try {
      value = JSON.parse(raw);
    } catch {
      value = null;
    }
    const verdict = checkAuditCheckpoint(value, chain);
    if (!verdict.ok) failed++;
    const cp = (typeof value === 'object' && value !== null ? value : {}) as Partial<SignedAuditCheckpoint>;
    const p = (typeof cp.payload === 'object' && cp.payload !== null ? cp.payload : {}) as Partial<AuditCheckpointPayload>;
    reviews.push({
      line: i + 1,
      at: typeof p.at === 'string' ? p.at : null,
      length: Number.isSafeInteger(p.length) ? (p.length as number) : null,
      head: typeof p.head === 'string' && HEX64.test(p.head) ? p.head : null,
      // The node of the key that signed it, derived from that key (not the line's own claim).
      node_id: typeof cp.public_key === 'string' && /^[0-9a-f]{64}$/.test(cp.public_key) ? nodeIdOf(cp.public_key) : null,
      ok: verdict.ok,
      problem: verdict.ok ? null : verdict.problem,
      detail: verdict.ok ? null : verdict.detail,
    });
  });
  const size = Math.max(0, Math.floor(latest));
  return { total: reviews.length, failed, checkpoints: reviews.slice(Math.max(0, reviews.length - size)).reverse() };
}

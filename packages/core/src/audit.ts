import { canonicalJson } from './canonical-json.js';
import type { Realm } from './realm.js';
import { rfc3339 } from './time.js';
import { sha256Hex } from './tokens.js';
import type { AuditEventJson } from './wire/management.js';

/** Every kind of audit event. */
export const AUDIT_EVENT_TYPES = [
  'bootstrap.issued',
  'device.enrolled',
  'device.removed',
  'session.created',
  'session.rotated',
  'session.rotated_in_grace',
  'session.refresh_reused',
  'session.revoked',
  'signin.failed',
  'pairing.prepared',
  'pairing.completed',
  'pairing.failed',
  'pairing.burned',
  'node.key_rotated',
  'app.assertion_key_rotated',
  'app.assertion_keys_created',
  'app.assertion_keys_resealed',
  'link.created',
  'link.removed',
  'link.renamed',
  'provider.signin',
  'provider.signin_failed',
  'user.created',
  'user.updated',
  'user.disabled',
  'user.enabled',
  'user.removed',
  'group.saved',
  'group.removed',
  'scim_token.created',
  'scim_token.revoked',
  'store.migrated',
] as const;

/** A kind of audit event. */
export type AuditEventType = (typeof AUDIT_EVENT_TYPES)[number];

/** Extra facts of an event: flat, never a token, key or secret. */
export type AuditData = Readonly<Record<string, string | number | boolean | null>>;

/** An event as a use case describes it, before the store places it in the chain. */
export interface AuditEventDraft {
  readonly id: string;
  readonly at: number;
  readonly type: AuditEventType;
  readonly realm: Realm | null;
  readonly subject: string | null;
  readonly deviceId: string | null;
  readonly sessionId: string | null;
  readonly data: AuditData;
}

/** An event in the chain: its position, the previous event's hash and its own. */
export interface AuditEvent extends AuditEventDraft {
  readonly seq: number;
  readonly prevHash: string;
  readonly hash: string;
}

/** The hash that precedes the first event. */
export const GENESIS_HASH = '0'.repeat(64);

/** The wire form of an event (snake_case, RFC 3339 times), as the API and CLI print it. */
export function auditEventToJson(event: AuditEvent): AuditEventJson {
  return { ...hashedFields(event), hash: event.hash };
}

function hashedFields(event: Omit<AuditEvent, 'hash'>): Omit<AuditEventJson, 'hash'> {
  return {
    id: event.id,
    seq: event.seq,
    at: rfc3339(event.at),
    type: event.type,
    realm: event.realm,
    subject: event.subject,
    device_id: event.deviceId,
    session_id: event.sessionId,
    data: { ...event.data },
    prev_hash: event.prevHash,
  };
}

/**
 * Places a draft in the chain after an event with sequence `prevSeq` and hash `prevHash`:
 * `hash = SHA-256(canonical JSON of the wire form without "hash")`, which includes
 * `prev_hash`. Stores call this inside the transaction that records the change.
 *
 * @example
 * const sealed = sealAuditEvent(draft, head?.seq ?? 0, head?.hash ?? GENESIS_HASH);
 */
export function sealAuditEvent(draft: AuditEventDraft, prevSeq: number, prevHash: string): AuditEvent {
  // Field by field, not `{ ...draft, seq, prevHash }`: V8 adds properties after a leading
  // spread the slow way (about 1 µs each), and every audited change seals an event.
  const unsealed = {
    id: draft.id,
    at: draft.at,
    type: draft.type,
    realm: draft.realm,
    subject: draft.subject,
    deviceId: draft.deviceId,
    sessionId: draft.sessionId,
    data: draft.data,
    seq: prevSeq + 1,
    prevHash,
  };
  const hash = sha256Hex(canonicalJson(hashedFields(unsealed)));
  return Object.freeze({ hash, ...unsealed });
}

/** The outcome of checking a chain. */
export type ChainVerdict =
  | { readonly ok: true; readonly length: number; readonly head: string }
  | { readonly ok: false; readonly seq: number; readonly problem: string };

/**
 * Checks that events form an unbroken chain from the genesis: sequence numbers 1..n with no
 * gap, each `prev_hash` the hash of the one before, each hash recomputed from its content.
 * Finds an edited, removed, inserted or reordered event.
 *
 * @example
 * const verdict = verifyAuditChain(await store.listAuditEvents({ afterSeq: 0, limit: 1e9 }));
 */
export function verifyAuditChain(events: Iterable<AuditEvent>): ChainVerdict {
  let prev = GENESIS_HASH;
  let expectedSeq = 1;
  for (const event of events) {
    if (event.seq !== expectedSeq) {
      return { ok: false, seq: event.seq, problem: `expected event #${expectedSeq} but found #${event.seq}` };
    }
    if (event.prevHash !== prev) {
      return { ok: false, seq: event.seq, problem: 'prev_hash does not match the previous event' };
    }
    const recomputed = sha256Hex(canonicalJson(hashedFields(event)));
    if (recomputed !== event.hash) {
      return { ok: false, seq: event.seq, problem: 'content does not match its hash (edited)' };
    }
    prev = event.hash;
    expectedSeq++;
  }
  return { ok: true, length: expectedSeq - 1, head: prev };
}

import { type Realm, type RetiredNodeKeyJson, rfc3339, type StoreStats } from '@svc/core';
import canonicalize from 'canonicalize';
import type { NodeIdentity } from './identity.js';
import { NODE_API_VERSION } from './routes.js';

/** The `type` inside every signed diagnostics payload: a signature over it means nothing else. */
export const DIAGNOSTICS_TYPE = 'svc-edge-diagnostics';

/** Aggregate counters of the control store at one moment. Never per-user data. */
export interface DiagnosticsPayload {
  readonly type: typeof DIAGNOSTICS_TYPE;
  readonly api_version: typeof NODE_API_VERSION;
  readonly node_id: string;
  readonly project_id: string;
  /** The caller's nonce, echoed inside the signature: proves the answer is fresh. */
  readonly nonce: string;
  readonly generated_at: string;
  readonly devices: Readonly<Record<Realm, number>>;
  readonly active_sessions: Readonly<Record<Realm, number>>;
  readonly counters: {
    readonly enrollments: number;
    readonly device_removals: number;
    readonly sign_ins: number;
    readonly sign_in_failures: number;
    readonly rotations: number;
    readonly grace_rotations: number;
    readonly refresh_reuses: number;
    readonly revocations: number;
    readonly bootstrap_tokens_issued: number;
  };
  readonly pairing: {
    readonly prepared: number;
    readonly completed: number;
    readonly failed: number;
    readonly burned: number;
  };
  readonly audit: { readonly length: number; readonly head: string };
}

/** The answer of `POST /edge/0-alpha/diagnostics`: the payload, and the node's signature over its RFC 8785 form. */
export interface SignedDiagnosticsJson {
  readonly payload: DiagnosticsPayload;
  /** Ed25519 over the UTF-8 bytes of the RFC 8785 canonical JSON of `payload`, 128 hex digits. */
  readonly signature: string;
  readonly alg: 'Ed25519';
  readonly canonicalization: 'RFC8785';
  readonly public_key: string;
  readonly node_id: string;
  /** The keys this node signed with before (outside the signature): check an older report against them, within their windows. */
  readonly previous_keys: readonly RetiredNodeKeyJson[];
}

/**
 * The diagnostics payload for store counters: per-realm device and live-session counts, event
 * counts by kind, the audit chain's length and head. Only aggregates: no subject, device,
 * session or key ever appears.
 *
 * @example
 * const payload = diagnosticsPayload(await store.stats(now), { nodeId, projectId, nonce, now });
 */
export function diagnosticsPayload(
  stats: StoreStats,
  input: { readonly nodeId: string; readonly projectId: string; readonly nonce: string; readonly now: number },
): DiagnosticsPayload {
  const n = (type: string): number => stats.events[type] ?? 0;
  return {
    type: DIAGNOSTICS_TYPE,
    api_version: NODE_API_VERSION,
    node_id: input.nodeId,
    project_id: input.projectId,
    nonce: input.nonce,
    generated_at: rfc3339(input.now),
    devices: { management: stats.devices.management, application: stats.devices.application },
    active_sessions: { management: stats.activeSessions.management, application: stats.activeSessions.application },
    counters: {
      enrollments: n('device.enrolled'),
      device_removals: n('device.removed'),
      sign_ins: n('session.created'),
      sign_in_failures: n('signin.failed'),
      rotations: n('session.rotated'),
      grace_rotations: n('session.rotated_in_grace'),
      refresh_reuses: n('session.refresh_reused'),
      revocations: n('session.revoked'),
      bootstrap_tokens_issued: n('bootstrap.issued'),
    },
    pairing: {
      prepared: n('pairing.prepared'),
      completed: n('pairing.completed'),
      failed: n('pairing.failed'),
      burned: n('pairing.burned'),
    },
    audit: { length: stats.auditLength, head: stats.auditHead },
  };
}

/**
 * Signs a payload with the node key: Ed25519 over the UTF-8 bytes of its RFC 8785 (JCS)
 * canonical JSON, so any JCS implementation and any Ed25519 tool can check it, e.g.
 * `openssl pkeyutl -verify -pubin -inkey node.pub.pem -rawin -in payload.json -sigfile sig.bin`.
 *
 * @example
 * const signed = signDiagnostics(identity, payload);
 */
export function signDiagnostics(identity: NodeIdentity, payload: DiagnosticsPayload): SignedDiagnosticsJson {
  const canonical = canonicalize(payload);
  if (canonical === undefined) throw new TypeError('the diagnostics payload has no JSON form');
  return {
    payload,
    signature: identity.sign(Buffer.from(canonical, 'utf8')).toString('hex'),
    alg: 'Ed25519',
    canonicalization: 'RFC8785',
    public_key: identity.publicKeyHex,
    node_id: identity.nodeId,
    previous_keys: identity.previousKeys ?? [],
  };
}

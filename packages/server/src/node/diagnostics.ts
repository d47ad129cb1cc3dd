import { clusterIdOf, DIAGNOSTICS_TYPE, type DiagnosticsPayload, rfc3339, rfc8785Json, type SignedDiagnosticsJson } from '@svc/core';
import type { StoreStats } from '@svc/core/store';
import type { NodeIdentity } from './identity.js';
import { NODE_API_VERSION } from './routes.js';

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
    cluster_id: clusterIdOf(input.projectId),
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
  return {
    payload,
    signature: identity.sign(Buffer.from(rfc8785Json(payload), 'utf8')).toString('hex'),
    alg: 'Ed25519',
    canonicalization: 'RFC8785',
    public_key: identity.publicKeyHex,
    node_id: identity.nodeId,
    previous_keys: identity.previousKeys ?? [],
  };
}

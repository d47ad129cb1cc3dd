import { canonicalJson } from './canonical-json.js';
import { verifyEd25519 } from './ed25519.js';
import { nodeIdOf } from './node-id.js';
import { rfc3339 } from './time.js';
import { digestsEqual } from './tokens.js';
import type { RetiredNodeKeyJson } from './wire/node.js';

/** The `type` inside every backup signature payload: a signature over it means nothing else. */
export const BACKUP_SIGNATURE_TYPE = 'svc-auth-backup';

/** What a backup signature asserts: the file with SHA-256 `sha256` is a backup of `project`, made at `at`. */
export interface BackupSignaturePayload {
  readonly type: typeof BACKUP_SIGNATURE_TYPE;
  readonly project: string;
  /** SHA-256 of the whole backup file, lowercase hex. */
  readonly sha256: string;
  readonly schema_version: number;
  readonly at: string;
}

/** A backup's signature: Ed25519 by the node key over the RFC 8785 canonical JSON of its payload (the file beside the backup). */
export interface SignedBackup {
  readonly payload: BackupSignaturePayload;
  readonly alg: 'Ed25519';
  readonly canonicalization: 'RFC8785';
  readonly public_key: string;
  readonly node_id: string;
  readonly signature: string;
}

/**
 * Signs a backup file whose SHA-256 is `sha256`, of `project`, at `now`, with `sign` (pure
 * Ed25519 over the exact bytes) by the node key `publicKeyHex`.
 *
 * @example
 * const sig = signBackup({ project, sha256, schemaVersion: 9, now: Date.now() }, loadNodeIdentity(project.nodeKey));
 */
export function signBackup(
  input: { readonly project: string; readonly sha256: string; readonly schemaVersion: number; readonly now: number },
  signer: { readonly publicKeyHex: string; sign(message: Uint8Array): Uint8Array },
): SignedBackup {
  const payload: BackupSignaturePayload = {
    type: BACKUP_SIGNATURE_TYPE,
    project: input.project,
    sha256: input.sha256,
    schema_version: input.schemaVersion,
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

/** The outcome of checking a backup's signature. */
export type BackupSignatureVerdict =
  | { readonly ok: true; readonly publicKey: string; readonly at: string }
  | {
      readonly ok: false;
      /**
       * `malformed`: not a backup signature; `untrusted`: by a key not trusted; `retired_key`: by
       * a retired node key, which only `operatorKeys` can vouch for; `bad_signature`: does not
       * verify; `other_file`: made for other bytes; `other_project`: of another project.
       */
      readonly problem: 'malformed' | 'untrusted' | 'retired_key' | 'bad_signature' | 'other_file' | 'other_project';
      readonly detail: string;
    };

const HEX64 = /^[0-9a-f]{64}$/;

/**
 * Checks a backup signature (parsed JSON) against the backup file's SHA-256 `sha256` and the
 * project id the file holds. It is trusted when it is by the current node key `nodeKey` (null
 * when the project has none) or by one of `operatorKeys` (public keys the operator named). A
 * retired key of `previousKeys` is never trusted on its own, whatever the signed `at` says (the
 * signer chooses it): it is refused as `retired_key`, naming the key, so the operator can name
 * it if the backup is theirs. It must verify over its payload, and the payload must name exactly
 * this file's digest and project.
 *
 * @example
 * const verdict = checkBackupSignature(JSON.parse(sigText), { sha256, project, nodeKey, previousKeys, operatorKeys: [] });
 */
export function checkBackupSignature(
  value: unknown,
  backup: {
    readonly sha256: string;
    readonly project: string;
    readonly nodeKey: string | null;
    readonly previousKeys: readonly RetiredNodeKeyJson[];
    readonly operatorKeys: readonly string[];
  },
): BackupSignatureVerdict {
  const sig = value as Partial<SignedBackup> | null;
  const p = sig?.payload as Partial<BackupSignaturePayload> | undefined;
  if (
    typeof sig !== 'object' ||
    sig === null ||
    typeof p !== 'object' ||
    p === null ||
    p.type !== BACKUP_SIGNATURE_TYPE ||
    typeof p.project !== 'string' ||
    typeof p.sha256 !== 'string' ||
    !HEX64.test(p.sha256) ||
    !Number.isSafeInteger(p.schema_version) ||
    typeof p.at !== 'string' ||
    typeof sig.public_key !== 'string' ||
    !HEX64.test(sig.public_key) ||
    typeof sig.signature !== 'string' ||
    !/^[0-9a-f]{128}$/.test(sig.signature)
  ) {
    return { ok: false, problem: 'malformed', detail: 'not a svc auth backup signature' };
  }
  const payload: BackupSignaturePayload = {
    type: BACKUP_SIGNATURE_TYPE,
    project: p.project,
    sha256: p.sha256,
    schema_version: p.schema_version as number,
    at: p.at,
  };
  const key = sig.public_key;
  // Only the current node key is trusted without being named. The signer chooses `at`, so a
  // retired key's window proves nothing: whoever holds a leaked retired key could back-date a
  // forged backup into it. Any other key, a retired node key included, must be named.
  const byNode = backup.nodeKey !== null && backup.nodeKey.toLowerCase() === key;
  const byOperator = backup.operatorKeys.some((k) => k.toLowerCase() === key);
  if (!byNode && !byOperator) {
    const retired = backup.previousKeys.find((k) => k.public_key.toLowerCase() === key);
    if (retired !== undefined) {
      return {
        ok: false,
        problem: 'retired_key',
        detail: `signed by the retired node key ${key} (node ${retired.node_id}, retired ${retired.valid_until}), which restore does not trust on its own; if this backup is yours, run again with --trusted-key ${key}`,
      };
    }
    return {
      ok: false,
      problem: 'untrusted',
      detail: `signed by the key ${key} (node ${nodeIdOf(key)}), which is neither this project's node key nor a key named with --trusted-key`,
    };
  }
  if (!verifyEd25519(key, Buffer.from(canonicalJson({ ...payload }), 'utf8'), Buffer.from(sig.signature, 'hex'))) {
    return { ok: false, problem: 'bad_signature', detail: 'the signature does not verify over its payload' };
  }
  if (!digestsEqual(payload.sha256, backup.sha256)) {
    return { ok: false, problem: 'other_file', detail: 'the file is not the one that was signed (its SHA-256 differs): it was altered' };
  }
  if (payload.project !== backup.project) {
    return { ok: false, problem: 'other_project', detail: `the signature is for project ${payload.project}` };
  }
  return { ok: true, publicKey: key, at: payload.at };
}

/** The rows of a control database whose existence the audit trail must explain. */
export interface BackupState {
  readonly devices: readonly {
    readonly id: string;
    readonly publicKey: string;
    readonly realm: string;
    readonly subject: string;
    readonly removedAt: number | null;
  }[];
  readonly links: readonly {
    readonly id: string;
    readonly realm: string;
    readonly subject: string;
    readonly issuer: string;
    readonly externalSubject: string;
    readonly removedAt: number | null;
  }[];
  readonly sessions: readonly {
    readonly id: string;
    readonly realm: string;
    readonly subject: string;
    readonly deviceId: string;
    readonly revokedAt: number | null;
  }[];
  /** Bootstrap tokens neither used nor superseded: each a way to enrol a management device. */
  readonly bootstrapTokens?: readonly {
    readonly id: string;
    readonly expiresAt: number;
    readonly usedAt: number | null;
    readonly supersededAt: number | null;
  }[];
  /** Pairing intents neither completed nor burned: each a way to enrol a device. */
  readonly pairingIntents?: readonly {
    readonly id: string;
    readonly realm: string;
    readonly subject: string;
    readonly completedAt: number | null;
    readonly burnedAt: number | null;
  }[];
}

/** The facts of an audit event {@link unaccountedState} reads (an `AuditEvent` has them). */
export interface AccountingEvent {
  readonly type: string;
  readonly realm: string | null;
  readonly subject: string | null;
  readonly deviceId: string | null;
  readonly sessionId: string | null;
  readonly data: Readonly<Record<string, string | number | boolean | null>>;
}

/**
 * What in `state` the audit trail `events` (a verified chain) does not account for, as short
 * descriptions (empty when everything is accounted for): a device without its enrolment event
 * (`device.enrolled` or `pairing.completed`) naming that id, realm, subject and public key; a
 * link without its `link.created` naming that id, realm, subject, issuer and external subject;
 * a session without its `session.created` naming that id, realm, subject and device or link;
 * a bootstrap token neither used nor superseded without its `bootstrap.issued` (same id and
 * expiry); a pairing intent neither completed nor burned without its `pairing.prepared` (same id,
 * realm and subject); and a device, link or session the trail removed or revoked that is live
 * again. Every one of
 * these rows is written in the transaction that appends its event, and audit events are never
 * pruned, so a row the trail does not explain was put there by hand.
 *
 * @example
 * const problems = unaccountedState(rowsOf(db), events); // ["device dev_01… has no enrolment event with its public key"]
 */
export function unaccountedState(state: BackupState, events: Iterable<AccountingEvent>): string[] {
  const enrolled = new Map<string, AccountingEvent>();
  const linked = new Map<string, AccountingEvent>();
  const created = new Map<string, AccountingEvent>();
  const removed = new Set<string>();
  const revoked = new Set<string>();
  const issued = new Map<string, AccountingEvent>();
  const prepared = new Map<string, AccountingEvent>();
  for (const e of events) {
    if (e.type === 'bootstrap.issued' && typeof e.data.bootstrap_id === 'string') issued.set(e.data.bootstrap_id, e);
    else if (e.type === 'pairing.prepared' && typeof e.data.intent_id === 'string') prepared.set(e.data.intent_id, e);
    else if ((e.type === 'device.enrolled' || e.type === 'pairing.completed') && e.deviceId !== null) enrolled.set(e.deviceId, e);
    else if (e.type === 'link.created' && e.deviceId !== null) linked.set(e.deviceId, e);
    else if (e.type === 'session.created' && e.sessionId !== null) created.set(e.sessionId, e);
    else if ((e.type === 'device.removed' || e.type === 'link.removed') && e.deviceId !== null) removed.add(e.deviceId);
    else if ((e.type === 'session.revoked' || e.type === 'session.refresh_reused') && e.sessionId !== null) revoked.add(e.sessionId);
  }
  const problems: string[] = [];
  for (const d of state.devices) {
    const e = enrolled.get(d.id);
    if (e === undefined || e.realm !== d.realm || e.subject !== d.subject || e.data.public_key !== d.publicKey) {
      problems.push(`device ${d.id} has no enrolment event with its realm, subject and public key`);
    } else if (removed.has(d.id) && d.removedAt === null) {
      problems.push(`device ${d.id} was removed but is active`);
    }
  }
  for (const l of state.links) {
    const e = linked.get(l.id);
    if (
      e === undefined ||
      e.realm !== l.realm ||
      e.subject !== l.subject ||
      e.data.issuer !== l.issuer ||
      e.data.external_subject !== l.externalSubject
    ) {
      problems.push(`link ${l.id} has no link.created event with its realm, subject and identity`);
    } else if (removed.has(l.id) && l.removedAt === null) {
      problems.push(`link ${l.id} was removed but is active`);
    }
  }
  for (const s of state.sessions) {
    const e = created.get(s.id);
    if (e === undefined || e.realm !== s.realm || e.subject !== s.subject || !sessionNames(e, s.deviceId)) {
      problems.push(`session ${s.id} has no session.created event with its realm, subject and device`);
    } else if (revoked.has(s.id) && s.revokedAt === null) {
      problems.push(`session ${s.id} was revoked but is live`);
    }
  }
  // A live bootstrap token or pairing intent enrols a device later, with an enrolment event of
  // its own: one the trail never issued would put an attacker's device in, accounted for.
  for (const t of state.bootstrapTokens ?? []) {
    if (t.usedAt !== null || t.supersededAt !== null) continue;
    const e = issued.get(t.id);
    if (e === undefined || e.data.expires_at !== new Date(t.expiresAt).toISOString()) {
      problems.push(`bootstrap token ${t.id} has no bootstrap.issued event with its expiry`);
    }
  }
  for (const i of state.pairingIntents ?? []) {
    if (i.completedAt !== null || i.burnedAt !== null) continue;
    const e = prepared.get(i.id);
    if (e === undefined || e.realm !== i.realm || e.subject !== i.subject) {
      problems.push(`pairing intent ${i.id} has no pairing.prepared event with its realm and subject`);
    }
  }
  return problems;
}

// A device session's event names its device; a provider session's names its link in `data`.
function sessionNames(e: AccountingEvent, deviceId: string): boolean {
  return e.deviceId === deviceId || e.data.link_id === deviceId;
}

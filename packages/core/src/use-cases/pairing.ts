import type { AuthDeps } from '../deps.js';
import { parsePublicKeyHex, parseSignatureHex, verifyEd25519Async } from '../ed25519.js';
import { AuthError } from '../errors.js';
import { crockfordBase32, isIdOfKind, newId } from '../ids.js';
import type { Principal } from '../principal.js';
import { isRealm } from '../realm.js';
import { PAIRING_MAX_FAILURES, PAIRING_MIN_TTL_SECONDS } from '../settings.js';
import type { DeviceRecord, PairingIntentRecord } from '../store.js';
import { rfc3339, secondsUntil } from '../time.js';
import { digestsEqual, sha256Hex } from '../tokens.js';
import type { PreparedPairingJson } from '../wire/node.js';
import { parseDeviceName } from './enroll-with-bootstrap-token.js';
import { auditDraft } from './event.js';

export { PAIRING_MAX_FAILURES } from '../settings.js';

/** The domain-separation tag of the string a pairing device signs. */
export const PAIRING_DOMAIN = 'svc-auth-v1 pairing';

/**
 * The exact string a new device signs to prove it holds the key it enrolls: it binds the
 * node, the intent and the key.
 *
 * @example
 * pairingProofString({ nodeId, intentId, publicKey });
 * // "svc-auth-v1 pairing <node-id> int_... <64 hex>"
 */
export function pairingProofString(p: { readonly nodeId: string; readonly intentId: string; readonly publicKey: string }): string {
  return `${PAIRING_DOMAIN} ${p.nodeId} ${p.intentId} ${p.publicKey.toLowerCase()}`;
}

/** Normalises a typed pairing code: case, spaces and dashes do not matter; O/I/L read as 0/1/1. */
export function normalizePairingCode(code: string): string {
  return code.toUpperCase().replace(/[\s-]/g, '').replace(/O/g, '0').replace(/[IL]/g, '1');
}

/**
 * What the store keeps of an intent's code: a digest that binds the code to the intent and to
 * the one device key the admin pinned at prepare time. A code that leaks (read out loud,
 * overheard, shoulder-surfed) is therefore useless with any other key, and the store needs no
 * second column to say so: a wrong key and a wrong code are the same failed attempt.
 */
function codeDigest(intentId: string, normalizedCode: string, publicKey: string): string {
  return sha256Hex(`${PAIRING_DOMAIN} code ${intentId} ${normalizedCode} ${publicKey.toLowerCase()}`);
}

/** The answer to a prepared intent: the code exists only here, the store keeps its digest. */
export type PreparedPairing = Omit<PreparedPairingJson, 'node_id'>;

/**
 * Prepares an enrolment intent for a new device in `realm`, authorised by a management
 * principal, for the one device key `publicKey` (the new device shows it: `svc auth keygen`),
 * and returns a one-time 8-character code (40 bits, Crockford base32, shown as `XXXX-XXXX`) to
 * read out or type. Completion needs the code, that key, and a signature by it. Lifetime at
 * most 15 minutes.
 *
 * @example
 * const { intent_id, code } = await preparePairing(deps, { principal, realm: 'application', publicKey, ttlSeconds: 300 });
 */
export async function preparePairing(
  deps: AuthDeps,
  input: {
    readonly principal: Principal;
    readonly realm: unknown;
    readonly publicKey: unknown;
    readonly subject?: unknown;
    readonly name?: unknown;
    readonly ttlSeconds?: unknown;
  },
): Promise<PreparedPairing> {
  if (input.principal.realm !== 'management') {
    throw new AuthError('invalid_token', 'pairing needs a management-realm token', { realm: 'management' });
  }
  if (!isRealm(input.realm)) throw new AuthError('invalid_request', 'realm must be "management" or "application"');
  if (input.publicKey === undefined || input.publicKey === null) {
    throw new AuthError(
      'invalid_request',
      'public_key is required: the new device’s Ed25519 public key, which alone can complete the intent',
    );
  }
  const publicKey = parsePublicKeyHex(input.publicKey);
  const max = deps.settings.pairingMaxTtlSeconds;
  const ttl = input.ttlSeconds ?? max;
  if (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < PAIRING_MIN_TTL_SECONDS || ttl > max) {
    throw new AuthError('invalid_request', `ttl_seconds must be a whole number from ${PAIRING_MIN_TTL_SECONDS} to ${max}`);
  }
  let subject: string;
  if (input.subject === undefined || input.subject === null) subject = newId('subject', deps.clock, deps.random);
  else if (isIdOfKind(input.subject, 'subject')) subject = input.subject;
  else throw new AuthError('invalid_request', 'subject must be a subject id (sub_...)');
  const name = input.name === undefined || input.name === null ? null : parseDeviceName(input.name, '');
  const now = deps.clock.now();
  const id = newId('intent', deps.clock, deps.random);
  const code = crockfordBase32(deps.random(5), 8);
  const intent: PairingIntentRecord = {
    id,
    realm: input.realm,
    subject,
    name,
    codeDigest: codeDigest(id, code, publicKey),
    createdAt: now,
    expiresAt: now + ttl * 1000,
    createdBy: input.principal.subject,
    failures: 0,
    completedAt: null,
    burnedAt: null,
    deviceId: null,
  };
  await deps.store.createPairingIntent(
    intent,
    auditDraft(deps, 'pairing.prepared', {
      realm: input.realm,
      subject,
      at: now,
      data: {
        intent_id: id,
        public_key: publicKey,
        by_subject: input.principal.subject,
        by_session: input.principal.session,
        ttl_seconds: ttl,
      },
    }),
  );
  deps.log.info({ event: 'pairing.prepared', intent_id: id, realm: input.realm }, 'pairing intent prepared');
  return {
    intent_id: id,
    realm: input.realm,
    subject,
    name,
    public_key: publicKey,
    code: `${code.slice(0, 4)}-${code.slice(4)}`,
    expires_at: rfc3339(intent.expiresAt),
    expires_in: secondsUntil(intent.expiresAt, now),
  };
}

/**
 * Completes an enrolment intent: checks the one-time code together with the device key the
 * intent was prepared for, in constant time (5 wrong attempts burn the intent), verifies the new device's signature over
 * {@link pairingProofString} (proof of possession), then enrolls the device, once: of N
 * concurrent completions exactly one wins.
 *
 * @example
 * const device = await completePairing(deps, { nodeId, intentId, code, publicKey, signature });
 */
export async function completePairing(
  deps: AuthDeps,
  input: {
    readonly nodeId: string;
    readonly intentId: unknown;
    readonly code: unknown;
    readonly publicKey: unknown;
    readonly signature: unknown;
    readonly name?: unknown;
  },
): Promise<DeviceRecord> {
  if (typeof input.intentId !== 'string' || input.intentId.length > 64) {
    throw new AuthError('invalid_request', 'intent_id must be an intent id (int_...)');
  }
  if (typeof input.code !== 'string' || input.code.length === 0 || input.code.length > 32) {
    throw new AuthError('invalid_request', 'code must be the pairing code string');
  }
  const publicKey = parsePublicKeyHex(input.publicKey);
  const signature = parseSignatureHex(input.signature);
  const intentId = input.intentId;
  const now = deps.clock.now();
  const intent = isIdOfKind(intentId, 'intent') ? await deps.store.getPairingIntent(intentId) : null;
  if (intent === null || intent.completedAt !== null || intent.burnedAt !== null || intent.expiresAt <= now) {
    throw new AuthError('invalid_pairing_intent', 'unknown, expired, completed or burned enrolment intent');
  }
  const presented = codeDigest(intent.id, normalizePairingCode(input.code), publicKey);
  if (!digestsEqual(presented, intent.codeDigest)) {
    const counted = await deps.store.recordPairingFailure({ id: intent.id, now, maxFailures: PAIRING_MAX_FAILURES }, (failures, burned) =>
      auditDraft(deps, burned ? 'pairing.burned' : 'pairing.failed', {
        realm: intent.realm,
        subject: intent.subject,
        at: now,
        data: { intent_id: intent.id, failures },
      }),
    );
    deps.log.warn({ event: 'pairing.failed', intent_id: intent.id, failures: counted?.failures ?? null }, 'wrong pairing code or key');
    if (counted === null) throw new AuthError('invalid_pairing_intent', 'unknown, expired, completed or burned enrolment intent');
    throw new AuthError(
      'invalid_pairing_code',
      counted.burned
        ? 'wrong pairing code, or not the device key the intent was prepared for; the intent is now burned, prepare a new one'
        : `wrong pairing code, or not the device key the intent was prepared for (${PAIRING_MAX_FAILURES - counted.failures} attempts left)`,
    );
  }
  const proof = pairingProofString({ nodeId: input.nodeId, intentId: intent.id, publicKey });
  if (!(await verifyEd25519Async(publicKey, Buffer.from(proof, 'utf8'), signature))) {
    throw new AuthError('invalid_signature', 'the signature does not prove possession of that key for this node and intent');
  }
  const device: DeviceRecord = {
    id: newId('device', deps.clock, deps.random),
    publicKey,
    realm: intent.realm,
    subject: intent.subject,
    name: parseDeviceName(input.name, intent.name ?? 'device'),
    createdAt: now,
    removedAt: null,
  };
  const result = await deps.store.completePairing(
    { id: intent.id, codeDigest: intent.codeDigest, now, device },
    auditDraft(deps, 'pairing.completed', {
      realm: intent.realm,
      subject: intent.subject,
      deviceId: device.id,
      at: now,
      data: { intent_id: intent.id, public_key: publicKey, name: device.name },
    }),
  );
  switch (result.kind) {
    case 'completed':
      deps.log.info({ event: 'pairing.completed', intent_id: intent.id, device_id: device.id }, 'device paired');
      return result.device;
    case 'already_enrolled':
      throw new AuthError('already_enrolled', 'that public key is already enrolled');
    case 'invalid':
      throw new AuthError('invalid_pairing_intent', 'the enrolment intent was completed, burned or expired meanwhile');
  }
}

import type { AuditData } from '../audit.js';
import type { AuthDeps } from '../deps.js';
import { parsePublicKeyHex, parseSignatureHex, verifyEd25519Async } from '../ed25519.js';
import { AuthError } from '../errors.js';
import { crockfordBase32, isIdOfKind, newId } from '../ids.js';
import { clusterIdOf } from '../node-id.js';
import type { Principal } from '../principal.js';
import { isRealm, type Realm } from '../realm.js';
import { PAIRING_MAX_FAILURES, PAIRING_MIN_TTL_SECONDS } from '../settings.js';
import type { DeviceRecord, PairingIntentRecord } from '../store.js';
import { rfc3339, secondsUntil } from '../time.js';
import { digestsEqual, sha256Hex } from '../tokens.js';
import type { PreparedPairingJson } from '../wire/node.js';
import { parseDeviceName } from './enroll-with-bootstrap-token.js';
import { auditDraft } from './event.js';

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

/** An intent's lifetime in seconds: `ttl_seconds`, by default the longest the settings allow. */
function parseTtl(deps: AuthDeps, ttlSeconds: unknown): number {
  const max = deps.settings.pairingMaxTtlSeconds;
  const ttl = ttlSeconds ?? max;
  if (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < PAIRING_MIN_TTL_SECONDS || ttl > max) {
    throw new AuthError('invalid_request', `ttl_seconds must be a whole number from ${PAIRING_MIN_TTL_SECONDS} to ${max}`);
  }
  return ttl;
}

/** The subject an intent is for: the one named, or a new one. */
function parseSubject(deps: AuthDeps, subject: unknown): string {
  if (subject === undefined || subject === null) return newId('subject', deps.clock, deps.random);
  if (isIdOfKind(subject, 'subject')) return subject;
  throw new AuthError('invalid_request', 'subject must be a subject id (sub_...)');
}

/** The answer to a prepared intent: the code exists only here, the store keeps its digest. */
export type PreparedPairing = Omit<PreparedPairingJson, 'node_id' | 'cluster_id'>;

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
    /** The node preparing it (its node id), named in the `pairing.prepared` event; absent off the node surface. */
    readonly nodeId?: string;
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
  const prepared = await storeIntent(deps, { ...input, realm: input.realm, binding: publicKey, data: { public_key: publicKey } });
  deps.log.info({ event: 'pairing.prepared', intent_id: prepared.intent_id, realm: input.realm }, 'pairing intent prepared');
  return { ...prepared, public_key: publicKey, provider: null };
}

/**
 * Stores a new intent of `realm` for `subject` (or a new subject) whose code is bound to
 * `binding` (a device key, or a provider), with its `pairing.prepared` event (`data` added to
 * the common facts), and answers it with its code: the code exists only in that answer.
 */
async function storeIntent(
  deps: AuthDeps,
  input: {
    readonly principal: Principal;
    readonly realm: Realm;
    readonly binding: string;
    readonly data: AuditData;
    readonly subject?: unknown;
    readonly name?: unknown;
    readonly ttlSeconds?: unknown;
    readonly nodeId?: string;
  },
): Promise<Omit<PreparedPairing, 'public_key' | 'provider'>> {
  const ttl = parseTtl(deps, input.ttlSeconds);
  const subject = parseSubject(deps, input.subject);
  // A named subject must have a user: one without was removed, and an intent must not bring it
  // back (completion refuses a subject without a user; a new subject's user is created with its
  // intent, by the store, in the same transaction).
  if (input.subject !== undefined && input.subject !== null && (await deps.store.getUser(subject)) === null) {
    throw new AuthError('not_found', 'no user has that subject (removed, or never enrolled)');
  }
  const name = input.name === undefined || input.name === null ? null : parseDeviceName(input.name, '');
  const now = deps.clock.now();
  const id = newId('intent', deps.clock, deps.random);
  const code = crockfordBase32(deps.random(5), 8);
  const intent: PairingIntentRecord = {
    id,
    realm: input.realm,
    subject,
    name,
    codeDigest: codeDigest(id, code, input.binding),
    createdAt: now,
    expiresAt: now + ttl * 1000,
    createdBy: input.principal.subject,
    failures: 0,
    completedAt: null,
    burnedAt: null,
    deviceId: null,
    preparedByNode: input.nodeId ?? null,
  };
  await deps.store.createPairingIntent(
    intent,
    auditDraft(deps, 'pairing.prepared', {
      realm: input.realm,
      subject,
      at: now,
      data: {
        intent_id: id,
        ...input.data,
        by_subject: input.principal.subject,
        by_session: input.principal.session,
        ttl_seconds: ttl,
        ...(input.nodeId === undefined ? {} : { prepared_by_node: input.nodeId, cluster_id: clusterIdOf(deps.projectId) }),
      },
    }),
  );
  return {
    intent_id: id,
    realm: input.realm,
    subject,
    name,
    code: `${code.slice(0, 4)}-${code.slice(4)}`,
    expires_at: rfc3339(intent.expiresAt),
    expires_in: secondsUntil(intent.expiresAt, now),
  };
}

/**
 * Counts one wrong code (or key, or provider) against `intent`, audited; the fifth burns it.
 * Always throws: `invalid_pairing_code` with the attempts left, or `invalid_pairing_intent` when
 * the intent stopped being live meanwhile.
 */
async function refuseWrongCode(
  deps: AuthDeps,
  intent: PairingIntentRecord,
  now: number,
  what: { readonly data: AuditData; readonly mismatch: string },
): Promise<never> {
  const counted = await deps.store.recordPairingFailure({ id: intent.id, now, maxFailures: PAIRING_MAX_FAILURES }, (failures, burned) =>
    auditDraft(deps, burned ? 'pairing.burned' : 'pairing.failed', {
      realm: intent.realm,
      subject: intent.subject,
      at: now,
      data: { intent_id: intent.id, failures, ...what.data },
    }),
  );
  deps.log.warn(
    { event: 'pairing.failed', intent_id: intent.id, failures: counted?.failures ?? null },
    `wrong pairing code or ${what.mismatch}`,
  );
  if (counted === null) throw new AuthError('invalid_pairing_intent', 'unknown, expired, completed or burned intent');
  throw new AuthError(
    'invalid_pairing_code',
    counted.burned
      ? `wrong pairing code, or not the ${what.mismatch} the intent was prepared for; the intent is now burned, prepare a new one`
      : `wrong pairing code, or not the ${what.mismatch} the intent was prepared for (${PAIRING_MAX_FAILURES - counted.failures} attempts left)`,
  );
}

/** A completed pairing: the enrolled device, and the node that prepared the intent (null when not known). */
export interface CompletedPairing {
  readonly device: DeviceRecord;
  readonly preparedByNode: string | null;
}

/**
 * Completes an enrolment intent: checks the one-time code together with the device key the
 * intent was prepared for, in constant time, and the new device's signature over
 * {@link pairingProofString} (proof of possession); a failure of either is one wrong attempt,
 * answered alike (`invalid_pairing_code`) and counted (5 burn the intent). Then it enrolls the
 * device, once: of N concurrent completions exactly one wins.
 *
 * `countFailure: false` is an attempt beyond its failure budget (see the server's failure
 * counting): it still runs, so the right code and proof complete, but its failure writes
 * nothing, neither a count against the intent nor an audit event (it is answered `429`). Only
 * the holder of the device key the intent names can ever complete it, so those uncounted
 * guesses help no one else; the budget and the 5 counted failures bound the audit trail.
 *
 * @example
 * const { device, preparedByNode } = await completePairing(deps, { nodeId, intentId, code, publicKey, signature });
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
    /** False beyond the failure budget: a failure is then neither counted nor audited. Default true. */
    readonly countFailure?: boolean;
  },
): Promise<CompletedPairing> {
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
  // The code and the proof of possession are one credential: both are checked, always, and a
  // failure of either is answered and counted the same way (a wrong code). Answering a right
  // code with a bad signature differently would tell a guesser the code is right, and leave
  // that guess uncounted.
  const presented = codeDigest(intent.id, normalizePairingCode(input.code), publicKey);
  const codeRight = digestsEqual(presented, intent.codeDigest);
  const proof = pairingProofString({ nodeId: input.nodeId, intentId: intent.id, publicKey });
  const proven = await verifyEd25519Async(publicKey, Buffer.from(proof, 'utf8'), signature);
  if (!(codeRight && proven)) {
    if (input.countFailure === false) {
      throw new AuthError('invalid_pairing_code', 'wrong pairing code, or not the device key the intent was prepared for');
    }
    await refuseWrongCode(deps, intent, now, { data: {}, mismatch: 'device key' });
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
      data: {
        intent_id: intent.id,
        public_key: publicKey,
        name: device.name,
        prepared_by_node: intent.preparedByNode,
        completed_by_node: input.nodeId,
        cluster_id: clusterIdOf(deps.projectId),
      },
    }),
  );
  switch (result.kind) {
    case 'completed':
      deps.log.info({ event: 'pairing.completed', intent_id: intent.id, device_id: device.id }, 'device paired');
      return { device: result.device, preparedByNode: intent.preparedByNode };
    case 'already_enrolled':
      throw new AuthError('already_enrolled', 'that public key is already enrolled');
    case 'invalid':
      throw new AuthError(
        'invalid_pairing_intent',
        'the enrolment intent was completed, burned or expired meanwhile, or its user or the admin who prepared it was removed',
      );
    case 'user_disabled':
      throw new AuthError(
        'user_disabled',
        'the user this device would be enrolled for, or the admin who prepared the intent, is disabled: an operator must enable them',
      );
  }
}

/**
 * What a link intent's code digest is bound to instead of a device key: the provider the
 * credential must come from. A device key is 64 hex digits and this never is, so a link
 * intent's code can never complete a device pairing, nor a device intent's code a link.
 */
function linkBinding(provider: string): string {
  return `link:${provider}`;
}

/** A provider a link intent may name: its configured name and the realms it serves. */
export interface LinkableProvider {
  readonly name: string;
  readonly realms: readonly string[];
}

/**
 * Prepares a link intent: a management principal lets whoever holds the one-time code link one
 * credential of the provider `provider` (a passkey, a company login) to `subject` of `realm`
 * (an existing subject, or a new one: an invitation), and be signed in with it. The code has
 * the same form, lifetime and burn rule as a device pairing's; its digest is bound to the
 * intent and the provider, so it completes nothing else. Completed through the gateway's
 * provider routes (`startProviderFlow` with `pairing`), never here.
 *
 * @example
 * const { intent_id, code } = await prepareLinkPairing(deps, { principal, realm: 'application', provider: 'passkeys', providers });
 */
export async function prepareLinkPairing(
  deps: AuthDeps,
  input: {
    readonly principal: Principal;
    readonly realm: unknown;
    readonly provider: unknown;
    /** The providers this node runs. */
    readonly providers: readonly LinkableProvider[];
    readonly subject?: unknown;
    readonly name?: unknown;
    readonly ttlSeconds?: unknown;
    /** The node preparing it (its node id), named in the `pairing.prepared` event; absent off the node surface. */
    readonly nodeId?: string;
  },
): Promise<PreparedPairing> {
  if (input.principal.realm !== 'management') {
    throw new AuthError('invalid_token', 'pairing needs a management-realm token', { realm: 'management' });
  }
  if (!isRealm(input.realm)) throw new AuthError('invalid_request', 'realm must be "management" or "application"');
  const realm = input.realm;
  const provider = input.providers.find((p) => p.name === input.provider);
  if (provider === undefined) {
    const names = input.providers.map((p) => p.name);
    throw new AuthError(
      'invalid_request',
      `provider must name a provider this node runs${names.length === 0 ? ' (none is installed)' : `: ${names.join(', ')}`}`,
    );
  }
  if (!provider.realms.includes(realm)) {
    throw new AuthError('invalid_request', `the provider ${provider.name} does not serve the ${realm} realm`);
  }
  const prepared = await storeIntent(deps, {
    ...input,
    realm,
    binding: linkBinding(provider.name),
    data: { kind: 'link', provider: provider.name },
  });
  deps.log.info(
    { event: 'pairing.prepared', intent_id: prepared.intent_id, realm, kind: 'link', provider: provider.name },
    'link intent prepared',
  );
  return { ...prepared, public_key: null, provider: provider.name };
}

/**
 * Checks a link intent's code before a provider ceremony begins: the intent is live, of `realm`,
 * and the code is right for `provider`, in constant time. A wrong code (or another provider, or
 * a device intent) counts as a failed attempt, audited, and the fifth burns the intent. The
 * intent is not used up here: the link that completes it is (`createLink` with `pairing`), so of
 * two ceremonies begun with one code only one ever links.
 *
 * @example
 * const intent = await checkLinkPairing(deps, { intentId, code, provider: 'passkeys', realm: 'application' });
 */
export async function checkLinkPairing(
  deps: AuthDeps,
  input: { readonly intentId: unknown; readonly code: unknown; readonly provider: string; readonly realm: string },
): Promise<PairingIntentRecord> {
  if (!isIdOfKind(input.intentId, 'intent')) throw new AuthError('invalid_request', 'pairing_intent_id must be an intent id (int_...)');
  if (typeof input.code !== 'string' || input.code.length === 0 || input.code.length > 32) {
    throw new AuthError('invalid_request', 'pairing_code must be the pairing code string');
  }
  const now = deps.clock.now();
  const intent = await deps.store.getPairingIntent(input.intentId);
  if (intent === null || intent.completedAt !== null || intent.burnedAt !== null || intent.expiresAt <= now) {
    throw new AuthError('invalid_pairing_intent', 'unknown, expired, completed or burned link intent');
  }
  const presented = codeDigest(intent.id, normalizePairingCode(input.code), linkBinding(input.provider));
  if (!digestsEqual(presented, intent.codeDigest)) {
    await refuseWrongCode(deps, intent, now, { data: { kind: 'link', provider: input.provider }, mismatch: 'provider' });
  }
  // The realm is checked after the code: a right code for another realm's intent is no guess.
  if (intent.realm !== input.realm) {
    throw new AuthError(
      'invalid_pairing_intent',
      `the intent links a credential in the ${intent.realm} realm, not the ${input.realm} realm`,
    );
  }
  return intent;
}

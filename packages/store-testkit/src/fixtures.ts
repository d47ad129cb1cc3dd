import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import {
  type AuditEvent,
  type AuditEventDraft,
  type AuthDeps,
  auditDraft,
  type CoreFailureCode,
  createChallenge,
  createSession,
  digestToken,
  type ErrorCode,
  enrollWithBootstrapToken,
  issueBootstrapToken,
  mintSessionToken,
  newId,
  type Principal,
  parseSessionToken,
  publicJwkOfHex,
  publicKeyHexOf,
  type Realm,
  rotationAuditDraft,
  type TokenPairJson,
  authenticate as useCaseAuthenticate,
} from '@svc/core';
import {
  type DeviceRecord,
  defaultUser,
  newSessionRecord,
  type RotationOutcome,
  type RotationProof,
  type SessionRecord,
  type SessionUser,
  type Store,
  sealSuccessor,
  type TokenPairDigests,
} from '@svc/core/store';

/** An Ed25519 device key: its public half as hex, and a signer over UTF-8 strings. */
export interface DeviceKey {
  readonly publicKey: string;
  sign(message: string): string;
}

/**
 * A fresh Ed25519 key pair, as a device would hold it: the public key as lowercase hex, and a
 * signer that answers a challenge with the hex signature over its exact UTF-8 bytes.
 *
 * @example
 * const key = newDeviceKey();
 * const challenge = await createChallenge(deps, { publicKey: key.publicKey, realm: 'management' });
 * await createSession(deps, { challengeId: challenge.id, signature: key.sign(challenge.challenge), realm: 'management' });
 */
export function newDeviceKey(): DeviceKey {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return {
    publicKey: publicKeyHexOf(publicKey),
    sign: (message) => sign(null, Buffer.from(message, 'utf8'), privateKey).toString('hex'),
  };
}

/** Asserts that `promise` rejects with an error whose `code` is `code` (never the message text). */
export async function rejectsWithCode(promise: Promise<unknown>, code: ErrorCode | CoreFailureCode): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof Error, 'expected an Error');
    assert.equal((error as { code?: unknown }).code, code, `expected code ${code}, got ${String((error as { code?: unknown }).code)}`);
    return true;
  });
}

/** The first management device, enrolled the way `svc auth init` + `svc auth enroll` do it. */
export async function bootstrapAdmin(
  deps: AuthDeps,
  key: DeviceKey = newDeviceKey(),
): Promise<{ readonly device: DeviceRecord; readonly key: DeviceKey; readonly bootstrapToken: string }> {
  const recovery = (await deps.store.countDevices('management')) > 0;
  const issued = await issueBootstrapToken(deps, { recovery });
  const device = await enrollWithBootstrapToken(deps, { bootstrapToken: issued.token, publicKey: key.publicKey, name: 'admin' });
  return { device, key, bootstrapToken: issued.token };
}

/** A device record for `realm`, as a use case would build it. */
export function deviceRecord(deps: AuthDeps, realm: Realm, key: DeviceKey = newDeviceKey()): DeviceRecord {
  return {
    id: newId('device', deps.clock, deps.random),
    publicKey: key.publicKey,
    realm,
    subject: newId('subject', deps.clock, deps.random),
    name: `${realm} device`,
    createdAt: deps.clock.now(),
    removedAt: null,
  };
}

/** The `device.enrolled` event for a record. */
export function enrolledEvent(deps: AuthDeps, device: DeviceRecord): AuditEventDraft {
  return auditDraft(deps, 'device.enrolled', {
    realm: device.realm,
    subject: device.subject,
    deviceId: device.id,
    data: { via: 'testkit', public_key: device.publicKey, name: device.name },
  });
}

/** Enrolls a device directly through the store (how an application-realm device gets in without pairing). */
export async function enrollDevice(
  deps: AuthDeps,
  realm: Realm,
  key: DeviceKey = newDeviceKey(),
): Promise<{ readonly device: DeviceRecord; readonly key: DeviceKey }> {
  const device = deviceRecord(deps, realm, key);
  assert.equal(await deps.store.enrollDevice(device, enrolledEvent(deps, device)), 'enrolled');
  return { device, key };
}

/** Signs `key` in to `realm` through core's use cases: challenge, signature, session. */
export async function signIn(deps: AuthDeps, key: DeviceKey, realm: Realm): Promise<TokenPairJson> {
  const challenge = await createChallenge(deps, { publicKey: key.publicKey, realm });
  return createSession(deps, { challengeId: challenge.id, signature: key.sign(challenge.challenge), realm });
}

/** The principal of an access token in `realm` (rejects with `invalid_token` when refused). */
export function authenticate(deps: AuthDeps, token: string, realm: Realm): Promise<Principal> {
  return useCaseAuthenticate(deps, { token, realm });
}

/** Whether an access token still authenticates in `realm`. */
export async function authenticates(deps: AuthDeps, token: string, realm: Realm): Promise<boolean> {
  try {
    await useCaseAuthenticate(deps, { token, realm });
    return true;
  } catch (error) {
    assert.equal((error as { code?: unknown }).code, 'invalid_token');
    return false;
  }
}

/** A fresh token pair: the tokens (kept by the test) and the digests (what the store sees). */
export interface MintedPair {
  readonly access: string;
  readonly refresh: string;
  readonly digests: TokenPairDigests;
}

/** Mints a pair of session `sessionId` whose tokens expire `accessTtlMs` / `refreshTtlMs` after the clock's now. */
export function mintPair(
  deps: AuthDeps,
  sessionId: string,
  ttl: { readonly accessTtlMs?: number; readonly refreshTtlMs?: number } = {},
): MintedPair {
  const now = deps.clock.now();
  const access = mintSessionToken('access', sessionId, deps.random);
  const refresh = mintSessionToken('refresh', sessionId, deps.random);
  return {
    access,
    refresh,
    digests: {
      accessDigest: digestToken(access),
      refreshDigest: digestToken(refresh),
      accessExpiresAt: now + (ttl.accessTtlMs ?? 15 * 60_000),
      refreshExpiresAt: now + (ttl.refreshTtlMs ?? 24 * 3_600_000),
    },
  };
}

/** A new session for `device` and what `Store.createSession` takes with it: its first pair's digests and its event. */
export function newStoreSession(
  deps: AuthDeps,
  device: DeviceRecord,
  ttl: { readonly accessTtlMs?: number; readonly refreshTtlMs?: number; readonly lifetimeMs?: number } = {},
): { readonly session: SessionRecord; readonly pair: MintedPair; readonly digests: TokenPairDigests; readonly event: AuditEventDraft } {
  const now = deps.clock.now();
  const id = newId('session', deps.clock, deps.random);
  const pair = mintPair(deps, id, ttl);
  const expiresAt = now + (ttl.lifetimeMs ?? 30 * 24 * 3_600_000);
  const session = newSessionRecord({ id, device, now, expiresAt, pair: pair.digests });
  const digests = { ...pair.digests, accessExpiresAt: session.accessExpiresAt, refreshExpiresAt: session.refreshExpiresAt };
  const event = auditDraft(deps, 'session.created', {
    realm: session.realm,
    subject: session.subject,
    deviceId: device.id,
    sessionId: session.id,
    data: { amr: 'ed25519' },
  });
  return { session, pair, digests, event };
}

/** Creates a session for `device` straight through the store, returning its record and first pair. */
export async function createStoreSession(
  deps: AuthDeps,
  device: DeviceRecord,
  ttl: { readonly accessTtlMs?: number; readonly refreshTtlMs?: number; readonly lifetimeMs?: number } = {},
): Promise<{ readonly session: SessionRecord; readonly pair: MintedPair }> {
  const { session, pair, digests, event } = newStoreSession(deps, device, ttl);
  const created = await deps.store.createSession(session, digests, event);
  if (created !== 'created') throw new Error(`createSession refused a session for device ${device.id}: ${created}`);
  return { session, pair };
}

/** The attributes the bearer check reads for a user that has none set (a default user). */
export const NO_ATTRIBUTES: SessionUser = Object.freeze({ name: null, email: null, emailVerified: false, groups: Object.freeze([]) });

/** `session` as the bearer check answers it: with its user's attributes (null: the subject has no user). */
export function withUser(session: SessionRecord, user: SessionUser | null): SessionRecord {
  return { ...session, user };
}

/** Presents a refresh token straight to the store; `calls` counts how often the audit callback ran. */
export async function rotateAtStore(
  deps: AuthDeps,
  input: {
    readonly store?: Store;
    readonly refresh: string;
    readonly realm: Realm;
    readonly graceMs: number;
    readonly next?: MintedPair;
    readonly dpop?: RotationProof;
  },
): Promise<{ readonly outcome: RotationOutcome; readonly next: MintedPair; readonly auditCalls: number }> {
  const store = input.store ?? deps.store;
  const presented = parseSessionToken(input.refresh, 'refresh');
  if (presented === null) throw new TypeError(`rotateAtStore: not a refresh token: ${input.refresh}`);
  const next = input.next ?? mintPair(deps, presented.sessionId);
  let auditCalls = 0;
  const outcome = await store.rotateRefreshToken(
    {
      sessionId: presented.sessionId,
      presentedDigest: presented.digest,
      realm: input.realm,
      now: deps.clock.now(),
      graceMs: input.graceMs,
      next: next.digests,
      sealedSuccessor: sealSuccessor(input.refresh, presented.sessionId, { access: next.access, refresh: next.refresh }, deps.random),
      ...(input.dpop === undefined ? {} : { dpop: input.dpop }),
    },
    (o) => {
      auditCalls++;
      return rotationAuditDraft(deps, o);
    },
  );
  return { outcome, next, auditCalls };
}

/** A `session.revoked` event for a store-level revocation. */
export function revokedEvent(deps: AuthDeps, sessionId: string, reason = 'logout'): AuditEventDraft {
  return auditDraft(deps, 'session.revoked', { sessionId, data: { reason } });
}

/** Every event of the chain, oldest first. */
export function allEvents(store: Store): Promise<readonly AuditEvent[]> {
  return store.listAuditEvents({ afterSeq: 0, limit: 1_000_000 });
}

/** The types of every event of the chain, oldest first. */
export async function eventTypes(store: Store): Promise<string[]> {
  return (await allEvents(store)).map((e) => e.type);
}

/** The number of events in the chain. */
export async function auditLength(store: Store): Promise<number> {
  return (await store.auditHead())?.seq ?? 0;
}

/** Settles every promise and splits the outcomes into values and error codes. */
export async function settle<T>(attempts: readonly Promise<T>[]): Promise<{ readonly values: T[]; readonly codes: string[] }> {
  const results = await Promise.allSettled(attempts);
  const values: T[] = [];
  const codes: string[] = [];
  for (const r of results) {
    if (r.status === 'fulfilled') values.push(r.value);
    else codes.push(String((r.reason as { code?: unknown }).code ?? (r.reason as Error).message));
  }
  return { values, codes };
}

/** The number of milliseconds in `n` minutes. */
export const minutes = (n: number): number => n * 60_000;
/** The number of milliseconds in `n` seconds. */
export const seconds = (n: number): number => n * 1000;

/** What a test proof is made of; each part can be tampered with (see {@link dpopProof}). */
export interface TestDpopProof {
  readonly htm: string;
  readonly htu: string;
  /** Milliseconds since the epoch (the proof's `iat` is its whole seconds). */
  readonly now: number;
  readonly jti?: string;
  readonly ath?: string;
  readonly nonce?: string;
  /** Merged over the header `{typ, alg, jwk}`. */
  readonly header?: Record<string, unknown>;
}

/**
 * A DPoP proof (RFC 9449) signed by `key`, with a header and claims a test can bend (another
 * `alg`, a missing `typ`, a private `d` in the `jwk`).
 *
 * @example
 * const proof = dpopProof(key, { htm: 'POST', htu: 'http://127.0.0.1:9090/v1/auth/refresh', now: clock.now() });
 */
export function dpopProof(key: DeviceKey, p: TestDpopProof): string {
  const header: Record<string, unknown> = { typ: 'dpop+jwt', alg: 'EdDSA', jwk: publicJwkOfHex(key.publicKey), ...(p.header ?? {}) };
  for (const [k, v] of Object.entries(header)) if (v === undefined) delete header[k];
  const claims = {
    htm: p.htm,
    htu: p.htu,
    iat: Math.floor(p.now / 1000),
    jti: p.jti ?? randomBytes(16).toString('base64url'),
    ...(p.ath === undefined ? {} : { ath: p.ath }),
    ...(p.nonce === undefined ? {} : { nonce: p.nonce }),
  };
  const b64 = (v: object) => Buffer.from(JSON.stringify(v), 'utf8').toString('base64url');
  const input = `${b64(header)}.${b64(claims)}`;
  return `${input}.${Buffer.from(key.sign(input), 'hex').toString('base64url')}`;
}

/**
 * An active management user, as the admin who prepares intents (their `createdBy`): completion
 * requires the creator to have a user, not disabled. Answers its subject.
 */
export async function intentCreator(deps: AuthDeps, store: Store = deps.store): Promise<string> {
  const user = defaultUser({ subject: newId('subject', deps.clock, deps.random), realm: 'management', now: deps.clock.now() });
  const created = await store.createUser(user, auditDraft(deps, 'user.created', { realm: 'management', subject: user.subject }));
  assert.equal(created, 'created', 'the intent creator is created');
  return user.subject;
}

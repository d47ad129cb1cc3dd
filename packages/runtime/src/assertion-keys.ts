import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  type AssertionKeyCustody,
  AssertionKeySealError,
  type AssertionKeySetJson,
  type AuthDeps,
  assertionAudienceOf,
  assertionSigningKey,
  type ClusterAssertionKeyRotation,
  ensureClusterAssertionKeys,
  type FreshAssertionKey,
  type KeyEncryptionKey,
  openAssertionKeySet,
  parseAssertionKeySet,
  parseKeyEncryptionKey,
  rotateClusterAssertionKeys,
} from '@svc/core';
import type { AppGatewayConfig, SecretRef } from '@svc/core/config';
import { type AssertionSigner, createAssertionSigner } from '@svc/server';
import { assertOwnerOnly, embeddedStoreFile, resolveSecret } from './control.js';
import { RuntimeError } from './errors.js';
import type { Project } from './project.js';

/**
 * Where a node kept the assertion key set before the set became the cluster's (store contract
 * 9): beside the node key. Read once, on the first start after the upgrade, to import it into
 * the control store; then removed.
 *
 * @example
 * assertionKeysFile(project); // "/srv/demo/.svc/control/assertion-keys.json"
 */
export function assertionKeysFile(project: Pick<Project, 'controlDir'>): string {
  return join(project.controlDir, 'assertion-keys.json');
}

/** What the assertion keys need of a project: where its control state is, and how its keys are sealed. */
export type AssertionKeyProject = Pick<Project, 'controlDir' | 'controlDb' | 'file'> & {
  readonly config: Pick<Project['config'], 'keyEncryption' | 'store'>;
};

/** How often a node looks at the stored key set's version, to follow a rotation made on any node. */
export const ASSERTION_KEYS_POLL_MS = 1000;

function freshKey(): FreshAssertionKey {
  const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  return { x: jwk.x as string, d: jwk.d as string };
}

/**
 * The assertion key set in a former `assertion-keys.json`, checked: owner-only, and a
 * well-formed set.
 *
 * @throws {RuntimeError} when it is missing, readable by others, or not a key set.
 * @example
 * const set = readAssertionKeys(assertionKeysFile(project));
 */
export function readAssertionKeys(file: string): AssertionKeySetJson {
  assertOwnerOnly(file, 'the assertion key set');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new RuntimeError(
      `cannot read the assertion key set ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // Not the parser's message: it may quote the file, and the file holds private keys.
    throw new RuntimeError(`the assertion key set ${file} is not JSON; restore it, or remove it to start a new one`);
  }
  try {
    return parseAssertionKeySet(value);
  } catch (error) {
    throw new RuntimeError(
      `the assertion key set ${file} is not valid (${(error as Error).message}); restore it, or remove it to start a new one`,
    );
  }
}

function kekOf(ref: SecretRef, key: string, env: NodeJS.ProcessEnv): KeyEncryptionKey {
  const text = resolveSecret(ref, env);
  try {
    return parseKeyEncryptionKey(text);
  } catch (error) {
    throw new RuntimeError(`${key} (${ref.source}:${ref.name}): ${(error as Error).message}`, { code: 'config_invalid' });
  }
}

/**
 * How this node opens and seals the cluster's assertion keys: the KEKs of
 * `:svc/key-encryption-key` (then `:svc/previous-key-encryption-key`), resolved now; sealed keys
 * are required on any store but the embedded one.
 *
 * @throws {RuntimeError} when a reference does not resolve or is not a KEK, or when a shared store has none.
 * @example
 * const custody = assertionKeyCustody(project);
 */
export function assertionKeyCustody(project: AssertionKeyProject, env: NodeJS.ProcessEnv = process.env): AssertionKeyCustody {
  const { current, previous } = project.config.keyEncryption;
  const keks: KeyEncryptionKey[] = [];
  if (current !== null) keks.push(kekOf(current, ':svc/key-encryption-key', env));
  if (previous !== null) keks.push(kekOf(previous, ':svc/previous-key-encryption-key', env));
  const requireSealed = embeddedStoreFile(project) === null;
  if (requireSealed && keks.length === 0) {
    throw new RuntimeError(
      `the assertion keys live in the shared control store (${project.config.store.package}) sealed under :svc/key-encryption-key, which ${project.file} does not set; set it to #svc/secret "env:NAME" holding 32 random bytes (openssl rand -base64 32), the same on every node`,
      { code: 'config_invalid' },
    );
  }
  return { keks, requireSealed };
}

function sealFailure(error: unknown): never {
  if (error instanceof AssertionKeySealError) {
    throw new RuntimeError(`${error.message}; no assertion was signed with it`, { code: 'assertion_keys_unsealable', cause: error });
  }
  throw error;
}

/**
 * The cluster's key set, made on first need by whichever node starts first: on a project that
 * kept its keys in `assertion-keys.json` (before store contract 9), that set is imported, so the
 * keys verifiers already cached keep verifying; otherwise a first key that signs from now. Once
 * the store holds the set, the file is removed (its private keys in the clear are no longer
 * used; the store's copy is the one every node uses). Each save is audited in its transaction.
 *
 * @throws {RuntimeError} when the stored set does not open with this node's KEKs (another KEK, altered).
 * @example
 * const keys = await ensureProjectAssertionKeys(project, deps, custody, log);
 */
export async function ensureProjectAssertionKeys(
  project: Pick<Project, 'controlDir'>,
  deps: Pick<AuthDeps, 'store' | 'clock' | 'random'>,
  custody: AssertionKeyCustody,
  log: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void },
): Promise<{ readonly version: number; readonly set: AssertionKeySetJson }> {
  const file = assertionKeysFile(project);
  const legacy = existsSync(file) ? readAssertionKeys(file) : null;
  let ensured: Awaited<ReturnType<typeof ensureClusterAssertionKeys>>;
  try {
    ensured = await ensureClusterAssertionKeys(deps, custody, { fresh: freshKey(), imported: legacy });
  } catch (error) {
    sealFailure(error);
  }
  if (ensured.change === 'imported') {
    log.info(
      { event: 'gateway.assertion_keys_imported', file, keys: ensured.set.keys.length },
      'assertion key set imported into the control store',
    );
  } else if (ensured.change === 'generated') {
    log.info({ event: 'gateway.assertion_key_created' }, 'assertion key set created in the control store');
  } else if (ensured.change === 'resealed') {
    log.info(
      { event: 'gateway.assertion_keys_resealed', sealed_with: custody.keks[0]?.id ?? null },
      'assertion keys sealed again under the current key-encryption key',
    );
  }
  if (legacy !== null) {
    const stored = new Set(ensured.set.keys.map((k) => k.kid));
    const unused = legacy.keys.filter((k) => !stored.has(k.kid)).map((k) => k.kid);
    rmSync(file, { force: true });
    if (unused.length > 0) {
      log.warn(
        { event: 'gateway.assertion_keys_file_removed', file, unused_kids: unused },
        "this node's assertion-keys.json was not imported (the cluster already had its set) and was removed; its keys are no longer published",
      );
    } else {
      log.info({ event: 'gateway.assertion_keys_file_removed', file }, 'assertion-keys.json removed: the control store holds the set');
    }
  }
  return ensured;
}

/** The cluster's key set as a node follows it: read from its cache, refreshed in the background. */
export interface LiveAssertionKeys {
  /** The set as last read (synchronous: the signer calls it per request). */
  (): AssertionKeySetJson;
  /** The stored version last read. */
  readonly version: () => number;
  /** Reads the stored version now and takes the set when it changed (what the timer does every {@link ASSERTION_KEYS_POLL_MS}). */
  refresh(): Promise<void>;
  /** Stops following. */
  close(): void;
}

/**
 * Follows the cluster's key set: every `everyMs` one primary-key read of the stored set; when its
 * version moved, the set is opened with the node's KEKs and used from then on. A read that fails
 * (the store unreachable) or a set that does not open (altered, another KEK) keeps the last good
 * set and reports why: a node never signs with a key that did not open. A rotation saved on any
 * node is thus in every node's JWK Set within about a second, far inside the pre-publication.
 *
 * @example
 * const keys = liveClusterAssertionKeys(deps, custody, initial, (err) => log.error({ err }, 'assertion key reload failed'));
 */
export function liveClusterAssertionKeys(
  deps: Pick<AuthDeps, 'store'>,
  custody: AssertionKeyCustody,
  initial: { readonly version: number; readonly set: AssertionKeySetJson },
  onReloadError: (error: unknown) => void,
  everyMs = ASSERTION_KEYS_POLL_MS,
): LiveAssertionKeys {
  let current = initial;
  let running: Promise<void> | null = null;
  const refresh = (): Promise<void> => {
    running ??= (async () => {
      try {
        const record = await deps.store.getAssertionKeys();
        if (record === null || record.version === current.version) return;
        const { set } = openAssertionKeySet(record.keySet, custody.keks, { requireSealed: custody.requireSealed });
        current = { version: record.version, set };
      } catch (error) {
        onReloadError(error);
      } finally {
        running = null;
      }
    })();
    return running;
  };
  const timer = setInterval(() => void refresh(), everyMs);
  timer.unref();
  return Object.assign(() => current.set, { version: () => current.version, refresh, close: () => clearInterval(timer) });
}

/**
 * The one call the gateway's start makes for upstream mode: makes the cluster's key set on first
 * need (importing a former `assertion-keys.json`), follows it (a rotation on any node applies
 * without a restart) and returns the signer, whose `jwks()` is `GatewayAppOptions.jwks` and
 * whose `sign(principal, request)` is the `Svc-Assertion` header, and `close()`, which stops
 * following. The audience is `:svc/app-audience`, else the upstream's origin.
 *
 * @throws {RuntimeError} without an upstream, without a KEK on a shared store, or when the stored set does not open.
 * @example
 * const signer = await gatewayAssertionSigner(project, deps, { app, issuer: () => identity().nodeId, log });
 */
export async function gatewayAssertionSigner(
  project: AssertionKeyProject,
  deps: Pick<AuthDeps, 'store' | 'clock' | 'random'>,
  opts: {
    /** `publicOrigin` (`:svc/app-public-origin`), when set, is the origin of every assertion's `htu`. */
    readonly app: Pick<AppGatewayConfig, 'audience' | 'upstream'> & Partial<Pick<AppGatewayConfig, 'publicOrigin'>>;
    readonly issuer: string | (() => string);
    readonly log: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void; error(obj: object, msg?: string): void };
    readonly env?: NodeJS.ProcessEnv;
    /** How often the stored set is looked at; default {@link ASSERTION_KEYS_POLL_MS}. */
    readonly pollMs?: number;
  },
): Promise<AssertionSigner & { readonly keys: LiveAssertionKeys; close(): void }> {
  const audience = assertionAudienceOf(opts.app);
  if (audience === null) throw new RuntimeError('the gateway signs assertions only in upstream mode (:svc/app-upstream is not set)');
  const custody = assertionKeyCustody(project, opts.env);
  const initial = await ensureProjectAssertionKeys(project, deps, custody, opts.log);
  if (assertionSigningKey(initial.set, deps.clock.now()) === null) {
    throw new RuntimeError('no key of the assertion key set signs now; run `svc app rotate-key --immediate`');
  }
  const keys = liveClusterAssertionKeys(
    deps,
    custody,
    initial,
    (err) => opts.log.error({ err }, 'assertion key set reload failed; signing with the last good one'),
    opts.pollMs,
  );
  const signer = createAssertionSigner({
    keys,
    issuer: opts.issuer,
    audience,
    publicOrigin: opts.app.publicOrigin ?? null,
    clock: deps.clock,
    random: deps.random,
  });
  return { ...signer, keys, close: () => keys.close() };
}

/**
 * Rotates the cluster's assertion key set (core's rules; a compare-and-set of the stored set,
 * audited as `app.assertion_key_rotated` in the same transaction). A former `assertion-keys.json`
 * is imported first, so a rotation right after the upgrade rotates the keys verifiers know.
 *
 * @throws {RuntimeError} when the stored set does not open, or there is no KEK on a shared store.
 * @example
 * const r = await rotateProjectAssertionKeys(project, deps, log, { immediate: false });
 */
export async function rotateProjectAssertionKeys(
  project: AssertionKeyProject,
  deps: Pick<AuthDeps, 'store' | 'clock' | 'random'>,
  log: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void },
  opts: { readonly immediate: boolean; readonly env?: NodeJS.ProcessEnv },
): Promise<ClusterAssertionKeyRotation> {
  const custody = assertionKeyCustody(project, opts.env);
  if (existsSync(assertionKeysFile(project))) await ensureProjectAssertionKeys(project, deps, custody, log);
  try {
    return await rotateClusterAssertionKeys(deps, custody, { fresh: freshKey(), immediate: opts.immediate });
  } catch (error) {
    sealFailure(error);
  }
}

import { generateKeyPairSync } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  type AssertionKeyRotation,
  type AssertionKeySetJson,
  assertionAudienceOf,
  assertionSigningKey,
  type Clock,
  type FreshAssertionKey,
  firstAssertionKeySet,
  parseAssertionKeySet,
  type RandomBytes,
  rotateAssertionKeySet,
} from '@svc/core';
import type { AppGatewayConfig } from '@svc/core/config';
import { type AssertionSigner, createAssertionSigner } from '@svc/server';
import { assertOwnerOnly, ensureControlDir } from './control.js';
import { RuntimeError } from './errors.js';
import { fileStamp, liveFileValue } from './live-file.js';
import { writeFileAtomic } from './node-key-history.js';
import type { Project } from './project.js';

/**
 * Where a project's assertion key set lives: beside the node key, owner-only (it holds the
 * private keys that sign `Svc-Assertion`).
 *
 * @example
 * assertionKeysFile(project); // "/srv/demo/.svc/control/assertion-keys.json"
 */
export function assertionKeysFile(project: Pick<Project, 'controlDir'>): string {
  return join(project.controlDir, 'assertion-keys.json');
}

function freshKey(): FreshAssertionKey {
  const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  return { x: jwk.x as string, d: jwk.d as string };
}

const save = (file: string, set: AssertionKeySetJson): void => writeFileAtomic(file, `${JSON.stringify(set, null, 2)}\n`, 0o600);

/**
 * The assertion key set in `file`, checked: owner-only, and a well-formed set.
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

/**
 * Creates the assertion key set with its first key (signing from `now`) unless it exists:
 * the first start of the gateway does this, as the node key is made on external stores.
 * Returns whether it was created.
 *
 * @example
 * if (ensureAssertionKeys(project, Date.now())) log.info({ event: 'gateway.assertion_key_created' }, 'assertion key created');
 */
export function ensureAssertionKeys(project: Pick<Project, 'controlDir'>, now: number): boolean {
  const file = assertionKeysFile(project);
  if (existsSync(file)) return false;
  ensureControlDir(project.controlDir);
  return withLock(file, () => {
    if (existsSync(file)) return false;
    save(file, firstAssertionKeySet(freshKey(), now));
    return true;
  });
}

function withLock<T>(file: string, fn: () => T): T {
  // Two rotations at once would each retire the same key and one would drop the other's new key.
  const lock = join(dirname(file), 'assertion-keys.lock');
  let fd: number;
  try {
    fd = openSync(lock, 'wx', 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    throw new RuntimeError(`another assertion key change holds ${lock}; wait for it, or remove the file if none is running`);
  }
  try {
    return fn();
  } finally {
    closeSync(fd);
    rmSync(lock, { force: true });
  }
}

/**
 * Rotates the assertion key set at `now` (core's rules: the new key is published at once and
 * signs after the pre-publication; the old one stays published for the overlap; `immediate`
 * withdraws every old key at once; without a set yet, the new key is the first and signs at
 * once). The file is replaced atomically; a running gateway picks it up within a second,
 * without a restart.
 *
 * @example
 * const r = rotateAssertionKeys(project, Date.now(), { immediate: false });
 */
export function rotateAssertionKeys(
  project: Pick<Project, 'controlDir'>,
  now: number,
  opts: { readonly immediate: boolean },
): AssertionKeyRotation {
  const file = assertionKeysFile(project);
  ensureControlDir(project.controlDir);
  return withLock(file, () => {
    // No set yet (the gateway never started): the new key is the first, and signs at once.
    const set: AssertionKeySetJson = existsSync(file) ? readAssertionKeys(file) : { version: 1, keys: [] };
    const rotation = rotateAssertionKeySet(set, freshKey(), now, opts);
    if (rotation.outcome === 'rotated') save(file, rotation.set);
    return rotation;
  });
}

/**
 * The key set as it is on disk now, re-read when the file changed (checked at most once a
 * second, so signing does not pay a `stat` per request). A file that cannot be read keeps the
 * last good set and reports why.
 *
 * @example
 * const keys = liveAssertionKeys(assertionKeysFile(project), (err) => log.error({ err }, 'assertion key reload failed'));
 */
export function liveAssertionKeys(file: string, onReloadError: (error: unknown) => void, clock: Clock): () => AssertionKeySetJson {
  const now = () => clock.monotonic?.() ?? performance.now();
  return liveFileValue(
    () => fileStamp(file),
    () => readAssertionKeys(file),
    onReloadError,
    { everyMs: 1000, now },
  );
}

/**
 * The one call the gateway's start makes for upstream mode: creates the assertion key set on
 * first need, keeps it live (rotations apply without a restart) and returns the signer, whose
 * `jwks()` is `GatewayAppOptions.jwks` and whose `sign(principal, request)` is the
 * `Svc-Assertion` header. The audience is `:svc/app-audience`, else the upstream's origin.
 *
 * @throws {RuntimeError} without an upstream, or when the key set cannot be read or created.
 * @example
 * const signer = gatewayAssertionSigner(project, { app: appConfig, issuer: () => identity().nodeId, clock: deps.clock, random: deps.random, log });
 * await buildGatewayApp({ ...opts, jwks: () => signer.jwks() });
 */
export function gatewayAssertionSigner(
  project: Pick<Project, 'controlDir'>,
  opts: {
    /** `publicOrigin` (`:svc/app-public-origin`), when set, is the origin of every assertion's `htu`. */
    readonly app: Pick<AppGatewayConfig, 'audience' | 'upstream'> & Partial<Pick<AppGatewayConfig, 'publicOrigin'>>;
    readonly issuer: string | (() => string);
    readonly clock: Clock;
    readonly random?: RandomBytes;
    readonly log: { info(obj: object, msg?: string): void; error(obj: object, msg?: string): void };
  },
): AssertionSigner {
  const audience = assertionAudienceOf(opts.app);
  if (audience === null) throw new RuntimeError('the gateway signs assertions only in upstream mode (:svc/app-upstream is not set)');
  const now = opts.clock.now();
  const file = assertionKeysFile(project);
  if (ensureAssertionKeys(project, now)) {
    opts.log.info({ event: 'gateway.assertion_key_created', file }, 'assertion key set created');
  }
  const keys = liveAssertionKeys(
    file,
    (err) => opts.log.error({ err, file }, 'assertion key set reload failed; signing with the last good one'),
    opts.clock,
  );
  if (assertionSigningKey(keys(), now) === null) {
    throw new RuntimeError(`no key of the assertion key set ${file} signs now; run \`svc app rotate-key --immediate\``);
  }
  return createAssertionSigner({
    keys,
    issuer: opts.issuer,
    audience,
    publicOrigin: opts.app.publicOrigin ?? null,
    clock: opts.clock,
    ...(opts.random === undefined ? {} : { random: opts.random }),
  });
}

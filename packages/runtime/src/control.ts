import { createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join } from 'node:path';
import { AddonVerificationError, loadStoreAddon, verifyAddon } from '@svc/addons';
import { type AuthDeps, errorCodeOf, type Logger, newId, publicKeyHexOf } from '@svc/core';
import { ConfigError, type ModuleConfig, type SecretRef } from '@svc/core/config';
import type { Store, StoreAddonExport } from '@svc/core/store';
import { RuntimeError } from './errors.js';
import { createLogger } from './logger.js';
import { recordNewNodeKey } from './node-key-history.js';
import { createRandomPool } from './random.js';
import { shellQuote } from './shell-quote.js';

/** One CSPRNG pool per process for every use case. */
const sharedRandom = createRandomPool();

import type { Project } from './project.js';

/**
 * Creates `dir` (and missing parents) owner-only, whatever the umask; an existing one is left as is.
 *
 * @example
 * mkdirOwnerOnly(join(homedir(), '.config', 'svc'));
 */
export function mkdirOwnerOnly(dir: string): void {
  if (existsSync(dir)) return;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/**
 * Creates the control directory (and any missing parents) when it does not exist, owner-only
 * (0700). The mode is set with an explicit chmod because mkdir's mode is filtered by the umask.
 * An existing directory is left as it is: the store refuses one readable by others.
 *
 * @example
 * ensureControlDir(project.controlDir);
 */
export function ensureControlDir(dir: string): void {
  if (existsSync(dir)) {
    if (!statSync(dir).isDirectory()) throw new RuntimeError(`the control directory ${dir} exists but is not a directory; move it away`);
    return;
  }
  mkdirOwnerOnly(dir);
}

/**
 * Writes the node's Ed25519 identity key (PKCS#8 PEM, mode 0600) unless one exists, and records
 * in the key history beside it since when it is valid. Returns whether a key was created.
 *
 * @example
 * ensureNodeKey(project.nodeKey);
 */
export function ensureNodeKey(path: string): boolean {
  if (existsSync(path)) return false;
  const { privateKey } = generateKeyPairSync('ed25519');
  writeSecretFile(path, privateKey.export({ format: 'pem', type: 'pkcs8' }).toString());
  recordNewNodeKey(path, publicKeyHexOf(createPublicKey(privateKey)), Date.now());
  return true;
}

/**
 * Creates a new file with mode 0600 holding `text`, refusing to replace an existing one
 * (unless `overwrite`), fsynced before it is closed.
 *
 * @example
 * writeSecretFile('device.pem', pem, { overwrite: false });
 */
export function writeSecretFile(path: string, text: string, opts: { readonly overwrite?: boolean } = {}): void {
  const fd = openSync(path, opts.overwrite === true ? 'w' : 'wx', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  chmodSync(path, 0o600);
}

/** What the node surface's status reports about the store addon. */
export interface StoreAddonStatus {
  readonly package: string;
  readonly version: string;
  readonly sha256: string | null;
  readonly verified: boolean;
  readonly detail: string;
}

const addonStatus = new WeakMap<Store, StoreAddonStatus>();

/**
 * The verification result recorded when {@link openControlStore} opened `store`.
 *
 * @example
 * const status = addonStatusOf(store); // { package: 'svc-store-sqlite', verified: true, ... }
 */
export function addonStatusOf(store: Store): StoreAddonStatus | undefined {
  return addonStatus.get(store);
}

/** Where a project's pinned addon archives and their installed files live. */
export function packagesDirOf(project: Project): string {
  return join(project.dir, '.svc', 'packages');
}

/** The `node_modules` directory holding this `svc`'s own dependencies, which addons reuse. */
export function dependenciesDir(): string {
  return dirname(dirname(createRequire(import.meta.url).resolve('better-sqlite3/package.json')));
}

/** Resolves a deployment-time secret reference: an environment variable or a file. */
export function resolveSecret(ref: SecretRef, env: NodeJS.ProcessEnv = process.env): string {
  if (ref.source === 'env') {
    const value = env[ref.name];
    if (value === undefined || value === '') throw new RuntimeError(`the secret reference env:${ref.name} is not set in the environment`);
    return value;
  }
  try {
    return readFileSync(ref.name, 'utf8').replace(/\r?\n$/, '');
  } catch (error) {
    throw new RuntimeError(`cannot read the secret file ${ref.name}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

/**
 * Where the control state lives, for people: the embedded store's file, or the store module.
 *
 * @example
 * controlStoreLocation(project); // "/srv/demo/.svc/control/control.db" or "svc-store-postgres (:svc/modules :pg)"
 */
export function controlStoreLocation(project: Project): string {
  return embeddedStoreFile(project) ?? `${project.config.store.package} (:svc/modules :${project.config.store.alias})`;
}

/**
 * Gives a node on an external store (PostgreSQL) its own identity key on first start: there the
 * control directory holds nothing but that key, and every node has its own. With the embedded
 * store, `svc auth init` creates the key together with the control database, so a missing key
 * stays an error there. Returns whether a key was created.
 *
 * @example
 * if (ensureNodeIdentity(project)) log.info({ event: 'node.identity_created' }, 'node identity created');
 */
export function ensureNodeIdentity(project: Project): boolean {
  if (embeddedStoreFile(project) !== null) return false;
  ensureControlDir(project.controlDir);
  return ensureNodeKey(project.nodeKey);
}

/** The SQLite file the embedded store will use, when the store is the embedded one. */
export function embeddedStoreFile(
  project: Pick<Project, 'controlDir' | 'controlDb'> & { readonly config: Pick<Project['config'], 'store'> },
  module: ModuleConfig = project.config.store,
): string | null {
  if (module.package !== 'svc-store-sqlite') return null;
  const file = module.config.get(':store/file');
  if (typeof file !== 'string') return project.controlDb;
  return isAbsolute(file) ? file : join(project.controlDir, file);
}

/**
 * Opens the project's control store through its pinned store addon. Every time, BEFORE the
 * control database is touched, the addon is verified (archive digest against the pin,
 * installed files against the archive, operation set, native module, ABI); any failure is one
 * clear line naming the check and the control database stays untouched. Without `create`, a
 * missing embedded control database is an error that says to run `svc auth init`.
 *
 * @example
 * const store = await openControlStore(project, { create: false });
 */
export async function openControlStore(
  project: Project,
  opts: {
    readonly create: boolean;
    readonly sqliteFile?: string;
    readonly log?: Logger;
    readonly env?: NodeJS.ProcessEnv;
    /** Another store module of project.edn than `:auth/store` names (the target of a move between stores). */
    readonly module?: ModuleConfig;
  },
): Promise<Store> {
  // What decides which code runs (project.edn, and the directory that holds it) must not be
  // writable by anyone but its owner; the addon's own files are checked by verifyAddon.
  assertNotWritableByOthers(project.dir, 'the project directory');
  assertNotWritableByOthers(project.file, 'project.edn');
  const { packages } = project.config;
  const module = opts.module ?? project.config.store;
  const name = module.package as string;
  const pin = packages[name] as { version: string; sha256: string | null };
  let addon: StoreAddonExport;
  try {
    addon = await loadStoreAddon(
      await verifyAddon({ packagesDir: packagesDirOf(project), name, pin, exportName: 'svc/store', dependenciesDir: dependenciesDir() }),
    );
  } catch (error) {
    if (error instanceof AddonVerificationError) {
      throw new RuntimeError(`${error.message} (the control database was not opened)`, { cause: error });
    }
    throw error;
  }
  // `sqliteFile` opens another file with the project's verified embedded store (restore checks a copy).
  const embedded = opts.sqliteFile ?? embeddedStoreFile(project, module);
  const config = opts.sqliteFile === undefined ? module.config : new Map([...module.config, [':store/file', opts.sqliteFile]]);
  if (!opts.create && embedded !== null && !existsSync(embedded)) {
    throw new RuntimeError(`no control database at ${embedded}; run \`svc auth init ${shellQuote(project.dir)}\` first`, {
      code: 'project_not_found',
    });
  }
  let store: Store;
  try {
    store = await addon.open(config, {
      controlDir: project.controlDir,
      configFile: project.file,
      configKey: `:svc/modules :${module.alias} :config`,
      resolveSecret: (ref) => resolveSecret(ref, opts.env),
      // A weakened protection the operator accepted (a PostgreSQL role let in without a
      // password): logged at warn on every open, whatever command opened the store.
      warn: (event, message) => (opts.log ?? createLogger({ env: opts.env ?? process.env, fallback: 'warn' })).warn({ event }, message),
    });
  } catch (error) {
    if (error instanceof ConfigError) {
      throw new RuntimeError(`invalid store configuration in ${project.file}`, {
        code: 'config_invalid',
        details: error.problems.map((p) => `${p.file}: ${p.key}: ${p.message}`),
      });
    }
    if (error instanceof RuntimeError) throw error;
    // The stores' refusals already name the path and the fix (e.g. the chmod to run).
    if (errorCodeOf(error) === 'store_open_failed') throw new RuntimeError((error as Error).message, { cause: error });
    throw new RuntimeError(`cannot open the control store (${name}): ${(error as Error).message}`, { cause: error });
  }
  addonStatus.set(store, {
    package: name,
    version: pin.version,
    sha256: pin.sha256,
    verified: true,
    detail: 'archive digest, installed files, operation set, native module and ABI verified before open',
  });
  return store;
}

/**
 * Records the project id in a new control store (a no-op when it has one) and returns it.
 *
 * @example
 * const projectId = await initProjectId(store);
 */
export async function initProjectId(store: Store): Promise<string> {
  const existing = await store.getProject();
  if (existing !== null) return existing.projectId;
  const clock = { now: Date.now };
  const { projectId } = await store.initProject({ projectId: newId('project', clock, randomBytes), createdAt: clock.now() });
  return projectId;
}

/**
 * The dependencies every core use case receives, for a project whose store is open.
 *
 * @example
 * const deps = await makeDeps(project, store, log);
 * await enrollWithBootstrapToken(deps, { bootstrapToken, publicKey });
 */
export async function makeDeps(project: Project, store: Store, log: Logger): Promise<AuthDeps> {
  const info = await store.getProject();
  if (info === null) {
    throw new RuntimeError(`the control database ${project.controlDb} holds no project; run \`svc auth init ${shellQuote(project.dir)}\``);
  }
  return {
    store,
    clock: { now: Date.now },
    random: sharedRandom,
    log,
    projectId: info.projectId,
    settings: project.config.auth,
  };
}

/**
 * Refuses to load from `path` when its group or others may write it (or replace it, for a
 * directory): under umask 002 a group member could otherwise change what the service runs.
 *
 * @example
 * assertNotWritableByOthers(project.file, 'project.edn');
 */
export function assertNotWritableByOthers(path: string, what: string): void {
  const mode = statSync(path).mode;
  if ((mode & 0o022) !== 0) {
    throw new RuntimeError(
      `refusing to load ${what} ${path}: its mode ${(mode & 0o777).toString(8)} lets ${(mode & 0o020) !== 0 ? 'its group' : 'others'} change it; run \`chmod go-w ${path}\``,
    );
  }
}

/**
 * Refuses a secret file that is missing or readable or writable by group or others.
 *
 * @example
 * assertOwnerOnly(project.nodeKey, 'the node key');
 */
export function assertOwnerOnly(path: string, what: string): void {
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch {
    throw new RuntimeError(`${what} ${path} does not exist; run \`svc auth init\` on the project first`);
  }
  if ((mode & 0o077) !== 0) {
    throw new RuntimeError(
      `refusing to use ${what} ${path}: its mode ${(mode & 0o777).toString(8)} lets others read it; run \`chmod 600 ${path}\``,
    );
  }
}

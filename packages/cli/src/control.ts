import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, fsyncSync, mkdirSync, openSync, statSync, writeSync } from 'node:fs';
import { type AuthDeps, type Logger, newId, type Store } from '@svc/core';
import { openSqliteStore } from 'svc-store-sqlite';
import { CliError } from './cli-error.js';
import type { Project } from './project.js';

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
    if (!statSync(dir).isDirectory()) throw new CliError(`the control directory ${dir} exists but is not a directory; move it away`);
    return;
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/**
 * Writes the node's Ed25519 identity key (PKCS#8 PEM, mode 0600) unless one exists.
 * Returns whether a key was created.
 *
 * @example
 * ensureNodeKey(project.nodeKey);
 */
export function ensureNodeKey(path: string): boolean {
  if (existsSync(path)) return false;
  const { privateKey } = generateKeyPairSync('ed25519');
  writeSecretFile(path, privateKey.export({ format: 'pem', type: 'pkcs8' }).toString());
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

/**
 * Opens the project's control store (the embedded SQLite store) owner-only and durable.
 * Without `create`, a missing control database is an error that says to run `svc auth init`.
 * A store that refuses to open (e.g. a file readable by others) becomes one clear line.
 *
 * @example
 * const store = await openControlStore(project, { create: false });
 */
export async function openControlStore(project: Project, opts: { readonly create: boolean }): Promise<Store> {
  if (!opts.create && !existsSync(project.controlDb)) {
    throw new CliError(`no control database at ${project.controlDb}; run \`svc auth init ${project.dir}\` first`);
  }
  try {
    return await openSqliteStore({ file: project.controlDb, synchronous: 'full', requireOwnerOnly: true });
  } catch (error) {
    const e = error as Error;
    // The store's refusals already name the path and the fix (e.g. the chmod to run).
    if (e.name === 'StoreOpenError') throw new CliError(e.message, { cause: error });
    throw new CliError(`cannot open the control database ${project.controlDb}: ${e.message}`, { cause: error });
  }
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
    throw new CliError(`the control database ${project.controlDb} holds no project; run \`svc auth init ${project.dir}\``);
  }
  return {
    store,
    clock: { now: Date.now },
    random: randomBytes,
    log,
    projectId: info.projectId,
    settings: project.config.auth,
  };
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
    throw new CliError(`${what} ${path} does not exist; run \`svc auth init\` on the project first`);
  }
  if ((mode & 0o077) !== 0) {
    throw new CliError(
      `refusing to use ${what} ${path}: its mode ${(mode & 0o777).toString(8)} lets others read it; run \`chmod 600 ${path}\``,
    );
  }
}

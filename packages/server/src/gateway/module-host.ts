import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { serialize } from 'node:v8';
import { MAX_REQUEST_BODY_BYTES } from '@svc/core/settings';
import type { ServerFailureCode } from '../failure-codes.js';

/**
 * An application module of module mode: the `svc/app` export of a verified package (a Fastify
 * plugin), by the name the operator knows it under (`name@version (:alias)`). Its code is never
 * imported by the service: {@link startModuleHost} loads it in the confined child.
 */
export interface AppModule {
  readonly name: string;
  /** The package's directory, absolute: the child may read it. */
  readonly packageDir: string;
  /** The entry file, absolute, inside `packageDir`. */
  readonly entry: string;
  /** The name the entry exports the plugin under. */
  readonly exportName: string;
  /** The real directories of its dependency closure: the child may read them too. */
  readonly dependencyDirs: readonly string[];
  /**
   * The plugin's options (the CLI passes `{ config }`, the module's `:config` map); default `{}`.
   * They cross to the child by the structured clone algorithm: maps, arrays, plain objects,
   * strings, numbers, bigints; no functions.
   */
  readonly options?: unknown;
}

/** Where the host reports what happens to its process (pino-compatible); never given a request or a secret. */
export interface ModuleHostLog {
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

/** Options of {@link startModuleHost}. */
export interface ModuleHostOptions {
  readonly modules: readonly AppModule[];
  /**
   * The shared directory an installed package's `node_modules` link leads to (`svc package
   * install` makes it): that one link may leave a package. Absent: no link may.
   */
  readonly sharedDependencies?: string;
  /** How long the child may take to load the modules and listen. Default 15 000 ms. */
  readonly startTimeoutMs?: number;
  /** The child's V8 heap cap, in MiB. Default 512. */
  readonly maxHeapMb?: number;
  /** The first restart delay after a crash, doubled per consecutive crash up to `restartMaxDelayMs`. Default 100 ms. */
  readonly restartDelayMs?: number;
  /** Default 10 000 ms. */
  readonly restartMaxDelayMs?: number;
  readonly log?: ModuleHostLog;
}

/** The defaults of {@link ModuleHostOptions}. */
export const MODULE_HOST_DEFAULTS = Object.freeze({
  startTimeoutMs: 15_000,
  maxHeapMb: 512,
  restartDelayMs: 100,
  restartMaxDelayMs: 10_000,
});

/** The running confined process that serves the application modules, as the gateway sees it. */
export interface ModuleHost {
  /** The unix socket it serves on, in a directory only this user may enter. */
  readonly socketPath: string;
  /** The private headers (the per-start secret and `principal` as base64url JSON) for a request that passed identity. */
  forwardHeaders(principal: unknown): Record<string, string>;
  /** After a request timed out: a child that does not answer a ping within a second is killed and restarted. */
  checkAlive(): void;
  /** The process id of the current child (for tests and logs); null while it restarts. */
  readonly pid: number | null;
  close(): Promise<void>;
}

/** Thrown when the modules cannot be started: a module failed to load, or the child did not start. */
export class ModuleHostError extends Error {
  override readonly name = 'ModuleHostError';
  readonly code = 'app_modules_failed' as const satisfies ServerFailureCode;
}

/** The private header names of a forwarded request (the child's gate takes both out). */
export const MODULE_SECRET_HEADER = 'svc-module-key';
export const MODULE_PRINCIPAL_HEADER = 'svc-module-principal';

/** A child that lived this long before it ended counts as healthy: the restart delay starts over. */
const STABLE_AFTER_MS = 10_000;
const LIVENESS_MS = 1_000;
const STDERR_LINES_PER_MINUTE = 60;
const STDERR_LINE_CHARS = 500;
const MAX_WALK_ENTRIES = 50_000;

const silentLog: ModuleHostLog = { info() {}, warn() {}, error() {} };

/** The child entry (built next to this module; when this module runs from `src/` under tsx, the built one in `dist/`). */
function childEntryPath(): string {
  const here = new URL('./module-host-child.mjs', import.meta.url);
  if (existsSync(here)) return fileURLToPath(here);
  const built = new URL('../../dist/gateway/module-host-child.mjs', import.meta.url);
  if (existsSync(built)) return fileURLToPath(built);
  throw new Error('@svc/server: dist/gateway/module-host-child.mjs is missing; build the package (npx tsc -b packages/server)');
}

/** The real directory of the npm package `name` as `from` resolves it. */
function packageDirOf(name: string, from: string): string {
  const req = createRequire(join(from, 'package.json'));
  let dir = dirname(req.resolve(name));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === name) return realpathSync(dir);
    const up = dirname(dir);
    if (up === dir) throw new Error(`cannot find the package directory of ${name}`);
    dir = up;
  }
}

let fastifyFiles: { readonly entry: string; readonly dirs: readonly string[] } | null = null;

/**
 * Fastify's entry and the real directories of its dependency closure (public npm code, no
 * secret): all the child may read of the service's own install.
 */
function fastifyClosure(): { readonly entry: string; readonly dirs: readonly string[] } {
  if (fastifyFiles !== null) return fastifyFiles;
  const here = dirname(fileURLToPath(import.meta.url));
  const root = packageDirOf('fastify', here);
  const seen = new Set<string>();
  const stack = [root];
  while (stack.length > 0) {
    const dir = stack.pop() as string;
    if (seen.has(dir)) continue;
    seen.add(dir);
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    for (const dep of Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies })) {
      try {
        stack.push(packageDirOf(dep, dir));
      } catch {
        // An optional dependency not installed: nothing to read.
      }
    }
  }
  fastifyFiles = { entry: createRequire(join(here, 'package.json')).resolve('fastify'), dirs: [...seen].sort() };
  return fastifyFiles;
}

/**
 * The arguments of the confined child: Node's permission model with reads allowed only in the
 * given directories and the child entry; no `--allow-fs-write`, `--allow-child-process`,
 * `--allow-worker`, `--allow-addons` or `--allow-wasi`, so all of those are refused; addons off
 * twice over (`--no-addons`); a heap cap. Exported so a test can assert exactly what runs.
 *
 * @example
 * spawn(process.execPath, [...moduleHostNodeArgs(['/p/app'], '/srv/dist/gateway/module-host-child.mjs', 512), entry]);
 */
export function moduleHostNodeArgs(readable: readonly string[], childEntry: string, maxHeapMb: number): string[] {
  return [
    '--experimental-permission',
    ...[...new Set([...readable, childEntry])].map((dir) => `--allow-fs-read=${dir}`),
    '--no-addons',
    `--max-old-space-size=${maxHeapMb}`,
    '--disable-warning=ExperimentalWarning',
  ];
}

function realDir(what: string, dir: string): string {
  if (!isAbsolute(dir)) throw new ModuleHostError(`${what} ${dir} is not an absolute path`);
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    throw new ModuleHostError(`${what} ${dir} does not exist`);
  }
  if (real.includes(',')) throw new ModuleHostError(`${what} ${real} contains a comma, which Node's --allow-fs-read cannot take`);
  return real;
}

const within = (dir: string, path: string): boolean => path === dir || path.startsWith(`${dir}${sep}`);

/**
 * The first symbolic link under a package directory that leads outside every readable directory,
 * or null. Node's permission model follows links, so one link in a package to the control
 * directory would undo the confinement: such a package is not started. A package's own
 * `node_modules` link to the shared dependencies directory is the one exception.
 */
function escapingLink(packageDirs: readonly string[], readable: readonly string[], shared: string | null): string | null {
  let seen = 0;
  for (const packageDir of packageDirs) {
    const stack = [packageDir];
    while (stack.length > 0) {
      const dir = stack.pop() as string;
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        seen += 1;
        if (seen > MAX_WALK_ENTRIES) throw new ModuleHostError(`the application packages hold over ${MAX_WALK_ENTRIES} files`);
        const path = join(dir, entry.name);
        if (entry.isDirectory()) stack.push(path);
        else if (entry.isSymbolicLink()) {
          let target: string;
          try {
            target = realpathSync(path);
          } catch {
            continue;
          }
          if (readable.some((d) => within(d, target))) continue;
          if (!(path === join(packageDir, 'node_modules') && target === shared)) return path;
        }
      }
    }
  }
  return null;
}

/** Untrusted text from the child, made one printable line of at most `max` characters. */
function printable(text: string, max: number): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: replacing control characters is the point
  const flat = text.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

interface Generation {
  readonly proc: ChildProcessWithoutNullStreams;
  readonly startedAt: number;
  ended: boolean;
  readonly pongs: Map<number, () => void>;
}

/**
 * Starts the application modules confined in one child process, and returns the gateway's handle
 * on it (see `moduleHostAttach`). The child runs under Node's permission model (see
 * {@link moduleHostNodeArgs}: it may read the packages, their dependencies and Fastify's files,
 * and write, spawn, load addons or start workers nowhere) with an empty environment and `/` as
 * its working directory; it never gets a store handle, a store URL, the control directory, the
 * node key or the assertion keys. It loads each module's plugin into its own Fastify app (each
 * in its own encapsulated context, in order) and serves it on a unix socket in a fresh directory
 * only this user may enter; each request carries the per-start secret (sent over the pipe, never
 * in arguments or environment) and the principal as data. A crashed child is restarted with a
 * doubling delay; a child that does not answer a ping after a request timed out is killed and
 * restarted. `close()` ends it and removes the socket directory.
 *
 * @throws {ModuleHostError} when a module fails to load (the message names it), a package holds a
 *   link leading outside what the child may read, or the child does not start in time.
 * @example
 * const host = await startModuleHost({ modules: [{ name: 'web@1.0.0 (:web)', packageDir, entry, exportName: 'svcApp', dependencyDirs: [] }] });
 * const app = await buildGatewayApp({ ...opts, attach: moduleHostAttach(host) });
 */
export async function startModuleHost(opts: ModuleHostOptions): Promise<ModuleHost> {
  const log = opts.log ?? silentLog;
  const startTimeoutMs = opts.startTimeoutMs ?? MODULE_HOST_DEFAULTS.startTimeoutMs;
  const maxHeapMb = opts.maxHeapMb ?? MODULE_HOST_DEFAULTS.maxHeapMb;
  const restartDelayMs = opts.restartDelayMs ?? MODULE_HOST_DEFAULTS.restartDelayMs;
  const restartMaxDelayMs = opts.restartMaxDelayMs ?? MODULE_HOST_DEFAULTS.restartMaxDelayMs;
  if (opts.modules.length === 0) throw new TypeError('startModuleHost: no application module');

  const names = new Set<string>();
  const modules = opts.modules.map((m) => {
    if (names.has(m.name)) throw new TypeError(`application module ${m.name} is listed twice`);
    names.add(m.name);
    const packageDir = realDir(`application module ${m.name}: the package directory`, m.packageDir);
    let entry: string;
    try {
      entry = realpathSync(m.entry);
    } catch {
      throw new ModuleHostError(`application module ${m.name}: the entry ${m.entry} does not exist`);
    }
    const inside = relative(packageDir, entry);
    if (inside === '' || inside.startsWith(`..${sep}`) || inside === '..' || isAbsolute(inside)) {
      throw new ModuleHostError(`application module ${m.name}: the entry ${m.entry} is not inside the package directory`);
    }
    if (!/^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/.test(m.exportName)) {
      throw new ModuleHostError(`application module ${m.name}: the export name ${JSON.stringify(m.exportName)} is not an identifier`);
    }
    let options: string;
    try {
      options = serialize(m.options ?? {}).toString('base64');
    } catch (error) {
      throw new TypeError(`application module ${m.name}: its options cannot cross to the module process (${(error as Error).message})`);
    }
    return {
      name: m.name,
      packageDir,
      entry: pathToFileURL(entry).href,
      exportName: m.exportName,
      options,
      dependencyDirs: m.dependencyDirs.map((d) => realDir(`application module ${m.name}: the dependency directory`, d)),
    };
  });
  const fastify = fastifyClosure();
  const packageDirs = modules.map((m) => m.packageDir);
  const readable = [...new Set([...packageDirs, ...modules.flatMap((m) => m.dependencyDirs), ...fastify.dirs])];
  const shared = opts.sharedDependencies === undefined ? null : realDir('the shared dependencies directory', opts.sharedDependencies);
  const link = escapingLink(packageDirs, readable, shared);
  if (link !== null)
    throw new ModuleHostError(`${link} is a symbolic link that leads outside the application packages and their dependencies`);
  const childEntry = childEntryPath();
  const args = [...moduleHostNodeArgs(readable, childEntry, maxHeapMb), childEntry];

  // mkdtemp makes the directory 0700: only this user may reach the socket inside it.
  const socketDir = mkdtempSync(join(tmpdir(), 'svc-modules-'));
  const socketPath = join(socketDir, 'app.sock');
  const secret = randomBytes(32).toString('base64url');
  const init = JSON.stringify({
    op: 'init',
    secret,
    fastify: pathToFileURL(fastify.entry).href,
    socket: socketPath,
    bodyLimit: MAX_REQUEST_BODY_BYTES,
    modules: modules.map(({ name, entry, exportName, options }) => ({ name, entry, exportName, options })),
  });

  let current: Generation | null = null;
  let closed = false;
  let consecutiveCrashes = 0;
  let restartTimer: NodeJS.Timeout | undefined;
  let nextPing = 1;
  let stderrBudget = STDERR_LINES_PER_MINUTE;
  const stderrRefill = setInterval(() => {
    stderrBudget = STDERR_LINES_PER_MINUTE;
  }, 60_000);
  stderrRefill.unref();

  const scheduleRestart = (): void => {
    if (closed) return;
    const delay = Math.min(restartMaxDelayMs, restartDelayMs * 2 ** Math.min(consecutiveCrashes, 20));
    consecutiveCrashes += 1;
    log.warn({ event: 'app_modules.restart', restartInMs: delay }, 'application module process will be restarted');
    restartTimer = setTimeout(() => {
      launch().then(
        (gen) => {
          current = gen;
        },
        (err: unknown) => {
          log.error({ event: 'app_modules.restart_failed', err: (err as Error).message }, 'application module process did not restart');
          scheduleRestart();
        },
      );
    }, delay);
  };

  const launch = (): Promise<Generation> =>
    new Promise<Generation>((resolve, reject) => {
      // A socket file left by the previous child: the new one listens on the same path.
      rmSync(socketPath, { force: true });
      const proc = spawn(process.execPath, args, { cwd: '/', env: {}, stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true });
      const gen: Generation = { proc, startedAt: Date.now(), ended: false, pongs: new Map() };
      let settled = false;
      const fail = (why: string): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        proc.kill('SIGKILL');
        reject(new ModuleHostError(why));
      };
      const timer = setTimeout(() => fail(`the application module process did not start within ${startTimeoutMs} ms`), startTimeoutMs);
      proc.stdin.on('error', () => {});
      let out = '';
      proc.stdout.setEncoding('utf8');
      proc.stdout.on('data', (d: string) => {
        out += d;
        if (out.length > 64 * 1024) {
          log.warn({ event: 'app_modules.protocol' }, 'application module process broke the protocol; restarting it');
          proc.kill('SIGKILL');
          return;
        }
        const lines = out.split('\n');
        out = lines.pop() ?? '';
        for (const line of lines) {
          let msg: { op?: unknown; id?: unknown; problem?: unknown };
          try {
            msg = JSON.parse(line);
          } catch {
            continue;
          }
          if (msg.op === 'ready' && !settled) {
            settled = true;
            clearTimeout(timer);
            log.info(
              { event: 'app_modules.started', modules: modules.map((m) => m.name), pid: proc.pid },
              'application modules started (confined)',
            );
            resolve(gen);
          } else if (msg.op === 'refused') {
            fail(typeof msg.problem === 'string' ? printable(msg.problem, STDERR_LINE_CHARS) : 'the application modules did not start');
          } else if (msg.op === 'pong' && typeof msg.id === 'number') {
            gen.pongs.get(msg.id)?.();
          }
        }
      });
      let partial = '';
      proc.stderr.setEncoding('utf8');
      proc.stderr.on('data', (d: string) => {
        partial += d;
        const lines = partial.split('\n');
        partial = (lines.pop() ?? '').slice(-STDERR_LINE_CHARS * 4);
        for (const line of lines) {
          if (line.trim() === '' || stderrBudget <= 0) continue;
          stderrBudget -= 1;
          log.warn({ event: 'app_modules.stderr', stderr: printable(line, STDERR_LINE_CHARS) }, 'application module wrote to stderr');
        }
      });
      proc.on('error', (err) => fail(`the application module process could not start (${err.message})`));
      proc.on('exit', (code, signal) => {
        gen.ended = true;
        const why = signal !== null ? `signal ${signal}` : `exit code ${code}`;
        fail(`the application module process ended (${why}) before it was ready`);
        if (current !== gen || closed) return;
        current = null;
        if (Date.now() - gen.startedAt >= STABLE_AFTER_MS) consecutiveCrashes = 0;
        log.warn({ event: 'app_modules.exit', exit: why }, 'application module process ended');
        scheduleRestart();
      });
      proc.stdin.write(`${init}\n`);
    });

  try {
    current = await launch();
  } catch (err) {
    closed = true;
    clearInterval(stderrRefill);
    rmSync(socketDir, { recursive: true, force: true });
    throw err;
  }

  return Object.freeze({
    socketPath,
    get pid() {
      return current?.proc.pid ?? null;
    },
    forwardHeaders(principal: unknown): Record<string, string> {
      return {
        [MODULE_SECRET_HEADER]: secret,
        [MODULE_PRINCIPAL_HEADER]: Buffer.from(JSON.stringify(principal ?? null), 'utf8').toString('base64url'),
      };
    },
    checkAlive(): void {
      const gen = current;
      if (gen === null || gen.ended || closed) return;
      const id = nextPing++;
      const timer = setTimeout(() => {
        gen.pongs.delete(id);
        if (gen.ended || current !== gen) return;
        log.warn({ event: 'app_modules.unresponsive' }, 'application module process does not answer; restarting it');
        gen.proc.kill('SIGKILL');
      }, LIVENESS_MS);
      gen.pongs.set(id, () => {
        clearTimeout(timer);
        gen.pongs.delete(id);
      });
      gen.proc.stdin.write(`${JSON.stringify({ op: 'ping', id })}\n`);
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      clearTimeout(restartTimer);
      clearInterval(stderrRefill);
      const gen = current;
      current = null;
      if (gen !== null && !gen.ended) {
        const exited = new Promise<void>((res) => gen.proc.once('exit', () => res()));
        gen.proc.stdin.end();
        const kill = setTimeout(() => gen.proc.kill('SIGKILL'), 2_000);
        kill.unref();
        gen.proc.kill('SIGTERM');
        await exited;
        clearTimeout(kill);
      }
      rmSync(socketDir, { recursive: true, force: true });
    },
  });
}

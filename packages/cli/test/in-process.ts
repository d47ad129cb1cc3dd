import { createRequire } from 'node:module';
import { join } from 'node:path';
import { currentIo, type Io, withIo } from '../src/io.js';
import { main } from '../src/main.js';
import { CHILD_TIMEOUT_MS, cleanEnv, type RunResult } from './helpers.js';

/**
 * `svc` in this process: `main(argv)` called with streams, environment, standard input and
 * working directory of its own, for the tests where the process boundary is not the subject
 * (usage errors, help, config errors, the offline commands). A spawn costs about 300 ms of a
 * 2-core machine; a call, a few. The real tier keeps `svc()` of `helpers.ts` (the installed bin)
 * for everything end to end.
 *
 * What is per process, and how a run gets its own without leaking into the next:
 * - stdout, stderr, stdin and `main`'s environment: an `Io` (`src/io.ts`), per run;
 * - `process.env` read by the commands themselves: a proxy that answers from the run's `Io`
 *   inside a run and from the real environment outside;
 * - `process.stdout.write` / `process.stderr.write` (a few commands write a note directly) and
 *   `fs.writeSync` on fd 1 and 2 (pino's logger): routed to the run's `Io` inside a run,
 *   untouched outside;
 * - the working directory and `HOME` (`os.homedir()` reads the real environment): set for the
 *   run and restored after it, so runs are serialised (tests in a file run one at a time anyway);
 * - process listeners and `process.exitCode`: a run that leaves one behind fails (a command that
 *   does so is not one to run in process).
 */
export interface InProcessOptions {
  /** The run's environment (default `cleanEnv()`: no SVC_* variable, the tests' HOME). */
  readonly env?: NodeJS.ProcessEnv | undefined;
  /** The run's working directory (default: this process's). */
  readonly cwd?: string | undefined;
  /** The run's standard input (default: none). */
  readonly stdin?: string | undefined;
}

let installed = false;

/** The process-wide bridges, once: each consults the run in progress and is a no-op outside one. */
function install(): void {
  if (installed) return;
  installed = true;
  const real = process.env;
  const env = (): NodeJS.ProcessEnv => currentIo()?.env ?? real;
  process.env = new Proxy({} as NodeJS.ProcessEnv, {
    get: (_, key) => (typeof key === 'string' ? env()[key] : undefined),
    set: (_, key, value) => {
      if (typeof key === 'string') env()[key] = String(value);
      return true;
    },
    has: (_, key) => typeof key === 'string' && Object.hasOwn(env(), key),
    deleteProperty: (_, key) => {
      if (typeof key === 'string') delete env()[key];
      return true;
    },
    ownKeys: () => Object.keys(env()),
    getOwnPropertyDescriptor: (_, key) => {
      const e = env();
      if (typeof key !== 'string' || !Object.hasOwn(e, key)) return undefined;
      return { value: e[key], writable: true, enumerable: true, configurable: true };
    },
  });
  // pino (the commands' logger) writes fd 2 itself, through `fs.writeSync` (sonic-boom).
  const fs = createRequire(import.meta.url)('node:fs') as typeof import('node:fs');
  const writeSync = fs.writeSync;
  fs.writeSync = function (this: unknown, fd: number, data: unknown, ...rest: unknown[]): number {
    const io = currentIo();
    if (io === undefined || (fd !== 1 && fd !== 2)) return (writeSync as (...a: unknown[]) => number).call(this, fd, data, ...rest);
    if (typeof data === 'string') {
      io.write(fd, data);
      return Buffer.byteLength(data, typeof rest[1] === 'string' ? (rest[1] as BufferEncoding) : 'utf8');
    }
    const view = data as ArrayBufferView;
    const bytes = Buffer.from(view.buffer, view.byteOffset, view.byteLength);
    const offset = typeof rest[0] === 'number' ? rest[0] : 0;
    const length = typeof rest[1] === 'number' ? rest[1] : bytes.length - offset;
    io.write(fd, bytes.subarray(offset, offset + length).toString('utf8'));
    return length;
  } as typeof fs.writeSync;
  for (const [fd, stream] of [
    [1, process.stdout],
    [2, process.stderr],
  ] as const) {
    const original = stream.write;
    stream.write = function write(this: NodeJS.WriteStream, chunk: unknown, ...rest: unknown[]): boolean {
      const io = currentIo();
      if (io === undefined) return (original as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
      io.write(fd, typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'));
      const callback = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
      if (callback !== undefined) process.nextTick(callback);
      return true;
    } as typeof stream.write;
  }
}

/** Runs are serialised: the working directory and HOME are the process's. */
let queue: Promise<unknown> = Promise.resolve();

const WATCHED_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'exit', 'beforeExit', 'uncaughtException', 'unhandledRejection'] as const;

async function runOnce(args: readonly string[], opts: InProcessOptions): Promise<RunResult> {
  install();
  const env = { ...(opts.env ?? cleanEnv()) };
  let stdout = '';
  let stderr = '';
  const io: Io = {
    write: (fd, text) => {
      if (fd === 1) stdout += text;
      else stderr += text;
    },
    env,
    stdin: opts.stdin ?? '',
  };
  const listeners = WATCHED_EVENTS.map((e) => process.listenerCount(e));
  const exitCode = process.exitCode;
  const cwd = process.cwd();
  // `os.homedir()` reads the real environment's HOME, not `process.env`'s proxy.
  const home = Object.getOwnPropertyDescriptor(process.env, 'HOME')?.value as string | undefined;
  const setHome = (value: string | undefined): void => {
    if (value === undefined) delete process.env.HOME;
    else process.env.HOME = value;
  };
  if (opts.cwd !== undefined) process.chdir(opts.cwd);
  setHome(env.HOME ?? home);
  let timer: NodeJS.Timeout | undefined;
  try {
    const code = await Promise.race([
      withIo(io, () => main(args)),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`svc ${args.join(' ')} (in process) did not return within ${CHILD_TIMEOUT_MS} ms\nstderr: ${stderr}`)),
          CHILD_TIMEOUT_MS,
        );
      }),
    ]);
    const leaked = WATCHED_EVENTS.filter((e, i) => process.listenerCount(e) !== listeners[i]);
    if (leaked.length > 0) throw new Error(`svc ${args.join(' ')} (in process) left process listeners behind: ${leaked.join(', ')}`);
    if (process.exitCode !== exitCode) throw new Error(`svc ${args.join(' ')} (in process) set process.exitCode to ${process.exitCode}`);
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
    process.chdir(cwd);
    setHome(home);
  }
}

/**
 * Runs `svc args` in this process and resolves to its exit code and output, like `svc()` of
 * `helpers.ts` (never throws for a non-zero exit).
 *
 * @example
 * const r = await svcInProcess(['auth', 'init', dir, '--json']);
 * assert.equal(r.code, 0, r.stderr);
 */
export function svcInProcess(args: readonly string[], opts: InProcessOptions = {}): Promise<RunResult> {
  const result = queue.then(() => runOnce(args, opts));
  queue = result.catch(() => undefined);
  return result;
}

/**
 * {@link svcInProcess}, failing the test with its stderr unless it exits 0.
 *
 * @example
 * await svcOkInProcess(['auth', 'keygen', '--out', keyFile]);
 */
export async function svcOkInProcess(args: readonly string[], opts: InProcessOptions = {}): Promise<RunResult> {
  const r = await svcInProcess(args, opts);
  if (r.code !== 0) throw new Error(`svc ${args.join(' ')} (in process) exited ${r.code}: ${r.stderr}`);
  return r;
}

/** `svc auth init --json` on `dir` in process, parsed (as `initProject` of `helpers.ts`). */
export async function initProjectInProcess(
  dir: string,
  opts: InProcessOptions & { recover?: boolean } = {},
): Promise<{ project: string; control_db: string; bootstrap_token: string; expires_at: string }> {
  const r = await svcOkInProcess(['auth', 'init', dir, '--json', ...(opts.recover === true ? ['--recover'] : [])], opts);
  return JSON.parse(r.stdout) as { project: string; control_db: string; bootstrap_token: string; expires_at: string };
}

/** A new device key written by `svc auth keygen` in process, with its public key hex (as `keygen` of `helpers.ts`). */
export async function keygenInProcess(out: string, opts: InProcessOptions = {}): Promise<string> {
  const r = await svcOkInProcess(['auth', 'keygen', '--out', out], opts);
  return r.stdout.trim();
}

/** A project initialised and its first admin enrolled, in process (as `enrolledProject` of `helpers.ts`). */
export async function enrolledProjectInProcess(
  root: string,
  opts: InProcessOptions = {},
): Promise<{ dir: string; keyFile: string; publicKey: string; deviceId: string; bootstrapToken: string }> {
  const dir = join(root, 'project');
  const init = await initProjectInProcess(dir, opts);
  const keyFile = join(root, 'admin.pem');
  const publicKey = await keygenInProcess(keyFile, opts);
  const enrolled = await svcOkInProcess(['auth', 'enroll', init.bootstrap_token, publicKey, dir, '--json'], opts);
  const { device } = JSON.parse(enrolled.stdout) as { device: { id: string } };
  return { dir, keyFile, publicKey, deviceId: device.id, bootstrapToken: init.bootstrap_token };
}

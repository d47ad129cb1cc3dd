import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The real CLI through the door a user uses: the `svc` that `npm ci` linked into the
 * repository's `node_modules/.bin` (what `npx svc` runs), not the built file behind it.
 */
export const SVC_BIN = fileURLToPath(new URL('../../../node_modules/.bin/svc', import.meta.url));

/** Generous: the suite runs on loaded 2-core machines. */
export const CHILD_TIMEOUT_MS = 90_000;

export interface RunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** A fresh temporary directory, removed by `cleanup`. */
export function tempDir(prefix = 'svc-cli-test-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A home directory of this test process's own, so no test reads or writes the real user's
 * `~/.config/svc` (device key, credentials). Removed when the process exits.
 */
const TEST_HOME = mkdtempSync(join(tmpdir(), 'svc-cli-home-'));
process.on('exit', () => rmSync(TEST_HOME, { recursive: true, force: true }));

/**
 * The parent's environment without any SVC_* variable, with a test HOME, plus `extra`.
 * `SVC_APP_LISTEN` is `127.0.0.1:0`: every `svc serve` of the suite also starts the application
 * gateway, which must not fight over its default port 8080 when tests run in parallel (pass
 * `SVC_APP_LISTEN: undefined` in `extra` to test the default or `:svc/app-listen`).
 */
export function cleanEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { HOME: TEST_HOME, SVC_APP_LISTEN: '127.0.0.1:0' };
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SVC_') && k !== 'NODE_OPTIONS' && k !== 'HOME') env[k] = v;
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

/** Runs a program to completion (never throws for a non-zero exit). */
export function run(
  file: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv | undefined; cwd?: string } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      [...args],
      { env: opts.env ?? cleanEnv(), cwd: opts.cwd, timeout: CHILD_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' },
      (error, stdout, stderr) => {
        if (error !== null && typeof error.code !== 'number') {
          reject(new Error(`${file} ${args.join(' ')} failed to run: ${error.message}\n${stderr}`));
          return;
        }
        resolve({ code: error === null ? 0 : (error.code as number), stdout, stderr });
      },
    );
  });
}

/** Runs `svc` (the linked `node_modules/.bin/svc`) with `args`. */
export function svc(args: readonly string[], opts: { env?: NodeJS.ProcessEnv | undefined; cwd?: string } = {}): Promise<RunResult> {
  return run(process.execPath, [SVC_BIN, ...args], opts);
}

/** Runs `svc` and fails the test with its stderr unless it exits 0. */
export async function svcOk(args: readonly string[], opts: { env?: NodeJS.ProcessEnv | undefined; cwd?: string } = {}): Promise<RunResult> {
  const r = await svc(args, opts);
  if (r.code !== 0) throw new Error(`svc ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return r;
}

/** Runs a bash script. */
export function bash(script: string, opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<RunResult> {
  return run('bash', ['-euo', 'pipefail', '-c', script], opts);
}

/** A server child process started by {@link startServer}. */
export interface ServerProcess {
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** Everything it wrote to stderr so far (its JSON logs). */
  stderr(): string;
  /** Sends `signal` and resolves with the exit code once it has exited. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** A started `svc` child process, once `ready` matched its stdout. */
export interface StartedProcess<T> {
  readonly ready: T;
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Sends `signal` and resolves with the exit code once it has exited. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `svc <args>` and resolves once `ready(stdout so far)` returns something other than
 * null; rejects with its output when it exits first or does not get ready in time.
 */
export function startUntilReady<T>(
  args: readonly string[],
  ready: (stdout: string) => T | null,
  opts: { env?: NodeJS.ProcessEnv } = {},
): Promise<StartedProcess<T>> {
  const child = spawn(process.execPath, [SVC_BIN, ...args], { env: opts.env ?? cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (code, signal) => {
      exitCode = code ?? (signal === null ? null : -1);
      resolve(code);
    });
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`svc ${args.join(' ')} did not get ready within ${CHILD_TIMEOUT_MS} ms\nstdout: ${out}\nstderr: ${err}`));
    }, CHILD_TIMEOUT_MS);
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const value = ready(out);
      if (value === null) return;
      clearTimeout(timer);
      resolve({
        ready: value,
        child,
        stdout: () => out,
        stderr: () => err,
        async stop(signal: NodeJS.Signals = 'SIGTERM') {
          if (exitCode === undefined) child.kill(signal);
          // Bounded: a child that ignores the signal fails the test by name instead of hanging it.
          return withTimeout(exited, `svc ${args.join(' ')} to exit after ${signal}`, CHILD_TIMEOUT_MS, () => child.kill('SIGKILL'));
        },
      });
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`svc ${args.join(' ')} exited with ${code} before it was ready\nstdout: ${out}\nstderr: ${err}`));
    });
  });
}

const READY = /svc auth: management API listening on (http:\/\/\S+:(\d+))/;

/**
 * Starts `svc <args>` (e.g. `auth serve --listen 127.0.0.1:0 DIR`) and resolves once it prints
 * its listening line; rejects with its stderr when it exits first.
 */
export async function startServer(args: readonly string[], opts: { env?: NodeJS.ProcessEnv } = {}): Promise<ServerProcess> {
  const started = await startUntilReady(args, (out) => READY.exec(out), opts);
  return {
    url: started.ready[1] as string,
    port: Number(started.ready[2]),
    child: started.child,
    stderr: started.stderr,
    stop: started.stop,
  };
}

/** `svc auth init --json` on `dir`, parsed. */
export async function initProject(
  dir: string,
  opts: { env?: NodeJS.ProcessEnv; recover?: boolean } = {},
): Promise<{ project: string; control_db: string; bootstrap_token: string; expires_at: string }> {
  const r = await svcOk(['auth', 'init', dir, '--json', ...(opts.recover === true ? ['--recover'] : [])], opts);
  return JSON.parse(r.stdout) as { project: string; control_db: string; bootstrap_token: string; expires_at: string };
}

/** A new device key written by `svc auth keygen`, with its public key hex. */
export async function keygen(out: string, opts: { env?: NodeJS.ProcessEnv } = {}): Promise<string> {
  const r = await svcOk(['auth', 'keygen', '--out', out], opts);
  return r.stdout.trim();
}

/** A project initialised and its first admin enrolled; returns the key file and its device. */
export async function enrolledProject(
  root: string,
  opts: { env?: NodeJS.ProcessEnv } = {},
): Promise<{ dir: string; keyFile: string; publicKey: string; deviceId: string; bootstrapToken: string }> {
  const dir = join(root, 'project');
  const init = await initProject(dir, opts);
  const keyFile = join(root, 'admin.pem');
  const publicKey = await keygen(keyFile, opts);
  const enrolled = await svcOk(['auth', 'enroll', init.bootstrap_token, publicKey, dir, '--json'], opts);
  const { device } = JSON.parse(enrolled.stdout) as { device: { id: string } };
  return { dir, keyFile, publicKey, deviceId: device.id, bootstrapToken: init.bootstrap_token };
}

/** The `code` of a problem+json body. */
export async function problemCode(res: Response): Promise<string> {
  const body = (await res.json()) as { code?: string };
  return body.code ?? `(no code, status ${res.status})`;
}

/**
 * Runs `svc args` on a real terminal (a pty, driven by Python's standard library), answers
 * the first `prompt` it shows with `answer` and Enter, and returns everything the terminal
 * showed and the exit code: what a person at a keyboard sees.
 */
export function svcOnTerminal(
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; prompt: string; answer: string },
): Promise<{ code: number; screen: string }> {
  const driver = `
import json, os, pty, sys
prompt, answer = sys.argv[1].encode(), sys.argv[2].encode()
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[3], sys.argv[3:])
out = b''
while prompt not in out:
    try:
        chunk = os.read(fd, 1024)
    except OSError:
        break
    if not chunk: break
    out += chunk
os.write(fd, answer + b'\\r')
while True:
    try:
        chunk = os.read(fd, 1024)
    except OSError:
        break
    if not chunk: break
    out += chunk
_, status = os.waitpid(pid, 0)
print(json.dumps({'screen': out.decode('utf8', 'replace'), 'code': os.waitstatus_to_exitcode(status)}))
`;
  return run('python3', ['-c', driver, opts.prompt, opts.answer, process.execPath, SVC_BIN, ...args], { env: opts.env ?? cleanEnv() }).then(
    (r) => {
      if (r.code !== 0) throw new Error(`the pty driver failed: ${r.stderr}`);
      return JSON.parse(r.stdout) as { code: number; screen: string };
    },
  );
}

/** A TCP port free on 127.0.0.1 right now (for a listener whose address must be known before it starts). */
export async function freePort(): Promise<number> {
  const s = createNetServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as { port: number };
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/**
 * `promise`, or a rejection naming `what` once `ms` have passed (after calling `onTimeout`, e.g.
 * to kill what it waited for): every wait of the tests is bounded and says what it waited for.
 *
 * @example
 * const code = await withTimeout(exited, 'svc serve to exit after SIGTERM', 30_000);
 */
export function withTimeout<T>(promise: Promise<T>, what: string, ms: number = CHILD_TIMEOUT_MS, onTimeout?: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout?.();
      reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
    }, ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Polls `check` every `everyMs` until it holds; fails after `ms` naming `what`.
 *
 * @example
 * await waitUntil('50 successful refreshes', () => ok >= 50);
 */
export async function waitUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  opts: { ms?: number; everyMs?: number } = {},
): Promise<void> {
  const ms = opts.ms ?? CHILD_TIMEOUT_MS;
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, opts.everyMs ?? 20));
  }
}

/**
 * Resolves once `child`'s standard output has ended, so that everything it printed has been read
 * (its 'exit' can come before the last 'data'); fails after `ms` naming the child.
 *
 * @example
 * await server.stop();
 * await stdoutEnded(server.child, 'svc serve');
 */
export function stdoutEnded(child: ChildProcess, what: string, ms: number = CHILD_TIMEOUT_MS): Promise<void> {
  const stdout = child.stdout;
  if (stdout === null || stdout.readableEnded || stdout.destroyed) return Promise.resolve();
  return withTimeout(
    new Promise<void>((resolve) => {
      stdout.once('end', resolve);
      stdout.once('close', resolve);
    }),
    `the end of ${what}'s standard output`,
    ms,
  );
}

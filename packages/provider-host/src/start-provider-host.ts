import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync, readdirSync, realpathSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type {
  ProviderBeginResult,
  ProviderContext,
  ProviderFinishResult,
  ProviderHandle,
  ProviderHealth,
  ProviderJson,
  ProviderPolicy,
  ProviderRequest,
  StoredCredential,
} from '@svc/core';
import { checkBeginAnswer, checkCredentialIdAnswer, checkFinishAnswer, checkHealthAnswer } from './answer-shape.js';
import { ProviderError, type ProviderFailure } from './provider-error.js';

/** Where the host reports what happens to its process (pino-compatible); never given a configuration value. */
export interface ProviderHostLog {
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

/** Options of {@link startProviderHost}: a verified package (see `verifyProviderPackage`), its configuration and policy. */
export interface ProviderHostOptions {
  /** The module's alias in `:svc/modules` (also `policy.name`). */
  readonly name: string;
  /** The verified package's directory: the child may read it. */
  readonly packageDir: string;
  /** The entry file, relative to `packageDir` (it must stay inside). */
  readonly entry: string;
  /** The export that is the `AuthProvider` (`default` or a name). */
  readonly exportName: string;
  /** The directories of its dependencies: the child may read them too, and nothing else of the disk. */
  readonly dependencyDirs: readonly string[];
  /**
   * The shared directory an installed package's `node_modules` link leads to (`svc package
   * install` makes it; verification pins its target): that one link is allowed, so the package
   * resolves its dependencies. Absent: no link may leave the package and its dependencies.
   */
  readonly sharedDependencies?: string;
  /** The module's `:config` as JSON, secret references resolved: sent over the pipe, never in arguments or environment. */
  readonly config: ProviderJson;
  readonly policy: ProviderPolicy;
  readonly packageName: string;
  readonly packageVersion: string;
  /** Who signed the package (the trusted publisher's name). */
  readonly signer: string;
  /** The verified signer's public key (64 hex); absent, the handle's `signerKey` is null (no trusted method). */
  readonly signerKey?: string;
  /** How long one call may take. Default 10 000 ms. */
  readonly callTimeoutMs?: number;
  /** How long the process may take to load the package and check its configuration. Default 15 000 ms. */
  readonly startTimeoutMs?: number;
  /** The largest message the child may send, in bytes. Default 1 MiB. */
  readonly maxMessageBytes?: number;
  /** The child's V8 heap cap, in MiB. Default 256. */
  readonly maxHeapMb?: number;
  /** The first restart delay after a crash, doubled per consecutive crash up to `restartMaxDelayMs`. Default 100 ms. */
  readonly restartDelayMs?: number;
  /** Default 10 000 ms. */
  readonly restartMaxDelayMs?: number;
  readonly log?: ProviderHostLog;
}

/** The defaults of {@link ProviderHostOptions}. */
export const PROVIDER_HOST_DEFAULTS = Object.freeze({
  callTimeoutMs: 10_000,
  startTimeoutMs: 15_000,
  maxMessageBytes: 1024 * 1024,
  maxHeapMb: 256,
  restartDelayMs: 100,
  restartMaxDelayMs: 10_000,
});

/** A child that lived this long before it ended counts as healthy: the restart delay starts over. */
const STABLE_AFTER_MS = 10_000;
/** After a call timed out, the child must answer a ping within this long or it is restarted. */
const LIVENESS_MS = 1_000;
/** Lines of the child's stderr logged per minute, at most (a flooding provider cannot flood the log). */
const STDERR_LINES_PER_MINUTE = 60;
const STDERR_LINE_CHARS = 500;

const silentLog: ProviderHostLog = { info() {}, warn() {}, error() {} };

/** The child entry (built next to this module; when this module runs from `src/` under tsx, the built one in `dist/`). */
function childEntryPath(): string {
  const here = new URL('./child.mjs', import.meta.url);
  if (existsSync(here)) return fileURLToPath(here);
  const built = new URL('../dist/child.mjs', import.meta.url);
  if (existsSync(built)) return fileURLToPath(built);
  throw new Error('@svc/provider-host: dist/child.mjs is missing; build the package (npx tsc -b packages/provider-host)');
}

/**
 * The arguments of the confined child: Node's permission model with reads allowed only in the
 * package, its dependencies and the child entry; no `--allow-fs-write`, `--allow-child-process`,
 * `--allow-worker`, `--allow-addons` or `--allow-wasi`, so all of those are refused; addons off
 * twice over (`--no-addons`); a heap cap. Exported so a test can assert exactly what runs.
 *
 * @example
 * spawn(process.execPath, [...confinedNodeArgs(['/p/pkg'], '/host/dist/child.mjs', 256), '/host/dist/child.mjs']);
 */
export function confinedNodeArgs(readable: readonly string[], childEntry: string, maxHeapMb: number): string[] {
  return [
    '--experimental-permission',
    ...[...readable, childEntry].map((dir) => `--allow-fs-read=${dir}`),
    '--no-addons',
    `--max-old-space-size=${maxHeapMb}`,
    // The permission model prints an experimental warning on every start: noise in the log.
    '--disable-warning=ExperimentalWarning',
  ];
}

function realDir(name: string, what: string, dir: string): string {
  if (!isAbsolute(dir)) throw new ProviderError(name, 'start_refused', `${what} ${dir} is not an absolute path`);
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    throw new ProviderError(name, 'start_refused', `${what} ${dir} does not exist`);
  }
  // Node 20 once read a comma-separated list here: a comma in a path would be ambiguous.
  if (real.includes(','))
    throw new ProviderError(name, 'start_refused', `${what} ${real} contains a comma, which Node's --allow-fs-read cannot take`);
  return real;
}

/** How many entries the symbolic-link walk looks at, at most, before it refuses the package as too large. */
const MAX_WALK_ENTRIES = 50_000;

const within = (dir: string, path: string): boolean => path === dir || path.startsWith(`${dir}${sep}`);

/**
 * The first symbolic link under `dirs` that leads outside all of them, or null. Node's
 * permission model follows links (documented), so one link in a readable directory to the
 * control directory would undo the confinement: such a package is not started.
 */
function escapingLink(name: string, dirs: readonly string[], sharedDependencies: string | null): string | null {
  const packageDir = dirs[0] ?? '';
  let seen = 0;
  const stack = [...dirs];
  while (stack.length > 0) {
    const dir = stack.pop() as string;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      seen += 1;
      if (seen > MAX_WALK_ENTRIES)
        throw new ProviderError(name, 'start_refused', `the package and its dependencies hold over ${MAX_WALK_ENTRIES} files`);
      const path = join(dir, entry.name);
      if (entry.isDirectory()) stack.push(path);
      else if (entry.isSymbolicLink()) {
        let target: string;
        try {
          target = realpathSync(path);
        } catch {
          continue; // A dangling link leads nowhere.
        }
        if (dirs.some((d) => within(d, target))) continue;
        // The one link an installed package has by design: its `node_modules`, to the shared
        // directory its dependencies are resolved from (svc package install). Through it the
        // provider can read that directory's npm packages (public code, no secret), never write.
        if (!(path === join(packageDir, 'node_modules') && target === sharedDependencies)) return path;
      }
    }
  }
  return null;
}

/** Every string of `config` long enough to be a secret: redacted from anything the child writes to stderr. */
function secretStrings(config: ProviderJson, out: Set<string> = new Set()): Set<string> {
  if (typeof config === 'string') {
    if (config.length >= 6) out.add(config);
  } else if (Array.isArray(config)) {
    for (const v of config) secretStrings(v, out);
  } else if (config !== null && typeof config === 'object') {
    for (const v of Object.values(config)) secretStrings(v as ProviderJson, out);
  }
  return out;
}

/** Untrusted text from the provider, made one printable line of at most `max` characters. */
function printable(text: string, max: number): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: replacing control characters is the point
  const flat = text.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

interface Pending {
  readonly op: string;
  resolve(value: unknown): void;
  reject(err: ProviderError): void;
}

/** One running child process and what is in flight on it. */
interface Generation {
  readonly proc: ChildProcessWithoutNullStreams;
  readonly pending: Map<number, Pending>;
  readonly startedAt: number;
  chunks: Buffer[];
  buffered: number;
  ended: boolean;
  /** It broke the protocol and is being killed: anything more it writes is dropped. */
  broken: boolean;
}

type Answer = { id: number; ok: true; value: unknown } | { id: number; ok: false; error?: unknown; code?: unknown; refused?: unknown };

function isAnswer(value: unknown): value is Answer {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.id === 'number' && typeof v.ok === 'boolean';
}

/**
 * Starts a provider package confined in its own child process and returns the service's
 * handle on it. The child runs under Node's permission model (see {@link confinedNodeArgs})
 * with an empty environment and `/` as its working directory, loads the package's entry,
 * checks that the export is an `AuthProvider` of contract version 1 and runs its
 * `validateConfig` on the configuration, which arrives over the pipe. Every answer is checked
 * for shape here before it is returned (see `checkFinishAnswer`); an answer that is malformed
 * or over `maxMessageBytes`, a call over `callTimeoutMs`, a crash: each fails the call with a
 * {@link ProviderError} naming why. A crashed child is restarted with a doubling delay; a child
 * that does not answer a ping after a timed-out call is restarted too. `close()` ends it.
 *
 * @throws {ProviderError} `start_refused` when the package is not a provider, its
 *   configuration is refused (`problems` lists the provider's lines), or it does not start.
 * @example
 * const verified = await verifyProviderPackage(project, 'passkeys'); // its `name` is the npm package's
 * const handle = await startProviderHost({ ...verified, name: 'passkeys', packageName: verified.name,
 *   packageVersion: verified.version, config, policy, log });
 * const { identity } = await handle.finish(ctx, { state, request, credential: null });
 */
export async function startProviderHost(opts: ProviderHostOptions): Promise<ProviderHandle> {
  const name = opts.name;
  const log = opts.log ?? silentLog;
  const callTimeoutMs = opts.callTimeoutMs ?? PROVIDER_HOST_DEFAULTS.callTimeoutMs;
  const startTimeoutMs = opts.startTimeoutMs ?? PROVIDER_HOST_DEFAULTS.startTimeoutMs;
  const maxMessageBytes = opts.maxMessageBytes ?? PROVIDER_HOST_DEFAULTS.maxMessageBytes;
  const maxHeapMb = opts.maxHeapMb ?? PROVIDER_HOST_DEFAULTS.maxHeapMb;
  const restartDelayMs = opts.restartDelayMs ?? PROVIDER_HOST_DEFAULTS.restartDelayMs;
  const restartMaxDelayMs = opts.restartMaxDelayMs ?? PROVIDER_HOST_DEFAULTS.restartMaxDelayMs;

  if (opts.policy.name !== name) throw new ProviderError(name, 'start_refused', `its policy is named ${opts.policy.name}, not ${name}`);
  const packageDir = realDir(name, 'the package directory', opts.packageDir);
  const dependencyDirs = opts.dependencyDirs.map((d) => realDir(name, 'the dependency directory', d));
  const entryPath = resolve(packageDir, opts.entry);
  const inside = relative(packageDir, entryPath);
  if (inside === '' || inside.startsWith(`..${sep}`) || inside === '..' || isAbsolute(inside)) {
    throw new ProviderError(name, 'start_refused', `the entry ${opts.entry} is not inside the package directory`);
  }
  if (!/^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/.test(opts.exportName)) {
    throw new ProviderError(name, 'start_refused', `the export name ${JSON.stringify(opts.exportName)} is not an identifier`);
  }
  const shared = opts.sharedDependencies === undefined ? null : realDir(name, 'the shared dependencies directory', opts.sharedDependencies);
  const link = escapingLink(name, [packageDir, ...dependencyDirs], shared);
  if (link !== null)
    throw new ProviderError(name, 'start_refused', `${link} is a symbolic link that leads outside the package and its dependencies`);
  const childEntry = childEntryPath();
  const args = [...confinedNodeArgs([packageDir, ...dependencyDirs], childEntry, maxHeapMb), childEntry];
  const secrets = [...secretStrings(opts.config)].sort((a, b) => b.length - a.length);
  const redact = (line: string): string => secrets.reduce((acc, s) => acc.split(s).join('[redacted]'), line);

  let nextId = 1;
  let current: Generation | null = null;
  let closed = false;
  let consecutiveCrashes = 0;
  let restartTimer: NodeJS.Timeout | undefined;
  let kind = '';
  // Calls wait on this while a (re)start is under way.
  let ready: Promise<Generation>;
  let markReady: (gen: Generation) => void = () => {};
  const resetReady = (): void => {
    ready = new Promise<Generation>((res) => {
      markReady = res;
    });
    // Nobody may be waiting: an unobserved pending promise is fine, a rejection is never used.
  };
  resetReady();

  let stderrBudget = STDERR_LINES_PER_MINUTE;
  const stderrRefill = setInterval(() => {
    stderrBudget = STDERR_LINES_PER_MINUTE;
  }, 60_000);
  stderrRefill.unref();

  const failAll = (gen: Generation, reason: ProviderFailure, message: (op: string) => string): void => {
    for (const [id, p] of gen.pending) {
      gen.pending.delete(id);
      p.reject(new ProviderError(name, reason, message(p.op)));
    }
  };

  /** Ends a child that broke the protocol: its in-flight calls fail with `reason`, then the exit handler restarts it. */
  const breakOff = (gen: Generation, reason: ProviderFailure, why: string): void => {
    log.warn({ provider: name, reason }, `provider ${name} broke the protocol (${why}); restarting it`);
    gen.broken = true;
    gen.chunks = [];
    gen.buffered = 0;
    failAll(gen, reason, (op) => `${op} failed: ${why}`);
    gen.proc.kill('SIGKILL');
  };

  const onLine = (gen: Generation, line: string): void => {
    let msg: unknown;
    try {
      msg = JSON.parse(line);
    } catch {
      breakOff(gen, 'malformed_answer', 'it wrote a line that is not JSON');
      return;
    }
    if (!isAnswer(msg)) {
      breakOff(gen, 'malformed_answer', 'it wrote a message that is not an answer');
      return;
    }
    const p = gen.pending.get(msg.id);
    // A late answer to a call that already timed out: nobody waits for it.
    if (p === undefined) return;
    gen.pending.delete(msg.id);
    p.resolve(msg);
  };

  const onData = (gen: Generation, data: Buffer): void => {
    let chunk = data;
    for (;;) {
      const nl = chunk.indexOf(0x0a);
      if (nl < 0) break;
      const head = chunk.subarray(0, nl);
      const lineBytes = gen.buffered + head.length;
      const line = gen.chunks.length === 0 ? head : Buffer.concat([...gen.chunks, head], lineBytes);
      gen.chunks = [];
      gen.buffered = 0;
      chunk = chunk.subarray(nl + 1);
      if (lineBytes > maxMessageBytes) {
        breakOff(gen, 'oversized', `it sent a message of ${lineBytes} bytes (at most ${maxMessageBytes})`);
        return;
      }
      onLine(gen, line.toString('utf8'));
      if (gen.broken) return;
    }
    if (chunk.length === 0) return;
    gen.chunks.push(Buffer.from(chunk));
    gen.buffered += chunk.length;
    if (gen.buffered > maxMessageBytes) {
      breakOff(gen, 'oversized', `it sent a message of over ${maxMessageBytes} bytes`);
    }
  };

  const send = (
    gen: Generation,
    id: number,
    op: string,
    payload: Record<string, unknown>,
    timeoutMs: number,
    statedMs = timeoutMs,
  ): Promise<Answer> =>
    new Promise<Answer>((res, rej) => {
      if (gen.ended) {
        rej(new ProviderError(name, 'crashed', `${op} failed: the provider process ended; it is being restarted`));
        return;
      }
      const timer = setTimeout(() => {
        if (!gen.pending.delete(id)) return;
        rej(new ProviderError(name, 'timeout', `${op} did not answer within ${statedMs} ms`));
        if (op !== 'ping' && op !== 'init') checkAlive(gen);
      }, timeoutMs);
      gen.pending.set(id, {
        op,
        resolve: (v) => {
          clearTimeout(timer);
          res(v as Answer);
        },
        reject: (err) => {
          clearTimeout(timer);
          rej(err);
        },
      });
      gen.proc.stdin.write(`${JSON.stringify({ id, op, ...payload })}\n`);
    });

  /** After a timeout: a child that cannot even answer a ping (a blocked event loop) is restarted. */
  const checkAlive = (gen: Generation): void => {
    if (gen.ended || current !== gen) return;
    send(gen, nextId++, 'ping', { args: [] }, LIVENESS_MS).catch(() => {
      if (gen.ended || current !== gen) return;
      breakOff(gen, 'timeout', 'it does not answer at all');
    });
  };

  const scheduleRestart = (): void => {
    if (closed) return;
    const delay = Math.min(restartMaxDelayMs, restartDelayMs * 2 ** Math.min(consecutiveCrashes, 20));
    consecutiveCrashes += 1;
    log.warn({ provider: name, restartInMs: delay }, `provider ${name} will be restarted`);
    restartTimer = setTimeout(() => {
      launch().then(
        (gen) => markReady(gen),
        (err: unknown) => {
          log.error({ provider: name, reason: err instanceof ProviderError ? err.reason : 'unknown' }, `provider ${name} did not restart`);
          scheduleRestart();
        },
      );
    }, delay);
  };

  const launch = async (): Promise<Generation> => {
    const proc = spawn(process.execPath, args, { cwd: '/', env: {}, stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true });
    const gen: Generation = { proc, pending: new Map(), startedAt: Date.now(), chunks: [], buffered: 0, ended: false, broken: false };
    proc.stdout.on('data', (d: Buffer) => {
      if (!gen.ended && !gen.broken) onData(gen, d);
    });
    // A write to a child that just died: its exit handler fails the calls.
    proc.stdin.on('error', () => {});
    let partial = '';
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (d: string) => {
      partial += d;
      const lines = partial.split('\n');
      partial = (lines.pop() ?? '').slice(-STDERR_LINE_CHARS * 4);
      for (const line of lines) {
        if (line.trim() === '' || stderrBudget <= 0) continue;
        stderrBudget -= 1;
        log.warn({ provider: name, stderr: redact(printable(line, STDERR_LINE_CHARS)) }, `provider ${name} wrote to stderr`);
      }
    });
    proc.on('exit', (code, signal) => {
      gen.ended = true;
      const why = signal !== null ? `signal ${signal}` : `exit code ${code}`;
      failAll(gen, closed ? 'closed' : 'crashed', (op) =>
        closed
          ? `${op} failed: the host was closed`
          : `${op} failed: the provider process ended (${why}) while it was in flight; it is being restarted`,
      );
      if (current !== gen || closed) return;
      current = null;
      resetReady();
      if (Date.now() - gen.startedAt >= STABLE_AFTER_MS) consecutiveCrashes = 0;
      log.warn({ provider: name, exit: why }, `provider ${name} process ended`);
      scheduleRestart();
    });
    proc.on('error', (err) => {
      log.error({ provider: name, err: err.message }, `provider ${name} process error`);
    });

    let answer: Answer;
    try {
      answer = await send(
        gen,
        nextId++,
        'init',
        { entry: pathToFileURL(entryPath).href, exportName: opts.exportName, config: opts.config },
        startTimeoutMs,
      );
    } catch (err) {
      proc.kill('SIGKILL');
      const why = err instanceof ProviderError ? err.message.replace(/^provider \S+: /, '') : 'it did not start';
      throw new ProviderError(name, 'start_refused', `it did not start: ${why}`);
    }
    if (!answer.ok) {
      proc.kill('SIGKILL');
      const problems = Array.isArray(answer.refused)
        ? answer.refused.slice(0, 50).map((p) => redact(printable(String(p), STDERR_LINE_CHARS)))
        : ['it refused to start'];
      throw new ProviderError(name, 'start_refused', `refused at start: ${problems.join('; ')}`, problems);
    }
    const value = answer.value as { kind?: unknown } | null;
    const k = value !== null && typeof value === 'object' ? value.kind : undefined;
    if (typeof k !== 'string' || !/^[a-z][a-z0-9-]{0,31}$/.test(k) || (kind !== '' && k !== kind)) {
      proc.kill('SIGKILL');
      throw new ProviderError(name, 'start_refused', 'its kind is not 1 to 32 characters of a-z 0-9 - (or changed on restart)');
    }
    if (closed) {
      proc.kill('SIGKILL');
      throw new ProviderError(name, 'closed', 'the host was closed while the provider started');
    }
    kind = k;
    current = gen;
    log.info({ provider: name, package: `${opts.packageName}@${opts.packageVersion}`, kind }, `provider ${name} started`);
    return gen;
  };

  let first: Generation;
  try {
    first = await launch();
  } catch (err) {
    closed = true;
    clearInterval(stderrRefill);
    throw err;
  }
  markReady(first);

  /** One call: waits for a running child (a restart may be under way), sends, checks the answer's shape. */
  const call = async <T>(
    op: string,
    callArgs: unknown[],
    check: (v: unknown) => { ok: true; value: T } | { ok: false; problem: string },
  ): Promise<T> => {
    if (closed) throw new ProviderError(name, 'closed', `${op} failed: the host was closed`);
    const started = Date.now();
    let waitTimer: NodeJS.Timeout | undefined;
    const gen = await Promise.race([
      ready,
      new Promise<never>((_res, rej) => {
        waitTimer = setTimeout(
          () => rej(new ProviderError(name, 'timeout', `${op} did not answer within ${callTimeoutMs} ms (the provider is restarting)`)),
          callTimeoutMs,
        );
      }),
    ]).finally(() => clearTimeout(waitTimer));
    if (closed) throw new ProviderError(name, 'closed', `${op} failed: the host was closed`);
    const answer = await send(gen, nextId++, op, { args: callArgs }, Math.max(1, callTimeoutMs - (Date.now() - started)), callTimeoutMs);
    if (!answer.ok) {
      const text = typeof answer.error === 'string' ? answer.error : 'an error';
      // The error's own code, as the child checked it (a short identifier): core reads it to
      // tell an outage of the provider's identity provider from a refused proof.
      const code = typeof answer.code === 'string' && /^[a-z][a-z0-9_]{0,63}$/.test(answer.code) ? answer.code : undefined;
      throw new ProviderError(
        name,
        'provider_error',
        `${op} failed: the provider answered ${JSON.stringify(redact(printable(text, 300)))}`,
        [],
        code,
      );
    }
    const checked = check(answer.value);
    if (!checked.ok) throw new ProviderError(name, 'malformed_answer', `${op} answered a malformed result: ${checked.problem}`);
    return checked.value;
  };

  const policy: ProviderPolicy = Object.freeze({
    name: opts.policy.name,
    realms: Object.freeze([...opts.policy.realms]),
    allowedIssuers: Object.freeze([...opts.policy.allowedIssuers]),
    jit: Object.freeze({
      enabled: opts.policy.jit.enabled,
      emailDomains: Object.freeze([...opts.policy.jit.emailDomains]),
      groups: Object.freeze([...(opts.policy.jit.groups ?? [])]),
      status: opts.policy.jit.status ?? 'active',
    }),
    groupsClaim: opts.policy.groupsClaim ?? null,
    groupPrefix: opts.policy.groupPrefix ?? null,
    linkByVerifiedEmail: opts.policy.linkByVerifiedEmail ?? false,
  });

  return Object.freeze({
    policy,
    packageName: opts.packageName,
    packageVersion: opts.packageVersion,
    signer: opts.signer,
    signerKey: opts.signerKey ?? null,
    get kind() {
      return kind;
    },
    begin: (ctx: ProviderContext): Promise<ProviderBeginResult> => call('begin', [ctx], checkBeginAnswer),
    credentialIdOf: (request: ProviderRequest): Promise<string | null> => call('credentialIdOf', [request], checkCredentialIdAnswer),
    finish: (
      ctx: ProviderContext,
      input: { readonly state: ProviderJson; readonly request: ProviderRequest; readonly credential: StoredCredential | null },
    ): Promise<ProviderFinishResult> => call('finish', [ctx, input], checkFinishAnswer),
    health: (): Promise<ProviderHealth> => call('health', [], checkHealthAnswer),
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      clearTimeout(restartTimer);
      clearInterval(stderrRefill);
      const gen = current;
      current = null;
      if (gen === null || gen.ended) return;
      failAll(gen, 'closed', (op) => `${op} failed: the host was closed`);
      const exited = new Promise<void>((res) => gen.proc.once('exit', () => res()));
      gen.proc.stdin.end();
      const kill = setTimeout(() => gen.proc.kill('SIGKILL'), 2_000);
      kill.unref();
      gen.proc.kill('SIGTERM');
      await exited;
      clearTimeout(kill);
    },
  });
}

import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The standard streams and environment of one run of `main`. `bin.ts` runs `main` without one
 * (the real process's: fd 1 and 2, `process.env`, fd 0); a program that runs `main` in its own
 * process (the CLI's fast tests) gives each run its own, so that runs neither print into the
 * host's terminal nor read its environment or standard input.
 */
export interface Io {
  /** Receives everything the run writes to standard output (1) or standard error (2). */
  write(fd: 1 | 2, text: string): void;
  /** The run's environment, in place of `process.env`. */
  readonly env: NodeJS.ProcessEnv;
  /** The whole of the run's standard input (a `-` secret reads its first line); empty when none. */
  readonly stdin: string;
}

const current = new AsyncLocalStorage<Io>();

/**
 * Runs `fn` with `io` as its standard streams and environment: every print of `output.ts`, every
 * secret read from standard input, and `main`'s own environment reads go to `io` for everything
 * `fn` starts, awaits included. Runs may overlap: each sees its own.
 *
 * @example
 * let out = '';
 * const code = await withIo({ write: (fd, text) => { if (fd === 1) out += text; }, env: {}, stdin: '' }, () => main(['--version']));
 */
export function withIo<T>(io: Io, fn: () => T): T {
  return current.run(io, fn);
}

/**
 * The {@link Io} of the run in progress, or `undefined` outside {@link withIo} (the real process's
 * streams then).
 *
 * @example
 * const env = currentIo()?.env ?? process.env;
 */
export function currentIo(): Io | undefined {
  return current.getStore();
}

/**
 * The environment of the run in progress: its {@link Io}'s, else `process.env`.
 *
 * @example
 * const level = runEnv().SVC_LOG_LEVEL;
 */
export function runEnv(): NodeJS.ProcessEnv {
  return current.getStore()?.env ?? process.env;
}

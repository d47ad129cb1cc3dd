// What the core asks of its host: time, randomness and logging. Leaf types with no imports, so
// any module (tokens, ids, the use cases) can name them without importing the use cases' deps.

/** The source of time. Tests inject a fake one; production uses `Date.now`. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /**
   * Milliseconds since an arbitrary origin, from a clock that never jumps (stepping the
   * system clock does not move it): for intervals measured inside one process, such as
   * rate-limit windows. Optional; without it such intervals use `performance.now()`.
   */
  monotonic?(): number;
}

/** The source of randomness: `n` bytes from a CSPRNG. */
export type RandomBytes = (n: number) => Uint8Array;

/** Structured logging. Never pass a token, a key or a bootstrap token. */
export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A logger that drops everything. */
export const silentLogger: Logger = { info() {}, warn() {}, error() {} };

import { AuthError } from './errors.js';

/**
 * Why the control store cannot serve a request right now, as health reports it. A fixed
 * vocabulary, never a driver message (those may name paths or hosts):
 * - `connection`: the database cannot be reached, or the connection was lost (restart, failover);
 * - `timeout`: it did not answer in time (frozen, overloaded);
 * - `locked`: another process holds the write lock longer than a write may wait;
 * - `disk_full`: the database or its disk is full;
 * - `io_error`: the operating system failed a read or write of the database.
 */
export type StoreFault = 'connection' | 'timeout' | 'locked' | 'disk_full' | 'io_error';

/** Seconds a client should wait before retrying, per fault: long enough for the fault to pass. */
const RETRY_AFTER_SECONDS: Readonly<Record<StoreFault, number>> = {
  connection: 5,
  timeout: 5,
  locked: 2,
  disk_full: 30,
  io_error: 30,
};

/** What a person reads in the `detail` of the 503: says what happened, never where. */
const DETAIL: Readonly<Record<StoreFault, string>> = {
  connection: 'the control store cannot be reached; try again later',
  timeout: 'the control store did not answer in time; try again later',
  locked: 'the control store is locked by another process; try again later',
  disk_full: 'the control store is full; try again later',
  io_error: 'the control store failed to read or write; try again later',
};

/**
 * A `503 store_unavailable` refusal caused by a store fault: an {@link AuthError} that also
 * names the {@link StoreFault}, for health and the log, and carries `Retry-After`. Stores throw
 * it for outages (connection lost, timeouts, locks held too long, disk full, I/O errors) so the
 * HTTP layer answers 503, never 500, and health can say why it is degraded.
 */
export class StoreUnavailableError extends AuthError {
  readonly fault: StoreFault;
  constructor(fault: StoreFault, options: { cause?: unknown } = {}) {
    super('store_unavailable', DETAIL[fault], {
      headers: { 'retry-after': String(RETRY_AFTER_SECONDS[fault]) },
      ...(options.cause === undefined ? {} : { cause: options.cause }),
    });
    this.name = 'StoreUnavailableError';
    this.fault = fault;
  }
}

/**
 * The store fault behind `err`, or null when it is not one (a bug, a refusal).
 *
 * @example
 * storeFaultOf(new StoreUnavailableError('locked')); // 'locked'
 */
export function storeFaultOf(err: unknown): StoreFault | null {
  return err instanceof StoreUnavailableError ? err.fault : null;
}

/**
 * Wraps the named async methods of a store class so that whatever they throw passes through
 * `classify` first: a driver error that means an outage becomes a {@link StoreUnavailableError},
 * anything else is rethrown as it is. One place per store, so no operation can forget it.
 *
 * @example
 * classifyStoreErrors(SqliteStore.prototype, STORE_OPERATIONS, sqliteFault);
 */
export function classifyStoreErrors(prototype: object, operations: readonly string[], classify: (err: unknown) => StoreFault | null): void {
  const target = prototype as Record<string, unknown>;
  // What a failure becomes: an AuthError as it is, an outage a StoreUnavailableError.
  const rethrow = (err: unknown): never => {
    if (err instanceof AuthError) throw err;
    const fault = classify(err);
    throw fault === null ? err : new StoreUnavailableError(fault, { cause: err });
  };
  for (const name of operations) {
    const original = target[name];
    if (typeof original !== 'function') continue;
    // Not an async function: every store call (a bearer check's among them) would pay a promise
    // and a generator resume more for it (docs/performance.md, 2026-11-29 at 16:00). A method
    // that throws before it returns its promise takes the same path, as a rejection, and so
    // does a classifier that throws.
    const wrapped = function (this: unknown, ...args: unknown[]): Promise<unknown> {
      let result: unknown;
      try {
        result = (original as (...a: unknown[]) => unknown).apply(this, args);
      } catch (err) {
        result = Promise.reject(err);
      }
      return Promise.resolve(result).then(undefined, rethrow);
    };
    Object.defineProperty(wrapped, 'name', { value: name });
    target[name] = wrapped;
  }
}

import { AuthError, type Clock } from '@svc/core';

/** Counts failed attempts per client and says when one must wait. */
export interface FailureLimiter {
  /** A `429 rate_limited` refusal (with `Retry-After`) when `key` is over the limit, else null. */
  check(key: string): AuthError | null;
  /** Counts one failed attempt for `key`. */
  recordFailure(key: string): void;
}

/** Options of {@link createFailureLimiter}. */
export interface FailureLimiterOptions {
  readonly clock: Clock;
  /** Failures allowed per window; the next attempt is refused. Default 30. */
  readonly maxFailures?: number;
  /** Length of the fixed window, in seconds. Default 60. */
  readonly windowSeconds?: number;
  /** Most clients tracked at once; the oldest windows are dropped beyond it. Default 10,000. */
  readonly maxKeys?: number;
}

interface Window {
  start: number;
  count: number;
}

/**
 * An in-memory, fixed-window counter of FAILED attempts per client (e.g. per IP). Successes
 * are never counted, so a busy, well-behaved client is never limited; a client guessing
 * credentials is refused with `429 rate_limited` until its window ends. Windows follow the
 * injected clock, so tests can move time.
 *
 * @example
 * const limiter = createFailureLimiter({ clock: deps.clock });
 * const refusal = limiter.check(req.ip);
 * if (refusal !== null) throw refusal;
 */
export function createFailureLimiter(opts: FailureLimiterOptions): FailureLimiter {
  const { clock } = opts;
  const maxFailures = opts.maxFailures ?? 30;
  const windowMs = (opts.windowSeconds ?? 60) * 1000;
  const maxKeys = opts.maxKeys ?? 10_000;
  const windows = new Map<string, Window>();

  const prune = (now: number) => {
    for (const [key, w] of windows) if (now - w.start >= windowMs) windows.delete(key);
    // Still full: drop the oldest insertions (Map keeps insertion order).
    for (const key of windows.keys()) {
      if (windows.size < maxKeys) break;
      windows.delete(key);
    }
  };

  return {
    check(key) {
      if (windows.size === 0) return null;
      const w = windows.get(key);
      if (w === undefined) return null;
      const now = clock.now();
      if (now - w.start >= windowMs) {
        windows.delete(key);
        return null;
      }
      if (w.count < maxFailures) return null;
      const retryAfter = Math.max(1, Math.ceil((w.start + windowMs - now) / 1000));
      return new AuthError('rate_limited', `too many failed attempts; retry in ${retryAfter} s`, {
        headers: { 'retry-after': String(retryAfter) },
      });
    },
    recordFailure(key) {
      const now = clock.now();
      const w = windows.get(key);
      if (w !== undefined && now - w.start < windowMs) {
        w.count++;
        return;
      }
      if (w !== undefined) windows.delete(key);
      else if (windows.size >= maxKeys) prune(now);
      windows.set(key, { start: now, count: 1 });
    },
  };
}

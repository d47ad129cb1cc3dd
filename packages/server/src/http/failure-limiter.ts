import { isIPv4, isIPv6 } from 'node:net';
import { AuthError, type Clock } from '@svc/core';

/** One reserved attempt: give it back with {@link Reservation.release} when it turns out not to count. */
export interface Reservation {
  /** Returns the attempt to every key's budget (idempotent). Call it on success or on input that proved nothing. */
  release(): void;
}

/**
 * Budgets of attempts per key (a client's address unit, a credential, a public key) in fixed
 * windows. An attempt is RESERVED before it runs, against every key it concerns at once, and
 * kept when it fails: N concurrent attempts can never exceed a budget, however they interleave.
 */
export interface FailureLimiter {
  /** A `429 rate_limited` refusal (with `Retry-After`) when any of `keys` has no attempt left, else null. Reserves nothing. */
  check(keys: readonly string[]): AuthError | null;
  /**
   * Reserves one attempt against every one of `keys`, atomically: all or none.
   *
   * @throws {AuthError} `rate_limited` (with `Retry-After`) when any key's budget is spent; nothing is reserved then.
   */
  reserve(keys: readonly string[]): Reservation;
}

/** Options of {@link createFailureLimiter}. */
export interface FailureLimiterOptions {
  /**
   * Windows are measured with `clock.monotonic()` when the clock has one, else with
   * `performance.now()`: never with the wall clock, so stepping the system clock neither
   * ends a lockout early nor stretches it.
   */
  readonly clock: Clock;
  /** Attempts allowed per key and window; the next one is refused. Default 30. */
  readonly maxFailures?: number;
  /** Length of the fixed window, in seconds. Default 60. */
  readonly windowSeconds?: number;
  /** Most keys tracked at once; beyond it, the windows that ended are dropped, then the oldest. Default 10,000. */
  readonly maxKeys?: number;
}

interface Window {
  start: number;
  count: number;
}

/**
 * An in-memory, fixed-window budget of attempts per key. Used for failed proofs (the route
 * reserves an attempt, then releases it on success: successes never count, so a busy,
 * well-behaved client is never limited) and for unanswered challenges (reserved on creation,
 * released when the challenge is answered).
 *
 * @example
 * const limiter = createFailureLimiter({ clock: deps.clock });
 * const attempt = limiter.reserve([clientAddressKey(req.ip)]);
 * try { await signIn(); attempt.release(); } catch (err) { if (!countsAsFailure(err)) attempt.release(); throw err; }
 */
export function createFailureLimiter(opts: FailureLimiterOptions): FailureLimiter {
  const { clock } = opts;
  const elapsed = (): number => (clock.monotonic !== undefined ? clock.monotonic() : performance.now());
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
  const live = (key: string, now: number): Window | undefined => {
    const w = windows.get(key);
    if (w === undefined) return undefined;
    if (now - w.start >= windowMs) {
      windows.delete(key);
      return undefined;
    }
    return w;
  };
  const refusal = (keys: readonly string[], now: number): AuthError | null => {
    let wait = 0;
    for (const key of keys) {
      const w = live(key, now);
      if (w !== undefined && w.count >= maxFailures) wait = Math.max(wait, w.start + windowMs - now);
    }
    if (wait === 0) return null;
    const retryAfter = Math.max(1, Math.ceil(wait / 1000));
    return new AuthError('rate_limited', `too many attempts; retry in ${retryAfter} s`, {
      headers: { 'retry-after': String(retryAfter) },
    });
  };

  return {
    check(keys) {
      if (windows.size === 0) return null;
      return refusal(keys, elapsed());
    },
    reserve(keys) {
      const now = elapsed();
      const refused = refusal(keys, now);
      if (refused !== null) throw refused;
      const held: Window[] = [];
      for (const key of new Set(keys)) {
        let w = live(key, now);
        if (w === undefined) {
          if (windows.size >= maxKeys) prune(now);
          w = { start: now, count: 0 };
          windows.set(key, w);
        }
        w.count++;
        held.push(w);
      }
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          // A window that ended meanwhile was replaced: its successor owes nothing back.
          for (const w of held) if (w.count > 0) w.count--;
        },
      };
    },
  };
}

/**
 * The unit a client address is budgeted by: every loopback address (all of `127.0.0.0/8`,
 * `::1`) is one host and so one unit; an IPv4 address is its own unit; an IPv6 address counts
 * by its `/64` (the smallest prefix a site is normally given: one host can pick any of its
 * 2^64 addresses); an IPv4-mapped IPv6 address counts as the IPv4 address.
 *
 * @example
 * clientAddressKey('127.0.0.9'); // "addr:loopback"
 * clientAddressKey('2001:db8:1:2:aaaa::1'); // "addr:2001:db8:1:2::/64"
 */
export function clientAddressKey(ip: string): string {
  let addr = ip.trim().toLowerCase();
  const zone = addr.indexOf('%');
  if (zone !== -1) addr = addr.slice(0, zone);
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(addr);
  if (mapped !== null) addr = mapped[1] as string;
  if (isIPv4(addr)) return addr.startsWith('127.') ? 'addr:loopback' : `addr:${addr}`;
  if (isIPv6(addr)) {
    const groups = expandIPv6(addr);
    if (groups.slice(0, 7).every((g) => g === 0) && groups[7] === 1) return 'addr:loopback';
    // IPv4-mapped in hex form (::ffff:7f00:1).
    if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
      const v4 = [(groups[6] as number) >> 8, (groups[6] as number) & 255, (groups[7] as number) >> 8, (groups[7] as number) & 255].join(
        '.',
      );
      return clientAddressKey(v4);
    }
    return `addr:${groups
      .slice(0, 4)
      .map((g) => g.toString(16))
      .join(':')}::/64`;
  }
  return `addr:${addr}`;
}

/** The eight 16-bit groups of a valid IPv6 address (dotted IPv4 tail included). */
function expandIPv6(addr: string): number[] {
  let text = addr;
  const tail = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (tail !== null) {
    const [a, b, c, d] = tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', rest] = text.split('::') as [string, string | undefined];
  const left = head === '' ? [] : head.split(':');
  const right = rest === undefined || rest === '' ? [] : rest.split(':');
  const fill = rest === undefined ? [] : new Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...fill, ...right].map((g) => Number.parseInt(g, 16));
}

/**
 * Runs one credential attempt under `limiter`: reserves it against `keys` first (so concurrent
 * attempts cannot overshoot the budget), keeps it when the attempt fails as a proof (a 401),
 * gives it back otherwise (success, invalid input, a store outage).
 *
 * @throws {AuthError} `rate_limited` before running `attempt` when a budget is spent; whatever `attempt` throws.
 * @example
 * const pair = await limitedAttempt(limiter, [clientAddressKey(req.ip)], () => createSession(deps, input));
 */
export async function limitedAttempt<T>(limiter: FailureLimiter, keys: readonly string[], attempt: () => Promise<T>): Promise<T> {
  const reservation = limiter.reserve(keys);
  try {
    const result = await attempt();
    reservation.release();
    return result;
  } catch (err) {
    if (!(err instanceof AuthError && err.status === 401)) reservation.release();
    throw err;
  }
}

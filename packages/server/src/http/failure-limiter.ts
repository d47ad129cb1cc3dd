import { isIPv4, isIPv6 } from 'node:net';
import { AuthError, type Clock, type Store } from '@svc/core';

/** A slot held in a budget: give it back with {@link Slot.release}. */
export interface Slot {
  /** Gives the slot back (idempotent). */
  release(): void;
}

/** One attempt reserved before it runs: settle it once, as failed or not. */
export interface Reservation extends Slot {
  /** The attempt did not count (a success, input that proved nothing, an outage): its slot comes back. */
  release(): void;
  /** The attempt failed as a proof: it counts against the budget until the window ends. */
  fail(): void;
}

/**
 * Budgets of failed attempts per key (a client's address unit, a credential), in fixed
 * windows. An attempt is RESERVED before it runs, against every key it concerns at once: while
 * failed and running attempts together fill a budget, the next one waits for a running one to
 * settle, and once failures alone fill it, attempts are refused until the window ends. So N
 * concurrent attempts are never evaluated beyond the budget (on a store that several nodes
 * share: whichever nodes they reach), yet a burst of good attempts is only queued, never refused.
 */
export interface FailureLimiter {
  /** A `429 rate_limited` refusal when failures fill the budget of any of `keys` in THIS process, else null. Reserves nothing, no I/O. */
  check(keys: readonly string[]): AuthError | null;
  /**
   * Reserves one attempt against every one of `keys`: in this process, then in the store's
   * shared budget (when the store is shared by several nodes). May wait for running attempts.
   *
   * @throws {AuthError} `rate_limited` (with `Retry-After`) when any key's budget is spent, or
   *   when no running attempt settled within the longest wait; nothing is reserved then.
   */
  reserve(keys: readonly string[]): Promise<Reservation>;
}

/** Options of {@link createFailureLimiter}. */
export interface FailureLimiterOptions {
  /**
   * Windows are measured with `clock.monotonic()` when the clock has one, else with
   * `performance.now()`: never with the wall clock, so stepping the system clock neither
   * ends a lockout early nor stretches it. The wall clock (`clock.now()`) dates only the
   * windows shared through the store.
   */
  readonly clock: Clock;
  /** Failed attempts allowed per key and window; failed and running ones together never exceed it. Default 30. */
  readonly maxFailures?: number;
  /** Length of the fixed window, in seconds. Default 60. */
  readonly windowSeconds?: number;
  /** Most keys tracked at once; beyond it, the windows that ended are dropped, then the oldest. Default 10,000. */
  readonly maxKeys?: number;
  /** Longest an attempt waits for a running one to settle before it is refused, in ms of real time. Default 5,000. */
  readonly maxWaitMs?: number;
  /** Most attempts waiting at once; beyond it they are refused at once. Default 1,000. */
  readonly maxWaiting?: number;
  /**
   * The control store: its `reserveAttempts` shares the budget with every node on the same
   * store (PostgreSQL); the embedded store answers `shared: false` and costs nothing.
   */
  readonly store?: Pick<Store, 'reserveAttempts' | 'settleAttempts'>;
  /** Names the budget in the shared store (e.g. `signin`, `pairing`), so budgets with other limits never share a window. Default `attempts`. */
  readonly scope?: string;
}

function rateLimited(waitMs: number): AuthError {
  const retryAfter = Math.max(1, Math.ceil(waitMs / 1000));
  return new AuthError('rate_limited', `too many attempts; retry in ${retryAfter} s`, {
    headers: { 'retry-after': String(retryAfter) },
  });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Creates a {@link FailureLimiter}: an exact in-memory budget on the monotonic clock (no I/O),
 * then, with a shared store, the store's budget, so that on PostgreSQL every node counts
 * against the same windows. Successes never count: a busy, well-behaved client is never refused.
 *
 * @example
 * const limiter = createFailureLimiter({ clock: deps.clock, store: deps.store, scope: 'signin' });
 * const pair = await limitedAttempt(limiter, [clientAddressKey(req.ip)], () => createSession(deps, input));
 */
export function createFailureLimiter(opts: FailureLimiterOptions): FailureLimiter {
  const { clock, store } = opts;
  const elapsed = (): number => (clock.monotonic !== undefined ? clock.monotonic() : performance.now());
  const max = opts.maxFailures ?? 30;
  const windowMs = (opts.windowSeconds ?? 60) * 1000;
  const maxKeys = opts.maxKeys ?? 10_000;
  const maxWaitMs = opts.maxWaitMs ?? 5000;
  const maxWaiting = opts.maxWaiting ?? 1000;
  const scope = opts.scope ?? 'attempts';
  // Failures per key in fixed windows; running attempts per key (exact: nothing here can die
  // without the process); the attempts waiting for one to settle.
  const windows = new Map<string, { start: number; failures: number }>();
  const running = new Map<string, number>();
  const waiting = new Set<() => void>();

  const failuresOf = (key: string, now: number): { start: number; failures: number } | undefined => {
    const w = windows.get(key);
    if (w !== undefined && now - w.start >= windowMs) {
      windows.delete(key);
      return undefined;
    }
    return w;
  };
  const refusal = (keys: readonly string[], now: number): AuthError | null => {
    let wait = 0;
    for (const key of keys) {
      const w = failuresOf(key, now);
      if (w !== undefined && w.failures >= max) wait = Math.max(wait, w.start + windowMs - now);
    }
    return wait === 0 ? null : rateLimited(wait);
  };
  const settled = () => {
    for (const wake of waiting) wake();
    waiting.clear();
  };
  const countFailure = (key: string) => {
    const now = elapsed();
    const w = failuresOf(key, now);
    if (w !== undefined) {
      w.failures++;
      return;
    }
    if (windows.size >= maxKeys) {
      for (const [k, old] of windows) if (now - old.start >= windowMs) windows.delete(k);
      // Still full: drop the oldest insertions (Map keeps insertion order).
      for (const k of windows.keys()) {
        if (windows.size < maxKeys) break;
        windows.delete(k);
      }
    }
    windows.set(key, { start: now, failures: 1 });
  };

  const reserveHere = async (keys: readonly string[]): Promise<Reservation> => {
    const started = performance.now();
    for (;;) {
      const now = elapsed();
      const refused = refusal(keys, now);
      if (refused !== null) throw refused;
      const busy = keys.some((k) => (failuresOf(k, now)?.failures ?? 0) + (running.get(k) ?? 0) >= max);
      if (!busy) break;
      const left = maxWaitMs - (performance.now() - started);
      if (left <= 0 || waiting.size >= maxWaiting) throw rateLimited(1000);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          waiting.delete(wake);
          resolve();
        }, left);
        const wake = () => {
          clearTimeout(timer);
          resolve();
        };
        waiting.add(wake);
      });
    }
    for (const k of keys) running.set(k, (running.get(k) ?? 0) + 1);
    let done = false;
    const settle = (failed: boolean) => {
      if (done) return;
      done = true;
      for (const k of keys) {
        const n = (running.get(k) ?? 1) - 1;
        if (n <= 0) running.delete(k);
        else running.set(k, n);
        if (failed) countFailure(k);
      }
      settled();
    };
    return { release: () => settle(false), fail: () => settle(true) };
  };

  return {
    check: (keys) => refusal(keys, elapsed()),
    async reserve(input) {
      const keys = [...new Set(input)];
      const mine = await reserveHere(keys);
      if (store === undefined) return mine;
      const scoped = keys.map((k) => `${scope}|${k}`);
      const started = performance.now();
      let shared: Awaited<ReturnType<Store['reserveAttempts']>>;
      try {
        for (;;) {
          shared = await store.reserveAttempts({ keys: scoped, now: clock.now(), windowMs, max });
          if (shared.reserved || !shared.busy) break;
          // Full of attempts running on other nodes: ask again shortly, for at most maxWaitMs.
          if (performance.now() - started >= maxWaitMs) break;
          await sleep(20);
        }
      } catch (error) {
        mine.release();
        throw error;
      }
      if (!shared.reserved) {
        mine.release();
        throw rateLimited(shared.retryAfterMs);
      }
      const windows = shared.windows;
      let done = false;
      const settle = (failed: boolean) => {
        if (done) return;
        done = true;
        if (failed) mine.fail();
        else mine.release();
        // Not awaited: the answer does not wait for the budget's bookkeeping. A settle that
        // fails (store outage) leaves the attempt running until its window ends: the safe side.
        if (windows.length > 0) store.settleAttempts({ windows, failed }).catch(() => undefined);
      };
      return { release: () => settle(false), fail: () => settle(true) };
    },
  };
}

/** A plain windowed counter of held slots (see {@link createWindowCounter}). */
export interface WindowCounter {
  /** A `429 rate_limited` refusal when any of `keys` holds `max` slots in its window, else null. */
  check(keys: readonly string[]): AuthError | null;
  /**
   * Takes one slot of every one of `keys`, atomically: all or none.
   *
   * @throws {AuthError} `rate_limited` (with `Retry-After`) when any key is full; nothing is taken then.
   */
  take(keys: readonly string[]): Slot;
}

/**
 * An in-memory, fixed-window count of held slots per key on the monotonic clock, refusing
 * (never waiting) when a key is full: the budget of unanswered challenges.
 *
 * @example
 * const counter = createWindowCounter({ clock: deps.clock, maxFailures: 100 });
 * const slot = counter.take([clientAddressKey(req.ip)]);
 */
export function createWindowCounter(opts: FailureLimiterOptions): WindowCounter {
  const { clock } = opts;
  const elapsed = (): number => (clock.monotonic !== undefined ? clock.monotonic() : performance.now());
  const maxFailures = opts.maxFailures ?? 30;
  const windowMs = (opts.windowSeconds ?? 60) * 1000;
  const maxKeys = opts.maxKeys ?? 10_000;
  const windows = new Map<string, { start: number; count: number }>();

  const prune = (now: number) => {
    for (const [key, w] of windows) if (now - w.start >= windowMs) windows.delete(key);
    for (const key of windows.keys()) {
      if (windows.size < maxKeys) break;
      windows.delete(key);
    }
  };
  const live = (key: string, now: number) => {
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
    return wait === 0 ? null : rateLimited(wait);
  };

  return {
    check: (keys) => refusal(keys, elapsed()),
    take(keys) {
      const now = elapsed();
      const refused = refusal(keys, now);
      if (refused !== null) throw refused;
      const held: { count: number }[] = [];
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
 * attempts cannot overshoot the budget), counts it when the attempt fails as a proof (a 401),
 * gives it back otherwise (success, invalid input, a store outage).
 *
 * @throws {AuthError} `rate_limited` before running `attempt` when a budget is spent; whatever `attempt` throws.
 * @example
 * const pair = await limitedAttempt(limiter, [clientAddressKey(req.ip)], () => createSession(deps, input));
 */
export async function limitedAttempt<T>(limiter: FailureLimiter, keys: readonly string[], attempt: () => Promise<T>): Promise<T> {
  const reservation = await limiter.reserve(keys);
  try {
    const result = await attempt();
    reservation.release();
    return result;
  } catch (err) {
    if (err instanceof AuthError && err.status === 401) reservation.fail();
    else reservation.release();
    throw err;
  }
}

import { isIPv4, isIPv6 } from 'node:net';
import { AuthError, type Clock } from '@svc/core';
import type { Store } from '@svc/core/store';

/** A slot held in a budget: give it back with {@link Slot.release}. */
export interface Slot {
  /** Gives the slot back (idempotent). */
  release(): void;
}

/**
 * One attempt, reserved before it runs: settle it once, as failed or not. An attempt that finds
 * its budget spent (or full of running attempts) is not refused: it runs UNCOUNTED, so a valid
 * proof still goes through whoever spent the budget, while its failure is answered with
 * {@link Reservation.refusal} (`429`) instead of its `401`, counts nothing and is not audited.
 */
export interface Reservation extends Slot {
  /** True while the budget had room: a failure is answered as itself (a 401) and counted. */
  readonly counted: boolean;
  /** The `429 rate_limited` (with `Retry-After`) that answers the failure of an uncounted attempt. */
  refusal(): AuthError;
  /** The attempt did not count (a success, input that proved nothing, an outage): its slot comes back. */
  release(): void;
  /** The attempt failed as a proof: it counts against the budget until the window ends (nothing, when uncounted). */
  fail(): void;
}

/**
 * Budgets of failed attempts per key (a client's address unit, a credential), in fixed
 * windows. An attempt is RESERVED before it runs, against every key it concerns at once: while
 * failed and running attempts together fill a budget, or failures alone do, the next attempt
 * runs uncounted (see {@link Reservation}). So N concurrent attempts never have more than the
 * budget's failures answered as 401s and counted (on a store that several nodes share: whichever
 * nodes they reach), a flood beyond it is answered `429`, and nobody's valid proof is refused
 * for failures someone else made. Nothing here ever waits: a reservation is one decision.
 */
export interface FailureLimiter {
  /** A `429 rate_limited` refusal when failures fill the budget of any of `keys` in THIS process, else null. Reserves nothing, no I/O. */
  check(keys: readonly string[]): AuthError | null;
  /**
   * Reserves one attempt against every one of `keys`: in this process, then in the store's
   * shared budget (when the store is shared by several nodes). Never waits, never refuses: an
   * attempt with no room is answered uncounted (`counted: false`).
   *
   * @throws {AuthError} `store_unavailable` when the shared budget cannot be read.
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
  /**
   * The control store: its `reserveAttempts` shares the budget with every node on the same
   * store (PostgreSQL); the embedded store answers `shared: false` and costs nothing.
   */
  readonly store?: Pick<Store, 'reserveAttempts' | 'settleAttempts'>;
  /** Names the budget in the shared store (e.g. `signin`, `pairing`), so budgets with other limits never share a window. Default `attempts`. */
  readonly scope?: string;
  /**
   * How long a reservation in the shared store holds its slot at most, in ms: a node killed
   * mid-attempt never settles it, and a reservation after the lease reclaims it. An attempt
   * runs for milliseconds; one still running after the lease (a store outage: each store call
   * gives up after 6 s) is no longer seen as running, which lets at most a budget's worth more
   * attempts be counted. Default 10,000.
   */
  readonly leaseMs?: number;
}

function rateLimited(waitMs: number): AuthError {
  const retryAfter = Math.max(1, Math.ceil(waitMs / 1000));
  return new AuthError('rate_limited', `too many attempts; retry in ${retryAfter} s`, {
    headers: { 'retry-after': String(retryAfter) },
  });
}

/**
 * Elapsed time in ms: `clock.monotonic()` when the clock has one, else `performance.now()`;
 * never the wall clock, so stepping the system clock neither ends a window early nor stretches it.
 */
function elapsedOf(clock: Clock): () => number {
  return () => (clock.monotonic !== undefined ? clock.monotonic() : performance.now());
}

/** One key's fixed window: when it started and what it holds (failures, or held slots). */
interface Window {
  readonly start: number;
  count: number;
}

/**
 * Fixed windows of a count per key, the one bookkeeping of both budgets below: a window ends
 * `windowMs` after it opened, and at most `maxKeys` keys are tracked (beyond it the ended
 * windows are dropped, then the oldest).
 */
function fixedWindows(windowMs: number, maxKeys: number, max: number) {
  const windows = new Map<string, Window>();
  const live = (key: string, now: number): Window | undefined => {
    const w = windows.get(key);
    if (w !== undefined && now - w.start >= windowMs) {
      windows.delete(key);
      return undefined;
    }
    return w;
  };
  return {
    live,
    /** The live window of `key`, opened empty at `now` when there is none. */
    open(key: string, now: number): Window {
      const w = live(key, now);
      if (w !== undefined) return w;
      if (windows.size >= maxKeys) {
        for (const [k, old] of windows) if (now - old.start >= windowMs) windows.delete(k);
        // Still full: drop the oldest insertions (Map keeps insertion order).
        for (const k of windows.keys()) {
          if (windows.size < maxKeys) break;
          windows.delete(k);
        }
      }
      const opened = { start: now, count: 0 };
      windows.set(key, opened);
      return opened;
    },
    /** A `429 rate_limited` refusal (Retry-After: until the last full window ends) when any of `keys` holds `max`, else null. */
    refusal(keys: readonly string[], now: number): AuthError | null {
      let wait = 0;
      for (const key of keys) {
        const w = live(key, now);
        if (w !== undefined && w.count >= max) wait = Math.max(wait, w.start + windowMs - now);
      }
      return wait === 0 ? null : rateLimited(wait);
    },
  };
}

/** An attempt that runs uncounted: nothing to give back, and its failure is answered `429` after `retryAfterMs`. */
function uncounted(retryAfterMs: number): Reservation {
  return { counted: false, refusal: () => rateLimited(retryAfterMs), release: () => undefined, fail: () => undefined };
}

/**
 * Creates a {@link FailureLimiter}: an exact in-memory budget on the monotonic clock (no I/O),
 * then, with a shared store, the store's budget, so that on PostgreSQL every node counts
 * against the same windows. Successes never count, and an uncounted attempt still runs: a busy,
 * well-behaved client is never refused, and neither is anyone's valid proof.
 *
 * @example
 * const limiter = createFailureLimiter({ clock: deps.clock, store: deps.store, scope: 'signin' });
 * await app.register(failureCounting, { limiter });
 */
export function createFailureLimiter(opts: FailureLimiterOptions): FailureLimiter {
  const { clock, store } = opts;
  const elapsed = elapsedOf(clock);
  const max = opts.maxFailures ?? 30;
  const windowMs = (opts.windowSeconds ?? 60) * 1000;
  const scope = opts.scope ?? 'attempts';
  const leaseMs = opts.leaseMs ?? 10_000;
  // Failures per key in fixed windows; running attempts per key (exact: nothing here can die
  // without the process).
  const failures = fixedWindows(windowMs, opts.maxKeys ?? 10_000, max);
  const running = new Map<string, number>();

  const reserveHere = (keys: readonly string[]): Reservation => {
    const now = elapsed();
    const refused = failures.refusal(keys, now);
    if (refused !== null) return { ...uncounted(0), refusal: () => refused };
    // Failed and running attempts fill it: this one cannot be counted, the window is not spent.
    if (keys.some((k) => (failures.live(k, now)?.count ?? 0) + (running.get(k) ?? 0) >= max)) return uncounted(1000);
    for (const k of keys) running.set(k, (running.get(k) ?? 0) + 1);
    let done = false;
    const settle = (failed: boolean) => {
      if (done) return;
      done = true;
      for (const k of keys) {
        const n = (running.get(k) ?? 1) - 1;
        if (n <= 0) running.delete(k);
        else running.set(k, n);
        if (failed) failures.open(k, elapsed()).count++;
      }
    };
    return { counted: true, refusal: () => rateLimited(1000), release: () => settle(false), fail: () => settle(true) };
  };

  return {
    check: (keys) => failures.refusal(keys, elapsed()),
    async reserve(input) {
      const keys = [...new Set(input)];
      const mine = reserveHere(keys);
      if (store === undefined || !mine.counted) return mine;
      const scoped = keys.map((k) => `${scope}|${k}`);
      let shared: Awaited<ReturnType<Store['reserveAttempts']>>;
      try {
        // One decision, never a wait: a window full of attempts running on other nodes makes
        // this one uncounted, as a full one here does.
        shared = await store.reserveAttempts({ keys: scoped, now: clock.now(), windowMs, max, leaseMs });
      } catch (error) {
        mine.release();
        throw error;
      }
      if (!shared.reserved) {
        mine.release();
        return uncounted(shared.retryAfterMs);
      }
      const windows = shared.windows;
      let done = false;
      const settle = (failed: boolean) => {
        if (done) return;
        done = true;
        if (failed) mine.fail();
        else mine.release();
        // Not awaited: the answer does not wait for the budget's bookkeeping. A settle that
        // fails (store outage) leaves the attempt running until its lease ends.
        if (windows.length > 0) store.settleAttempts({ windows, failed }).catch(() => undefined);
      };
      return { counted: true, refusal: () => rateLimited(1000), release: () => settle(false), fail: () => settle(true) };
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
  const elapsed = elapsedOf(opts.clock);
  const windows = fixedWindows((opts.windowSeconds ?? 60) * 1000, opts.maxKeys ?? 10_000, opts.maxFailures ?? 30);
  return {
    check: (keys) => windows.refusal(keys, elapsed()),
    take(keys) {
      const now = elapsed();
      const refused = windows.refusal(keys, now);
      if (refused !== null) throw refused;
      const held: Window[] = [];
      for (const key of new Set(keys)) {
        const w = windows.open(key, now);
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

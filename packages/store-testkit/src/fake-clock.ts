import type { Clock } from '@svc/core';

/** A clock that moves only when told to: every expiry in the suite is driven by it. */
export interface FakeClock extends Clock {
  /** Moves time forward by `ms` (never backward). */
  advance(ms: number): void;
  /** Sets the wall time to `ms` (a step of the system clock: the monotonic clock does not move). */
  set(ms: number): void;
  /** Milliseconds of elapsed time: moved by {@link FakeClock.advance} only, never by {@link FakeClock.set}. */
  monotonic(): number;
}

/** 2026-11-22T10:00:00.000Z: a fixed, realistic start so IDs and RFC 3339 times look real. */
export const FAKE_CLOCK_START = Date.UTC(2026, 10, 22, 10, 0, 0, 0);

/**
 * Creates a fake clock starting at `startMs` (default {@link FAKE_CLOCK_START}).
 *
 * @example
 * const clock = createFakeClock();
 * clock.advance(15 * 60_000 - 1); // one millisecond before a bootstrap token expires
 */
export function createFakeClock(startMs: number = FAKE_CLOCK_START): FakeClock {
  const check = (ms: number): number => {
    if (!Number.isSafeInteger(ms) || ms < 0) throw new RangeError(`a fake clock takes whole milliseconds >= 0, not ${ms}`);
    return ms;
  };
  let now = check(startMs);
  let elapsed = 0;
  return {
    now: () => now,
    monotonic: () => elapsed,
    advance(ms: number) {
      now = check(now + check(ms));
      elapsed += ms;
    },
    set(ms: number) {
      now = check(ms);
    },
  };
}

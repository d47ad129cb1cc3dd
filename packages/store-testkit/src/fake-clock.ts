import type { Clock } from '@svc/core';

/** A clock that moves only when told to: every expiry in the suite is driven by it. */
export interface FakeClock extends Clock {
  /** Moves time forward by `ms` (never backward). */
  advance(ms: number): void;
  /** Sets the time to `ms`. */
  set(ms: number): void;
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
  return {
    now: () => now,
    advance(ms: number) {
      now = check(now + check(ms));
    },
    set(ms: number) {
      now = check(ms);
    },
  };
}

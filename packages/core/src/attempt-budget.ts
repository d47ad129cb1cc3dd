/**
 * The rule of a shared attempt budget, pure: one fixed window per key, holding the attempts
 * that failed in it and the attempts still running (reserved before they run, so N concurrent
 * attempts can never be evaluated beyond the budget). Stores that several nodes share keep
 * these windows in a table; this decides, the store applies.
 */

/** One key's window as a store keeps it. */
export interface AttemptWindow {
  readonly key: string;
  /** When the window started, in milliseconds since the epoch (the clock of the node that opened it). */
  readonly start: number;
  /** Attempts that failed in this window. */
  readonly failures: number;
  /** Attempts reserved in this window and not settled yet. */
  readonly pending: number;
}

/** What reserving one more attempt in a window leads to. */
export type AttemptWindowDecision =
  /** Reserved: `window` is the key's window with this attempt pending. */
  | { readonly kind: 'reserve'; readonly window: AttemptWindow }
  /** The failures fill the budget: refused until the window ends, `retryAfterMs` from now. */
  | { readonly kind: 'refuse'; readonly retryAfterMs: number }
  /** Failures and running attempts fill it: wait for a running one to settle, then ask again. */
  | { readonly kind: 'busy' };

/**
 * One more attempt for `key` at `now`, given its stored window (or none): a window that ended
 * starts afresh at `now`; in a running one the attempt is refused once `max` attempts failed,
 * must wait while failed and running attempts together reach `max`, and is reserved otherwise.
 * A stored start in the future (a clock stepped back, or a node whose clock is ahead) cannot be
 * measured from: the counts are kept (fail closed) and the window restarts at `now`, so a wait
 * is never longer than one window.
 *
 * @example
 * decideAttemptWindow('addr:loopback', row, { now, windowMs: 60_000, max: 30 });
 */
export function decideAttemptWindow(
  key: string,
  current: AttemptWindow | undefined,
  input: { readonly now: number; readonly windowMs: number; readonly max: number },
): AttemptWindowDecision {
  const { now, windowMs, max } = input;
  if (current === undefined || now - current.start >= windowMs) {
    return { kind: 'reserve', window: { key, start: now, failures: 0, pending: 1 } };
  }
  const start = current.start > now ? now : current.start;
  if (current.failures >= max) return { kind: 'refuse', retryAfterMs: start + windowMs - now };
  if (current.failures + current.pending >= max) return { kind: 'busy' };
  return { kind: 'reserve', window: { key, start, failures: current.failures, pending: current.pending + 1 } };
}

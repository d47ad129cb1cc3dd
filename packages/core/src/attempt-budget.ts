/**
 * The rule of a shared attempt budget, pure: one fixed window per key, holding the attempts
 * that failed in it and the attempts still running (reserved before they run, so N concurrent
 * attempts can never be counted beyond the budget). Stores that several nodes share keep
 * these windows in a table; this decides, the store applies.
 *
 * Running attempts are held on a lease: a node killed mid-attempt never settles its
 * reservations, so the running count is trusted only for `leaseMs` after the first reservation
 * of its lease period (`pendingSince`); the next reservation after that drops it and starts a
 * new period. The price, bounded: attempts still running when a period ends are no longer seen
 * (at most the budget's worth, per lease period).
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
  /** When the lease period of the `pending` attempts began (ms since the epoch); they are dropped `leaseMs` after it. */
  readonly pendingSince: number;
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
 * Running attempts count only within their lease (`leaseMs` after `pendingSince`): after it they
 * are dropped (their node may have died) and this attempt opens a new lease period at `now`.
 * A stored start (or lease) in the future (a clock stepped back, or a node whose clock is
 * ahead) cannot be measured from: the counts are kept (fail closed) and it restarts at `now`,
 * so a wait is never longer than one window (or one lease).
 *
 * @example
 * decideAttemptWindow('addr:loopback', row, { now, windowMs: 60_000, max: 30, leaseMs: 30_000 });
 */
export function decideAttemptWindow(
  key: string,
  current: AttemptWindow | undefined,
  input: { readonly now: number; readonly windowMs: number; readonly max: number; readonly leaseMs: number },
): AttemptWindowDecision {
  const { now, windowMs, max, leaseMs } = input;
  if (current === undefined || now - current.start >= windowMs) {
    return { kind: 'reserve', window: { key, start: now, failures: 0, pending: 1, pendingSince: now } };
  }
  const start = current.start > now ? now : current.start;
  if (current.failures >= max) return { kind: 'refuse', retryAfterMs: start + windowMs - now };
  const leased = current.pending > 0 && now - current.pendingSince < leaseMs;
  const running = leased ? current.pending : 0;
  if (current.failures + running >= max) return { kind: 'busy' };
  const pendingSince = leased && current.pendingSince <= now ? current.pendingSince : now;
  return { kind: 'reserve', window: { key, start, failures: current.failures, pending: running + 1, pendingSince } };
}

import type { Clock } from '@svc/core';
import { createWindowCounter, type Slot } from './failure-limiter.js';

/**
 * Bounds the challenges a client can leave unanswered. Creating a challenge writes a row, and
 * the endpoint is unauthenticated (any well-formed key gets one, so keys cost nothing to
 * vary): without a bound one client filled a database with 200,000 rows a minute. A creation
 * reserves one slot against the client's address unit; the slot comes back when the challenge
 * is answered (right or wrong: answering uses it up, and wrong answers are budgeted by the
 * failure limiter). So a client that signs in as fast as it likes is never refused, while one
 * that only asks is stopped after `perAddress` unanswered challenges per window.
 *
 * Never per public key: anyone may ask for a challenge naming any key, so a bound per key let
 * anyone, from anywhere, keep a device from signing in by asking for its challenges.
 */
export interface ChallengeBudget {
  /**
   * Reserves a slot for a new challenge (`kind` `flow`: a provider ceremony begun, bounded
   * tighter, as it costs a provider call).
   *
   * @throws {AuthError} `rate_limited` with `Retry-After` when the address unit has too many unanswered challenges (or flows).
   */
  reserve(addressKey: string, kind?: 'challenge' | 'flow'): Slot;
  /** Keeps `reservation` until the challenge with id `challengeId` is answered. */
  hold(challengeId: string, reservation: Slot): void;
  /** The challenge was answered (or refused as unknown): its slots come back. */
  answered(challengeId: string): void;
}

/** Options of {@link createChallengeBudget}. */
export interface ChallengeBudgetOptions {
  readonly clock: Clock;
  /** Unanswered challenges per client address unit and window. Default 100. */
  readonly perAddress?: number;
  /** Of those, unanswered provider flows per client address unit and window. Default 20. */
  readonly flowsPerAddress?: number;
  /** Length of the fixed window, in seconds. Default 60. */
  readonly windowSeconds?: number;
  /** Most challenges held at once; beyond it the oldest are forgotten (their slots stay spent). Default 10,000. */
  readonly maxHeld?: number;
}

/**
 * Creates a {@link ChallengeBudget}: in memory, windows on the monotonic clock.
 *
 * @example
 * const challenges = createChallengeBudget({ clock: deps.clock });
 * const slot = challenges.reserve(clientAddressKey(req.ip));
 */
export function createChallengeBudget(opts: ChallengeBudgetOptions): ChallengeBudget {
  const windowSeconds = opts.windowSeconds ?? 60;
  const byAddress = createWindowCounter({ clock: opts.clock, maxFailures: opts.perAddress ?? 100, windowSeconds });
  const flows = createWindowCounter({ clock: opts.clock, maxFailures: opts.flowsPerAddress ?? 20, windowSeconds });
  const maxHeld = opts.maxHeld ?? 10_000;
  const held = new Map<string, Slot>();
  return {
    reserve(addressKey, kind = 'challenge') {
      if (kind === 'challenge') return byAddress.take([addressKey]);
      // Both or neither: a refusal by one leaves the other's slot unspent.
      const refusal = byAddress.check([addressKey]) ?? flows.check([addressKey]);
      if (refusal !== null) throw refusal;
      const a = byAddress.take([addressKey]);
      const f = flows.take([addressKey]);
      return {
        release() {
          a.release();
          f.release();
        },
      };
    },
    hold(challengeId, reservation) {
      if (held.size >= maxHeld) held.delete(held.keys().next().value as string);
      held.set(challengeId, reservation);
    },
    answered(challengeId) {
      const r = held.get(challengeId);
      if (r === undefined) return;
      held.delete(challengeId);
      r.release();
    },
  };
}

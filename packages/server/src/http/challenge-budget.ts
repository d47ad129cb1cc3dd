import type { Clock } from '@svc/core';
import { createWindowCounter, type Slot } from './failure-limiter.js';

/**
 * Bounds the challenges a client can leave unanswered. Creating a challenge writes a row, and
 * the endpoint is unauthenticated (any well-formed key gets one, so keys cost nothing to
 * vary): without a bound one client filled a database with 200,000 rows a minute. A creation
 * reserves one slot against the client's address unit and one against the public key; the
 * slots come back when the challenge is answered (right or wrong: answering uses it up, and
 * wrong answers are budgeted by the failure limiter). So a client that signs in as fast as it
 * likes is never refused, while one that only asks is stopped after `perAddress` unanswered
 * challenges per window (or `perKey` for one key).
 */
export interface ChallengeBudget {
  /**
   * Reserves a slot for a new challenge.
   *
   * @throws {AuthError} `rate_limited` with `Retry-After` when the address or the key has too many unanswered challenges.
   */
  reserve(addressKey: string, publicKeyHex: string): Slot;
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
  /** Unanswered challenges per public key and window. Default 20. */
  readonly perKey?: number;
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
 * const slot = challenges.reserve(clientAddressKey(req.ip), publicKey);
 */
export function createChallengeBudget(opts: ChallengeBudgetOptions): ChallengeBudget {
  const windowSeconds = opts.windowSeconds ?? 60;
  const byAddress = createWindowCounter({ clock: opts.clock, maxFailures: opts.perAddress ?? 100, windowSeconds });
  const byKey = createWindowCounter({ clock: opts.clock, maxFailures: opts.perKey ?? 20, windowSeconds });
  const maxHeld = opts.maxHeld ?? 10_000;
  const held = new Map<string, Slot>();
  return {
    reserve(addressKey, publicKeyHex) {
      const key = `chl-key:${publicKeyHex.toLowerCase()}`;
      // Both or neither: a refusal by the key leaves the address's slot unspent.
      const refusal = byAddress.check([addressKey]) ?? byKey.check([key]);
      if (refusal !== null) throw refusal;
      const a = byAddress.take([addressKey]);
      const k = byKey.take([key]);
      return {
        release() {
          a.release();
          k.release();
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

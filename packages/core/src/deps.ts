import type { SenderConstraints } from './dpop.js';
import type { Store } from './store.js';

/** The source of time. Tests inject a fake one; production uses `Date.now`. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /**
   * Milliseconds since an arbitrary origin, from a clock that never jumps (stepping the
   * system clock does not move it): for intervals measured inside one process, such as
   * rate-limit windows. Optional; without it such intervals use `performance.now()`.
   */
  monotonic?(): number;
}

/** The source of randomness: `n` bytes from a CSPRNG. */
export type RandomBytes = (n: number) => Uint8Array;

/** Structured logging. Never pass a token, a key or a bootstrap token. */
export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A logger that drops everything. */
export const silentLogger: Logger = { info() {}, warn() {}, error() {} };

/** Settings of the auth module: timings in seconds (retention in days), and the DPoP policy per realm. */
export interface AuthSettings {
  readonly accessTokenTtlSeconds: number;
  readonly refreshTokenTtlSeconds: number;
  readonly refreshReuseGraceSeconds: number;
  readonly challengeTtlSeconds: number;
  readonly sessionMaxLifetimeSeconds: number;
  readonly bootstrapTokenTtlSeconds: number;
  readonly pairingMaxTtlSeconds: number;
  /** How long ended sessions and expired pairing intents are kept before retention deletes them. */
  readonly retentionDays: number;
  /** `:auth/sender-constraint` of each realm: how the sessions its device keys sign in are bound (DPoP). */
  readonly senderConstraint: SenderConstraints;
}

/** The defaults live in the one configuration table ({@link ./settings.ts}); re-exported where they always were. */
export { DEFAULT_AUTH_SETTINGS } from './settings.js';

/**
 * What every use case receives: the store, the clock, randomness, a logger, the project id
 * (bound into every challenge) and the timing settings. Passed explicitly, never global.
 */
export interface AuthDeps {
  readonly store: Store;
  readonly clock: Clock;
  readonly random: RandomBytes;
  readonly log: Logger;
  readonly projectId: string;
  readonly settings: AuthSettings;
}

import type { ProviderHostFailureCode } from './failure-codes.js';

/**
 * Why a confined provider failed: `start_refused` (not a provider, its `:config` refused, it
 * did not start), `malformed_answer` (an answer of the wrong shape: an extra field such as a
 * `principal`, a wrong type, a size over the bounds), `oversized` (a message over the size
 * limit), `timeout` (no answer in time), `crashed` (the process ended or broke the protocol
 * while the call was in flight; it is restarted), `provider_error` (it answered with an
 * error of its own), `closed` (the host was closed).
 */
export type ProviderFailure = 'start_refused' | 'malformed_answer' | 'oversized' | 'timeout' | 'crashed' | 'provider_error' | 'closed';

/**
 * A confined provider was refused at start or a call to it failed. The message is one line
 * naming the provider and the failure; text that came from the provider is cut short and
 * quoted, and configuration values are never part of it.
 *
 * @example
 * try { await handle.finish(ctx, input); } catch (err) { if (err instanceof ProviderError && err.reason === 'timeout') retryLater(); }
 */
export class ProviderError extends Error {
  readonly code = 'provider_failed' as const satisfies ProviderHostFailureCode;
  readonly reason: ProviderFailure;
  /** The provider module's name (its alias in `:svc/modules`). */
  readonly provider: string;
  /** For `start_refused`: every problem, one line each (the provider's `validateConfig` lines included). */
  readonly problems: readonly string[];
  /**
   * For `provider_error`: the `code` of the error the provider threw, when it is a short
   * identifier (the OIDC provider's `discovery_failed`...). Core's `providerOutageOf` reads it.
   */
  readonly providerCode: string | undefined;

  constructor(provider: string, reason: ProviderFailure, message: string, problems: readonly string[] = [], providerCode?: string) {
    super(`provider ${provider}: ${message}`);
    this.name = 'ProviderError';
    this.provider = provider;
    this.reason = reason;
    this.problems = problems;
    this.providerCode = providerCode;
  }
}

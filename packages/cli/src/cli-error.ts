import { errorCodeOf, failureCodeEntry } from '@svc/core';
import type { SvcErrorCode } from './failure-codes.js';
// Registers the CLI's own failure codes with core's registry.
import './failure-codes.js';

/** Exit codes of `svc`: 0 ok, 1 failure, 2 usage error. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/**
 * The exit code a failure with `code` ends a command with: the registry's for a failure code,
 * 1 for an HTTP refusal (whether `invalid_request` is a usage error is the caller's call).
 *
 * @example
 * exitCodeOf('usage_error'); // 2
 */
export function exitCodeOf(code: SvcErrorCode): number {
  return failureCodeEntry(code)?.exit ?? EXIT.failure;
}

/**
 * A failure the CLI reports as one clear line on stderr (what failed, and what to do) and
 * turns into an exit code. Anything else that escapes is a bug and is reported as such.
 *
 * @example
 * throw new CliError('no control database at /p/.svc/control/control.db; run `svc auth init /p` first');
 */
export class CliError extends Error {
  /** The code of the failure: given, else the code of the `cause`, else `command_failed`. */
  readonly code: SvcErrorCode;
  readonly exitCode: number;
  /** Extra lines printed before the message (e.g. every problem of a configuration file). */
  readonly details: readonly string[];

  constructor(message: string, options: { code?: SvcErrorCode; exitCode?: number; details?: readonly string[]; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CliError';
    // A cause's code is one a package registered, so one of SvcErrorCode's (core types it as a string).
    this.code = options.code ?? (errorCodeOf(options.cause) as SvcErrorCode | null) ?? 'command_failed';
    // Only an explicit code chooses the exit code: a wrapped cause keeps the default failure.
    this.exitCode = options.exitCode ?? (options.code === undefined ? EXIT.failure : exitCodeOf(options.code));
    this.details = options.details ?? [];
  }
}

/**
 * A mistake in how a command was called: exit code 2.
 *
 * @example
 * throw new UsageError('svc auth enroll: expected <BOOTSTRAP_TOKEN> <ED25519_PUBLIC_KEY_HEX> <PROJECT>');
 */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, { code: 'usage_error' });
    this.name = 'UsageError';
  }
}

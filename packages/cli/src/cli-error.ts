/** Exit codes of `svc`: 0 ok, 1 failure, 2 usage error. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/**
 * A failure the CLI reports as one clear line on stderr (what failed, and what to do) and
 * turns into an exit code. Anything else that escapes is a bug and is reported as such.
 *
 * @example
 * throw new CliError('no control database at /p/.svc/control/control.db; run `svc auth init /p` first');
 */
export class CliError extends Error {
  readonly exitCode: number;
  /** Extra lines printed before the message (e.g. every problem of a configuration file). */
  readonly details: readonly string[];

  constructor(message: string, options: { exitCode?: number; details?: readonly string[]; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CliError';
    this.exitCode = options.exitCode ?? EXIT.failure;
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
    super(message, { exitCode: EXIT.usage });
    this.name = 'UsageError';
  }
}

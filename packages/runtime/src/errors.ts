import { errorCodeOf, type FailureCode, type FailureExit } from '@svc/core';

/**
 * The failure codes the runtime's errors carry, with what `svc` exits with when one ends a
 * command. The runtime prints nothing: a caller (the CLI, an embedding program) reads `code`
 * and shows `message` (one line naming what failed and what to do) and `details`.
 */
export const RUNTIME_FAILURE_CODES = {
  service_failed: {
    raisedBy: 'RuntimeError (@svc/runtime)',
    exit: 1,
    meaning:
      'the running service (or an operation on a project: init, backup, restore, key rotation) could not do what was asked: a file it needs is missing or unsafe, a listener could not bind, a package was refused; the message says what failed and what to do',
  },
  project_not_found: {
    raisedBy: 'RuntimeError (@svc/runtime)',
    exit: 1,
    meaning:
      'there is no project (no `project.edn`, or no control database) where one was named; the message names the path and the command that creates it',
  },
  management_device_enrolled: {
    raisedBy: 'RuntimeError (@svc/runtime)',
    exit: 1,
    meaning:
      'a bootstrap token was asked for although a management device is enrolled; `svc auth init --recover` issues one anyway (audited)',
  },
} as const satisfies Record<string, { raisedBy: string; exit: FailureExit; meaning: string }>;

/** A code of {@link RUNTIME_FAILURE_CODES}. */
export type RuntimeFailureCode = keyof typeof RUNTIME_FAILURE_CODES;

/**
 * Why the runtime could not do what was asked: `code` from {@link RUNTIME_FAILURE_CODES} (or the
 * code of its `cause` when that carries a registered one, such as `store_open_failed`), a one-line
 * `message` that names what failed and what to do, and `details` (every problem of a
 * configuration file). Nothing is printed: the caller decides how to show it.
 *
 * @example
 * throw new RuntimeError(`no project at ${dir}; run \`svc auth init ${dir}\` first`, { code: 'project_not_found' });
 */
export class RuntimeError extends Error {
  readonly code: string;
  readonly details: readonly string[];

  constructor(message: string, options: { code?: RuntimeFailureCode | FailureCode; details?: readonly string[]; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RuntimeError';
    this.code = options.code ?? errorCodeOf(options.cause) ?? 'service_failed';
    this.details = options.details ?? [];
  }
}

/**
 * A listener's address was refused before anything bound (code `listen_address_refused`): which
 * listener, and whether the address was the one the caller gave (else it came from the
 * environment or `project.edn`). The message is the refusal's own.
 *
 * @example
 * if (error instanceof ListenRefusedError && error.given) console.error(`bad --listen: ${error.message}`);
 */
export class ListenRefusedError extends RuntimeError {
  constructor(
    readonly listener: 'management' | 'node' | 'application' | 'metrics',
    readonly given: boolean,
    cause: Error,
  ) {
    super(cause.message, { code: 'listen_address_refused', cause });
    this.name = 'ListenRefusedError';
  }
}

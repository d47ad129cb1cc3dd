import type { AddonsFailureCode } from '@svc/addons';
import { type CoreFailureCode, defineFailureCodes, errorCodeOf } from '@svc/core';
import type { ProviderHostFailureCode } from '@svc/provider-host';
import type { ServerFailureCode } from '@svc/server';

/**
 * The failure codes the runtime's errors carry, with what `svc` exits with when one ends a
 * command (registered with core's registry when this module loads). The runtime prints nothing: a caller (the CLI, an embedding program) reads `code`
 * and shows `message` (one line naming what failed and what to do) and `details`.
 */
export const RUNTIME_FAILURE_CODES = defineFailureCodes({
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
  listen_refused: {
    raisedBy: 'ListenRefusedError (@svc/runtime)',
    exit: 1,
    meaning:
      "a listener's address was refused before anything bound (its cause is the server's `listen_address_refused`); `listener` names which and `given` whether the caller chose it; `svc` reports it as `listen_address_refused`, exit 2 when it came from a flag",
  },
  management_device_enrolled: {
    raisedBy: 'RuntimeError (@svc/runtime)',
    exit: 1,
    meaning:
      'a bootstrap token was asked for although a management device is enrolled; `svc auth init --recover` issues one anyway (audited)',
  },
  audit_ship_stalled: {
    raisedBy: 'ShipStall (@svc/runtime)',
    exit: 1,
    meaning:
      'a running service stopped shipping the audit trail because the chain no longer continues the one its sinks have (a restored, moved or rewritten store); it logs `audit.ship_stalled` naming the cursor file to remove, reports the stall in `/readyz`, node health and metrics, and resumes by itself once the file is removed',
  },
  audit_ship_failed: {
    raisedBy: 'AuditShipError (@svc/runtime)',
    exit: 1,
    meaning:
      'a running service could not deliver an audit batch for another reason than a stall or a refused sink (the sink could not be written: a full disk, an I/O error; an unreadable cursor file); it retries every `:poll-milliseconds` and reports the stall in `/readyz`, node health and metrics until a delivery succeeds',
  },
  audit_sink_refused: {
    raisedBy: 'AuditSinkError (@svc/runtime)',
    exit: 1,
    meaning:
      'the audit sink file was not written: it is a symbolic link, not a regular file, owned by another user, readable or writable by group or others, or in a directory its group or others can write; the message names the path and the fix',
  },
});

/** A code of {@link RUNTIME_FAILURE_CODES}. */
export type RuntimeFailureCode = keyof typeof RUNTIME_FAILURE_CODES;

/** Every failure code the running service can end with: the runtime's and those of the packages it runs. */
export type ServiceFailureCode = RuntimeFailureCode | CoreFailureCode | AddonsFailureCode | ServerFailureCode | ProviderHostFailureCode;

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

  constructor(
    message: string,
    options: {
      code?: RuntimeFailureCode | CoreFailureCode | AddonsFailureCode | ServerFailureCode;
      details?: readonly string[];
      cause?: unknown;
    } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RuntimeError';
    this.code = options.code ?? errorCodeOf(options.cause) ?? 'service_failed';
    this.details = options.details ?? [];
  }
}

/**
 * A listener's address was refused before anything bound (code `listen_refused`, its cause the
 * server's `listen_address_refused`): which
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
    super(cause.message, { code: 'listen_refused', cause });
    this.name = 'ListenRefusedError';
  }
}

import type { ClientFailureCode } from '@svc/client';
import { defineFailureCodes, type ErrorCode } from '@svc/core';
import type { ServiceFailureCode } from '@svc/runtime/errors';

// The CLI is where every package's failure codes meet: a failure that ends a command exits with
// its table's \`exit\` and prints its code in \`--json\` problems. At run time the tables meet in
// core's registry (each package registers its own when it loads, before any of its errors can
// exist), so the CLI's start loads no package it does not use; here they meet as one type.

/** The failure codes of the CLI's own classes (\`CliError\`, \`UsageError\`). */
export const CLI_FAILURE_CODES = defineFailureCodes({
  command_failed: {
    raisedBy: 'CliError (@svc/cli)',
    exit: 1,
    meaning: 'a command failed; the one line on stderr says what failed and what to do',
  },
  usage_error: {
    raisedBy: 'UsageError (@svc/cli)',
    exit: 2,
    meaning: 'a command was called wrongly (unknown command or flag, missing or malformed argument)',
  },
});

/** A failure code of the CLI's own classes. */
export type CliFailureCode = keyof typeof CLI_FAILURE_CODES;

/** Every failure code a command can end with: those of the packages the CLI runs, and its own. */
export type FailureCode = ServiceFailureCode | ClientFailureCode | CliFailureCode;

/** Any stable code a command can end with: an HTTP error code or a failure code. */
export type SvcErrorCode = ErrorCode | FailureCode;

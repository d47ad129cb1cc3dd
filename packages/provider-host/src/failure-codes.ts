import { defineFailureCodes } from '@svc/core';

/**
 * The failure codes of @svc/provider-host's error classes (not HTTP answers). Registered with core on load, so `errorCodeOf` recognises them; the CLI merges
 * this table for exit codes and `--json` problems, the docs generator for `docs/errors.md`.
 */
export const PROVIDER_HOST_FAILURE_CODES = defineFailureCodes({
  provider_failed: {
    raisedBy: 'ProviderError (@svc/provider-host)',
    exit: 1,
    meaning:
      'a confined provider was refused at start (not a provider, bad `:config`) or a call to it failed: a malformed or oversized answer, a timeout, a crash, an error it threw, or a closed host; `reason` says which',
  },
});

/** A failure code of this package's classes. */
export type ProviderHostFailureCode = keyof typeof PROVIDER_HOST_FAILURE_CODES;

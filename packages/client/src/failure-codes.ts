import { defineFailureCodes } from '@svc/core';

/**
 * The failure codes of @svc/client's error classes (not HTTP answers). Registered with core on load, so `errorCodeOf` recognises them; the CLI merges
 * this table for exit codes and `--json` problems, the docs generator for `docs/errors.md`.
 */
export const CLIENT_FAILURE_CODES = defineFailureCodes({
  api_unreachable: {
    raisedBy: 'ApiUnreachableError (@svc/client)',
    exit: 1,
    meaning: 'the management API could not be reached at all (connection refused, DNS, reset)',
  },
  node_unreachable: {
    raisedBy: 'NodeUnreachableError (@svc/client)',
    exit: 1,
    meaning: 'the node surface could not be reached at all (connection refused, DNS, reset)',
  },
  node_identity_mismatch: {
    raisedBy: 'NodeIdentityError (@svc/client)',
    exit: 1,
    meaning: "the node's answer does not hold together (an id not derived from its key, or not the expected node)",
  },
  insecure_bearer_url: {
    raisedBy: 'InsecureBearerUrlError (@svc/client)',
    exit: 1,
    meaning:
      'a bearer or refresh token (of either realm) would have gone to, or a token pair come back from, a non-loopback http:// URL; nothing was sent',
  },
});

/** A failure code of this package's classes. */
export type ClientFailureCode = keyof typeof CLIENT_FAILURE_CODES;

/** The error classes of this package whose `code` is an HTTP code of core's `ERROR_CODES`, for the docs. */
export const CLIENT_HTTP_ERROR_CLASSES = ['ApiError (@svc/client: the code of the problem the server answered)'] as const;

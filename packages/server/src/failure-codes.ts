import { defineFailureCodes } from '@svc/core';

/**
 * The failure codes of @svc/server's error classes (not HTTP answers). Registered with core on load, so `errorCodeOf` recognises them; the CLI merges
 * this table for exit codes and `--json` problems, the docs generator for `docs/errors.md`.
 */
export const SERVER_FAILURE_CODES = defineFailureCodes({
  listen_address_refused: {
    raisedBy: 'ListenAddressError (@svc/server)',
    exit: 2,
    meaning:
      'a listen address is refused before anything binds (wildcard, non-loopback, malformed); exit 2 when it came from a flag, 1 when from the environment or project.edn',
  },
  app_modules_failed: {
    raisedBy: 'ModuleHostError (@svc/server)',
    exit: 1,
    meaning:
      'the confined process of the application modules (module mode) did not start: a module failed to load or is not a plain Fastify plugin, a package holds a link leading outside what the process may read, or the process did not get ready in time; the message names the module',
  },
});

/** A failure code of this package's classes. */
export type ServerFailureCode = keyof typeof SERVER_FAILURE_CODES;

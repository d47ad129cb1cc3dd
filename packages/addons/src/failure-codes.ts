import { defineFailureCodes } from '@svc/core';

/**
 * The failure codes of @svc/addons's error classes (not HTTP answers). Registered with core on load, so `errorCodeOf` recognises them; the CLI merges
 * this table for exit codes and `--json` problems, the docs generator for `docs/errors.md`.
 */
export const ADDONS_FAILURE_CODES = defineFailureCodes({
  addon_verification_failed: {
    raisedBy: 'AddonVerificationError (@svc/addons)',
    exit: 1,
    meaning: 'a store addon was refused by install or by verification before the control database was opened; `check` says which step',
  },
  addon_archive_invalid: {
    raisedBy: 'AddonArchiveError (@svc/addons)',
    exit: 1,
    meaning: 'an addon archive is unsafe or malformed (reported to callers as `addon_verification_failed`)',
  },
});

/** A failure code of this package's classes. */
export type AddonsFailureCode = keyof typeof ADDONS_FAILURE_CODES;

import type { AddonsFailureCode } from './failure-codes.js';
/**
 * The verification step that refused an addon. Checks run in the order listed in
 * `verifyAddon`; the first one that fails is the one reported.
 */
export type AddonCheck =
  | 'archive_digest'
  | 'installed_files'
  | 'manifest'
  | 'operation_set'
  | 'native_module'
  | 'abi'
  | 'export'
  | 'not_installed'
  | 'permissions'
  | 'dependencies'
  // A provider package's: no `<archive>.sig`; a signature that is malformed, for another
  // archive or does not verify; a valid one by a key not in :svc/trusted-publishers; a signed
  // package that does not declare `svc/auth-provider`.
  | 'unsigned'
  | 'bad_signature'
  | 'signer_not_trusted'
  | 'capability_missing';

/**
 * An addon refused by install or by verification before the control database is opened.
 * `check` is the stable thing to branch on; the message names the addon, the check, what was
 * wrong and what to do, in one line for the CLI's stderr.
 */
export class AddonVerificationError extends Error {
  readonly code = 'addon_verification_failed' as const satisfies AddonsFailureCode;
  readonly check: AddonCheck;
  /** `name@version` when known, else what the operator gave (an archive path or a spec). */
  readonly addon: string;

  constructor(
    check: AddonCheck,
    addon: string,
    problem: string,
    remedy: string,
    what: 'store addon' | 'application package' | 'provider package' | 'addon archive' = 'store addon',
  ) {
    super(`${what} ${addon} failed verification (${check}): ${problem}; ${remedy}`);
    this.name = 'AddonVerificationError';
    this.check = check;
    this.addon = addon;
  }
}

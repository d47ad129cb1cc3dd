import { defineFailureCodes } from '@svc/core';

/**
 * The failure codes of the audit-shipping classes (\`ShipStall\`, \`AuditShipError\`,
 * \`AuditSinkError\`), a table of their own so it moves with them (to \`@svc/runtime\`).
 * Registered with core on load, so \`errorCodeOf\` recognises them.
 */
export const AUDIT_SHIPPING_FAILURE_CODES = defineFailureCodes({
  audit_ship_stalled: {
    raisedBy: 'ShipStall (@svc/cli)',
    exit: 1,
    meaning:
      'a running service stopped shipping the audit trail because the chain no longer continues the one its sinks have (a restored, moved or rewritten store); it logs `audit.ship_stalled` naming the cursor file to remove, reports the stall in `/readyz`, node health and metrics, and resumes by itself once the file is removed',
  },
  audit_ship_failed: {
    raisedBy: 'AuditShipError (@svc/cli)',
    exit: 1,
    meaning:
      'a running service could not deliver an audit batch for another reason than a stall or a refused sink (the sink could not be written: a full disk, an I/O error; an unreadable cursor file); it retries every `:poll-milliseconds` and reports the stall in `/readyz`, node health and metrics until a delivery succeeds',
  },
  audit_sink_refused: {
    raisedBy: 'AuditSinkError (@svc/cli)',
    exit: 1,
    meaning:
      'the audit sink file was not written: it is a symbolic link, not a regular file, owned by another user, readable or writable by group or others, or in a directory its group or others can write; the message names the path and the fix',
  },
});

/** A failure code of the audit-shipping classes. */
export type AuditShippingFailureCode = keyof typeof AUDIT_SHIPPING_FAILURE_CODES;

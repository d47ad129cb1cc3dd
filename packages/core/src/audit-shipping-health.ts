import { errorCodeOf } from './errors.js';

/** A sink of `:svc/audit-sinks`, as health and metrics name it. */
export type AuditSinkName = 'file' | 'stdout';

/**
 * How audit shipping is doing, as readiness, node health and metrics report it. Stalled means
 * the last delivery attempt failed, so the sinks fall behind the trail until one succeeds; the
 * code says why (`audit_ship_stalled`: the chain does not continue the cursor; `audit_sink_refused`:
 * the sink file is unsafe; `store_unavailable`; `audit_ship_failed`: anything else, e.g. a full disk).
 */
export interface AuditShippingHealth {
  readonly sinks: readonly AuditSinkName[];
  readonly stalled: boolean;
  /** Why the last attempt failed; null while shipping works. */
  readonly code: string | null;
}

/**
 * The health after one delivery attempt: shipping when it succeeded, stalled with the failure's
 * stable code when it threw (an error without one counts as `audit_ship_failed`).
 *
 * @example
 * health = auditShippingAfter(['file'], error); // { sinks: ['file'], stalled: true, code: 'audit_ship_stalled' }
 */
export function auditShippingAfter(sinks: readonly AuditSinkName[], failure: unknown | null): AuditShippingHealth {
  if (failure === null) return { sinks, stalled: false, code: null };
  return { sinks, stalled: true, code: errorCodeOf(failure) ?? 'audit_ship_failed' };
}

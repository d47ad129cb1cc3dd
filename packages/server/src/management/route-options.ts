import type { AuditCheckpointsJson, AuthDeps } from '@svc/core';
import type { FailureLimiter } from '../http/failure-limiter.js';

/** What every management route plugin receives. */
export interface ManagementRouteOptions {
  readonly deps: AuthDeps;
}

/** Reviews the exported signed audit checkpoints (the latest `latest`, newest first), as the runtime reads them. */
export type AuditCheckpointSource = (latest: number) => Promise<AuditCheckpointsJson>;

/** What the operator routes receive: the deps and, where the service exports checkpoints, how to review them. */
export interface OperatorRouteOptions extends ManagementRouteOptions {
  /** Absent (a bare management app): `GET /v1/auth/audit/checkpoints` answers `exported: false`. */
  readonly auditCheckpoints?: AuditCheckpointSource | undefined;
}

/** What the enrollment route plugin receives: the deps and the failed-attempt budget. */
export interface EnrollRouteOptions extends ManagementRouteOptions {
  readonly limiter: FailureLimiter;
}

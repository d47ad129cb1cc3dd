import type { AuthDeps } from '@svc/core';
import type { FailureLimiter } from '../http/failure-limiter.js';

/** What every management route plugin receives. */
export interface ManagementRouteOptions {
  readonly deps: AuthDeps;
}

/** What the enrollment route plugin receives: the deps and the failed-attempt budget. */
export interface EnrollRouteOptions extends ManagementRouteOptions {
  readonly limiter: FailureLimiter;
}

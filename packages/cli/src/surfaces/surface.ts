import type { AuditShippingHealth, AuthDeps, ProviderHandle } from '@svc/core';
import type { ConnectionPlan } from '@svc/server';
import type { Logger } from 'pino';
import type { Project } from '../project.js';

/** What a surface gets when it starts: the open project's deps and the process logger. */
export interface SurfaceContext {
  readonly project: Project;
  readonly deps: AuthDeps;
  readonly log: Logger;
  /** The project's provider packages, each running confined (`startProviderHosts`); empty without any. */
  readonly providers: readonly ProviderHandle[];
  /** How audit shipping is doing (read per request by readiness, node health and metrics); null when no sink is configured. */
  readonly auditShipping: () => AuditShippingHealth | null;
  /** The connection caps of every listener and the gateway's upstream pool, sized to the process's descriptor limit. */
  readonly connections: ConnectionPlan;
}

/** A listener that is up: where it answers, and how to stop it. */
export interface RunningSurface {
  /** The line printed on stdout once it listens (tests parse it). */
  readonly readyLine: string;
  close(): Promise<void>;
}

/**
 * One listener of the foreground service: the management API today; the node HTTP surface and
 * the application gateway slot in as further surfaces.
 */
export interface Surface {
  readonly name: string;
  /** Whether it serves the project's provider packages (the gateway's sign-in, the node surface's status): they start only for such a surface. */
  readonly usesProviders?: boolean;
  /** Which listener's share of the descriptors it takes (`planConnectionLimits`); none for a listener without connection caps. */
  readonly kind?: 'management' | 'node' | 'application';
  start(ctx: SurfaceContext): Promise<RunningSurface>;
}

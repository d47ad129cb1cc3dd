import type { AuditShippingHealth, AuthDeps, ProviderHandle } from '@svc/core';
import type { ConnectionPlan } from '@svc/server';
import type { Logger } from 'pino';
import type { Project } from '../project.js';

/** What a surface gets when it starts: the open project's deps and the service's logger. */
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
  /** Something the operator should see (a cleartext listener, a key created): the embedding program shows it. */
  readonly notice: (text: string) => void;
  /** The service's environment (`SVC_AUDIT_CHECKPOINT_FILE` and the like); `process.env` when absent. */
  readonly env?: NodeJS.ProcessEnv;
}

/** A listener that is up: where it answers, and how to stop it. */
export interface RunningSurface {
  /** The URL it answers on (the real port when port 0 was asked for). */
  readonly url: string;
  /** Re-reads what the surface loaded from files (the gateway's TLS pair); a failed reload keeps the previous and logs why. */
  reload?(): void;
  close(): Promise<void>;
}

/** Which listener a surface is. */
export type SurfaceKind = 'management' | 'node' | 'application' | 'metrics';

/** One listener of the running service: the management API, the node surface, the gateway or the metrics listener. */
export interface Surface {
  readonly kind: SurfaceKind;
  /** Whether it serves the project's provider packages (the gateway's sign-in, the node surface's status): they start only for such a surface. */
  readonly usesProviders?: boolean;
  start(ctx: SurfaceContext): Promise<RunningSurface>;
}

import { existsSync } from 'node:fs';
import { errorCodeOf, type ProviderHandle } from '@svc/core';
import {
  type ConnectionPlan,
  DESCRIPTOR_RESERVE,
  descriptorsForDefaults,
  type MetricsListen,
  openDescriptors,
  planConnectionLimits,
  readDescriptorLimit,
} from '@svc/server';
import type { Logger } from 'pino';
import { startCheckpointExport } from './audit-checkpoints.js';
import { type AuditShipping, startAuditShipping } from './audit-shipping.js';
import { assertOwnerOnly, ensureNodeIdentity, makeDeps, openControlStore } from './control.js';
import { ListenRefusedError, RuntimeError } from './errors.js';
import { type ListenAddress, type ListenerName, resolveListen } from './listen.js';
import { createLogger } from './logger.js';
import { loadProject, type Project } from './project.js';
import { startProviderHosts } from './provider-hosts.js';
import { verifyProviderModules } from './provider-packages.js';
import { appSurface } from './surfaces/app-surface.js';
import { urlHost } from './surfaces/listen-on.js';
import { managementSurface } from './surfaces/management-surface.js';
import { metricsSurface } from './surfaces/metrics-surface.js';
import { nodeSurface } from './surfaces/node-surface.js';
import type { RunningSurface, Surface } from './surfaces/surface.js';

/** How often a running service prunes retired refresh-token digests and ended records. */
export const PRUNE_INTERVAL_MS = 10 * 60 * 1000;

/** The order listeners start in (and print in): readiness on the metrics listener is answered once the others are up. */
const ORDER: readonly ListenerName[] = ['management', 'node', 'application', 'metrics'];

/** What {@link openService} is asked to run, and how. */
export interface ServiceOptions {
  /**
   * The listeners to run (default all four). A listener listed here still does not start when
   * its address resolves to `off` (e.g. `SVC_NODE_LISTEN=off`, metrics without an address).
   */
  readonly listeners?: readonly ListenerName[];
  /**
   * An address per listener: `HOST:PORT` (checked as the listener's flag is, so `off` only where
   * that flag takes it), or an address already resolved. Absent: the listener's environment
   * variable, then `project.edn`, then its default (see {@link resolveListen}). To leave a
   * listener out, leave it out of {@link ServiceOptions.listeners}.
   */
  readonly listen?: Partial<Record<ListenerName, string | ListenAddress | MetricsListen | undefined>>;
  /** The option an operator changes to choose each address (`--listen`), named when a bind fails. */
  readonly listenFlags?: Partial<Record<ListenerName, string | undefined>>;
  /** The profile of `project.edn` to apply (`SVC_PROFILE` is not read here: the caller chooses). */
  readonly profile?: string | null;
  /** The environment the listen variables, `SVC_CONTROL_DIR` and secret references are read from (default `process.env`). */
  readonly env?: NodeJS.ProcessEnv;
  /** Where the service logs (pino); default: JSON on stderr at `SVC_LOG_LEVEL`, else info. */
  readonly logger?: Logger;
  /** Reported by the node surface's status as the service's version. */
  readonly version?: string;
  /** Called with what the operator should see besides the log (a node key created, a cleartext listener). */
  readonly onNotice?: (text: string) => void;
}

/** The running service of one project: {@link openService} returns it, stopped. */
export interface Service {
  readonly project: Project;
  /** The URL of each listener that is up (the real port when port 0 was asked for), in start order. */
  readonly addresses: Readonly<Partial<Record<ListenerName, string>>>;
  /** The listeners {@link Service.start} will start (those asked for whose address is not `off`), in start order. */
  readonly listening: readonly ListenerName[];
  /** Whether {@link Service.reload} has anything to re-read (the gateway's TLS pair). */
  readonly reloadable: boolean;
  /** Verifies the provider packages, opens the store, starts the providers, the listeners, checkpoints, shipping and pruning. */
  start(): Promise<void>;
  /** Re-reads the gateway's TLS certificate and key (SIGHUP): a bad pair is logged, the previous one keeps serving. */
  reload(): void;
  /** Stops everything in reverse order, after in-flight requests, and closes the store. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Opens a project's service: loads and validates `project.edn`, resolves every listener's
 * address (a refused one throws {@link ListenRefusedError}, code `listen_refused`, before
 * anything binds), and checks the node key. Nothing listens until {@link Service.start}.
 *
 * @example
 * const service = await openService('./demo', { listen: { management: '127.0.0.1:0', node: '127.0.0.1:0', application: 'off' } });
 * await service.start();
 * console.log(service.addresses.management); // http://127.0.0.1:40123
 * await service.stop();
 */
export async function openService(projectDir: string, options: ServiceOptions = {}): Promise<Service> {
  const env = options.env ?? process.env;
  const project = loadProject(projectDir, { profile: options.profile ?? null, env });
  const log = options.logger ?? createLogger({ env, fallback: 'info' });
  const notice = options.onNotice ?? (() => undefined);
  const wanted = options.listeners ?? ORDER;
  const addresses: Partial<Record<ListenerName, ListenAddress | MetricsListen>> = {};
  for (const name of ORDER) {
    if (!wanted.includes(name)) continue;
    const given = options.listen?.[name];
    let at: ListenAddress | MetricsListen | 'off';
    try {
      // An address given as an object is checked as its `HOST:PORT` would be: the management API
      // stays on loopback, and a metrics listener on a network address is project.edn's to choose.
      at = resolveListen(name, { given: typeof given === 'object' ? `${urlHost(given.host)}:${given.port}` : given, env, project });
    } catch (error) {
      if (errorCodeOf(error) === 'listen_address_refused') throw new ListenRefusedError(name, given !== undefined, error as Error);
      throw error;
    }
    if (at !== 'off') addresses[name] = at;
  }
  // The node identity key signs diagnostics, checkpoints and backups and names the node (the
  // assertions' issuer): a node on an external store makes its own on first start when it is to
  // serve the node surface or the gateway; an existing one that others can read is refused
  // before anything binds, whichever listeners run.
  if ((wanted.includes('node') || wanted.includes('application')) && ensureNodeIdentity(project)) {
    notice(`created this node's identity key ${project.nodeKey} (first start on an external store)`);
  }
  if (addresses.node !== undefined || existsSync(project.nodeKey)) assertOwnerOnly(project.nodeKey, 'the node key');
  const metrics =
    addresses.metrics === undefined
      ? undefined
      : metricsSurface(addresses.metrics as MetricsListen, { flag: options.listenFlags?.metrics });
  const flag = (name: ListenerName) => options.listenFlags?.[name];
  const surfaces: Surface[] = [];
  if (addresses.management !== undefined) {
    surfaces.push(
      managementSurface(addresses.management, {
        flag: flag('management'),
        metrics: metrics?.metrics,
        version: options.version ?? 'unknown',
      }),
    );
  }
  if (addresses.node !== undefined) {
    surfaces.push(nodeSurface(addresses.node, { version: options.version ?? 'unknown', flag: flag('node'), metrics: metrics?.metrics }));
  }
  if (addresses.application !== undefined) {
    surfaces.push(appSurface(addresses.application, { flag: flag('application'), metrics: metrics?.metrics }));
  }
  if (metrics !== undefined) surfaces.push(metrics);
  return lifecycle({ project, surfaces, log, notice, env });
}

interface Wiring {
  readonly project: Project;
  readonly surfaces: readonly Surface[];
  readonly log: Logger;
  readonly notice: (text: string) => void;
  readonly env: NodeJS.ProcessEnv;
}

/**
 * The service's one start and one stop: `stop()` during `start()` waits for the start to end
 * (either way) and then stops everything it started; a second `stop()` waits for the first; a
 * start that failed has stopped what it started, and leaves the service stopped.
 */
function lifecycle(w: Wiring): Service {
  const addresses: Partial<Record<ListenerName, string>> = {};
  let starting: Promise<() => Promise<void>> | undefined;
  let stopping: Promise<void> | undefined;
  const stopStarted = async (): Promise<void> => {
    const stopAll = await starting?.catch(() => undefined);
    await stopAll?.();
    for (const name of ORDER) delete addresses[name];
  };
  return {
    project: w.project,
    addresses,
    listening: w.surfaces.map((s) => s.kind),
    reloadable: w.project.config.app.tls !== null && w.surfaces.some((s) => s.kind === 'application'),
    start() {
      if (starting !== undefined || stopping !== undefined) {
        return Promise.reject(new RuntimeError(`the service of ${w.project.dir} was already started (a service starts once)`));
      }
      if (w.surfaces.length === 0) return Promise.reject(new RuntimeError('nothing to serve: every listener asked for is off'));
      starting = startAll(w, addresses);
      return starting.then(() => undefined);
    },
    reload() {
      reloaders.get(addresses)?.();
    },
    stop() {
      stopping ??= stopStarted();
      return stopping;
    },
  };
}

/** The reload of each started service, by its addresses object (set once its surfaces are up). */
const reloaders = new WeakMap<object, () => void>();

/** Starts everything, in order; on a failure stops what started and rethrows. Resolves to the stop. */
async function startAll(w: Wiring, addresses: Partial<Record<ListenerName, string>>): Promise<() => Promise<void>> {
  const { project, surfaces, log, notice, env } = w;
  // Provider packages are verified (pin, signature, trusted signer, files, capability) on every
  // start, before the control store opens and before any of their code could run.
  const providerModules = await verifyProviderModules(project);
  const store = await openControlStore(project, { create: false, log, env });
  const running: RunningSurface[] = [];
  let providers: ProviderHandle[] = [];
  let pruneTimer: NodeJS.Timeout | undefined;
  let pruning: Promise<void> = Promise.resolve();
  let checkpoints: { stop(): Promise<void> } | undefined;
  let shipping: AuditShipping | undefined;
  let stopping = false;
  const stop = async () => {
    stopping = true;
    reloaders.delete(addresses);
    if (pruneTimer !== undefined) clearInterval(pruneTimer);
    for (const s of [...running].reverse()) await s.close().catch((error: unknown) => log.error({ err: error }, 'error while closing'));
    running.length = 0;
    for (const name of ORDER) delete addresses[name];
    // After the surfaces: no request can reach a provider any more.
    await Promise.all(
      providers.map((p) => p.close().catch((error: unknown) => log.error({ err: error }, 'error while closing a provider'))),
    );
    // After the last request, before the store closes: the last checkpoint covers everything this process appended.
    await checkpoints?.stop().catch((error: unknown) => log.error({ err: error }, 'error while exporting the last checkpoint'));
    await shipping?.stop().catch((error: unknown) => log.error({ err: error }, 'error while shipping the last audit events'));
    // A pruning pass under way finishes before the store closes under it.
    await pruning;
    await store.close().catch((error: unknown) => log.error({ err: error }, 'error while closing the store'));
  };
  try {
    const deps = await makeDeps(project, store, log);
    // Only where a surface serves them: the management API alone verifies the packages, starts none.
    if (surfaces.some((s) => s.usesProviders === true)) providers = await startProviderHosts(providerModules, log, env);
    // Shipping starts after the surfaces; readiness, health and metrics read its state per request.
    const auditShipping = () => shipping?.health() ?? null;
    const connections = connectionPlan(surfaces, log);
    for (const surface of surfaces) {
      const up = await surface.start({ project, deps, log, providers, auditShipping, connections, notice, env });
      running.push(up);
      addresses[surface.kind] = up.url;
    }
    checkpoints = startCheckpointExport({ project, deps, log, env });
    shipping = startAuditShipping({ project, deps, log });
  } catch (error) {
    await stop();
    throw error;
  }
  reloaders.set(addresses, () => {
    for (const s of running) s.reload?.();
  });
  // Retired refresh-token digests pile up with every rotation, ended sessions and pairing intents
  // with every sign-in and pairing: drop the digests that can no longer reveal a reuse and the
  // records past their retention, now and every 10 minutes (never concurrently with itself).
  const prune = async () => {
    const now = Date.now();
    try {
      // Past grace a sealed grace pair only helps whoever holds a copy of the database and a
      // retired refresh token: it is erased here, at most one pass after its grace ends.
      const deleted = await store.pruneRetiredRefreshTokens({
        now,
        retiredBefore: now - project.config.auth.refreshTokenTtlSeconds * 1000,
        graceEndedBefore: now - project.config.auth.refreshReuseGraceSeconds * 1000,
      });
      if (deleted > 0) log.info({ event: 'store.pruned', retired_refresh_tokens: deleted }, 'pruned retired refresh tokens');
      // Retention (:auth/retention-days, default 30): sessions (expired or revoked) and pairing
      // intents (expired, completed or burned) that long after they ended. The audit trail stays.
      const ended = await store.pruneEndedRecords({ endedBefore: now - project.config.auth.retentionDays * 86_400_000 });
      if (ended.sessions > 0 || ended.pairingIntents > 0) {
        log.info({ event: 'store.pruned', sessions: ended.sessions, pairing_intents: ended.pairingIntents }, 'pruned ended records');
      }
    } catch (error) {
      log.warn({ err: error }, 'pruning failed; will retry');
    }
  };
  const schedule = () => {
    if (stopping) return;
    pruning = pruning.then(prune);
  };
  schedule();
  pruneTimer = setInterval(schedule, PRUNE_INTERVAL_MS);
  pruneTimer.unref();
  return stop;
}

/** Descriptors kept free beyond those open when the listeners start (log rotation, store reconnects, key reloads). */
const HEADROOM = 32;

/**
 * Sizes the listeners' connection caps to this process's descriptor limit, so that all of
 * them full at once (and the gateway's upstream pool) still leave the management API and the
 * node surface their share and the rest of the process its descriptors. The soft limit is
 * read from `/proc/self/limits` after Node raised it to the hard one at start (Node does that
 * itself; the hard limit is what `ulimit -n` / systemd's `LimitNOFILE=` set). Logged once; a
 * warning when it made any cap smaller than its default.
 *
 * @throws {RuntimeError} when the limit is too small to serve at all.
 */
function connectionPlan(surfaces: readonly Surface[], log: Logger): ConnectionPlan {
  const limit = readDescriptorLimit();
  const open = openDescriptors();
  const reserve = Math.max(DESCRIPTOR_RESERVE, (open ?? 0) + HEADROOM);
  const kinds = new Set(surfaces.map((s) => s.kind));
  let plan: ConnectionPlan;
  try {
    plan = planConnectionLimits(
      limit?.soft ?? null,
      { management: kinds.has('management'), node: kinds.has('node'), application: kinds.has('application') },
      reserve,
    );
  } catch (error) {
    throw new RuntimeError(
      `${(error as Error).message}; raise it (ulimit -n, or LimitNOFILE= in the systemd unit; ${descriptorsForDefaults(reserve)} fits every default cap)`,
      { cause: error },
    );
  }
  const fields = {
    event: 'descriptors',
    limit_soft: limit?.soft ?? null,
    limit_hard: limit?.hard ?? null,
    open,
    reserve,
    management_max: plan.management.maxConnections,
    node_max: plan.node.maxConnections,
    application_max: plan.application.maxConnections,
    upstream_max: plan.upstreamConnections,
  };
  if (plan.reduced) {
    log.warn(
      fields,
      `the open-file limit (${limit?.soft}) is below ${descriptorsForDefaults(reserve)}: connection caps reduced to fit it; raise it with ulimit -n or LimitNOFILE=`,
    );
  } else {
    // Nothing to act on when every default cap fits: debug, so a start (or a refused one) stays quiet.
    log.debug(fields, 'connection caps sized to the open-file limit');
  }
  return plan;
}

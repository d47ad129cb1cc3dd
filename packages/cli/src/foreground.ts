import type { ProviderHandle } from '@svc/core';
import {
  type ConnectionPlan,
  DESCRIPTOR_RESERVE,
  descriptorsForDefaults,
  openDescriptors,
  planConnectionLimits,
  readDescriptorLimit,
} from '@svc/server';
import type { Logger } from 'pino';
import { startCheckpointExport } from './audit-checkpoints.js';
import { type AuditShipping, startAuditShipping } from './audit-shipping.js';
import { CliError } from './cli-error.js';
import { makeDeps, openControlStore } from './control.js';
import { createLogger } from './logger.js';
import { printLine } from './output.js';
import type { Project } from './project.js';
import { startProviderHosts } from './provider-hosts.js';
import { verifyProviderModules } from './provider-packages.js';
import type { RunningSurface, Surface } from './surfaces/surface.js';

/** How often a running service prunes retired refresh-token digests and ended records. */
export const PRUNE_INTERVAL_MS = 10 * 60 * 1000;

/**
 * Runs surfaces in the foreground until SIGINT or SIGTERM: opens the control store (refusing
 * one readable by others), starts every surface and prints its ready line, then on a signal
 * closes the surfaces and the store and resolves to exit code 0. A second signal exits at once.
 *
 * @example
 * return runForeground(project, [managementSurface(listen, { flag: '--listen' })]);
 */
export async function runForeground(project: Project, surfaces: readonly Surface[]): Promise<number> {
  if (surfaces.length === 0) throw new CliError('nothing to serve');
  const log = createLogger({ env: process.env, fallback: 'info' });
  // Provider packages are verified (pin, signature, trusted signer, files, capability) on every
  // start, before the control store opens and before any of their code could run.
  const providerModules = await verifyProviderModules(project);
  const store = await openControlStore(project, { create: false, log });
  let providers: ProviderHandle[] = [];
  const running: RunningSurface[] = [];
  let stopping = false;
  let pruneTimer: NodeJS.Timeout | undefined;
  let checkpoints: { stop(): Promise<void> } | undefined;
  let shipping: AuditShipping | undefined;
  const stop = async () => {
    if (pruneTimer !== undefined) clearInterval(pruneTimer);
    for (const s of running.reverse()) await s.close().catch((error: unknown) => log.error({ err: error }, 'error while closing'));
    // After the surfaces: no request can reach a provider any more.
    await Promise.all(
      providers.map((p) => p.close().catch((error: unknown) => log.error({ err: error }, 'error while closing a provider'))),
    );
    // After the last request, before the store closes: the last checkpoint covers everything this process appended.
    await checkpoints?.stop().catch((error: unknown) => log.error({ err: error }, 'error while exporting the last checkpoint'));
    await shipping?.stop().catch((error: unknown) => log.error({ err: error }, 'error while shipping the last audit events'));
    await store.close().catch((error: unknown) => log.error({ err: error }, 'error while closing the store'));
  };
  try {
    const deps = await makeDeps(project, store, log);
    // Only where a surface serves them: `svc auth serve` alone verifies the packages, starts none.
    if (surfaces.some((s) => s.usesProviders === true)) providers = await startProviderHosts(providerModules, log);
    // Shipping starts after the surfaces; readiness, health and metrics read its state per request.
    const auditShipping = () => shipping?.health() ?? null;
    const connections = connectionPlan(surfaces, log);
    for (const surface of surfaces) {
      running.push(await surface.start({ project, deps, log, providers, auditShipping, connections }));
    }
    checkpoints = startCheckpointExport({ project, deps, log });
    shipping = startAuditShipping({ project, deps, log });
  } catch (error) {
    await stop();
    throw error;
  }
  const signalled = new Promise<NodeJS.Signals>((resolve) => {
    const on = (signal: NodeJS.Signals) => {
      if (stopping) {
        log.warn({ signal }, 'second signal: exiting now');
        process.exit(1);
      }
      stopping = true;
      resolve(signal);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
  for (const s of running) printLine(s.readyLine);
  // Retired refresh-token digests pile up with every rotation, ended sessions and pairing intents
  // with every sign-in and pairing: drop the digests that can no longer reveal a reuse and the
  // records past their retention, now and every 10 minutes (never concurrently with itself).
  let pruning = false;
  const prune = async () => {
    if (pruning || stopping) return;
    pruning = true;
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
    } finally {
      pruning = false;
    }
  };
  void prune();
  pruneTimer = setInterval(() => void prune(), PRUNE_INTERVAL_MS);
  pruneTimer.unref();
  const signal = await signalled;
  log.info({ event: 'shutdown', signal }, 'shutting down');
  await stop();
  log.info({ event: 'stopped' }, 'stopped');
  return 0;
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
 * @throws {CliError} when the limit is too small to serve at all.
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
    throw new CliError(
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

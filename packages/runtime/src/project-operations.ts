import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  type AssertionKeyJson,
  type AuditEvent,
  auditDraft,
  type BootstrapReason,
  checkAuditCheckpoint,
  issueBootstrapToken,
  signAuditCheckpoint,
  verifyAuditChain,
} from '@svc/core';
import { ConfigError } from '@svc/core/config';
import { rotateProjectAssertionKeys } from './assertion-keys.js';
import { appendCheckpointLine } from './audit-checkpoints.js';
import { allAuditEvents } from './audit-events.js';
import { bundledSqliteAddon, installBundledStoreIfPinned } from './bundled-addons.js';
import {
  assertOwnerOnly,
  controlStoreLocation,
  ensureControlDir,
  ensureNodeKey,
  initProjectId,
  makeDeps,
  openControlStore,
} from './control.js';
import { RuntimeError } from './errors.js';
import { createLogger } from './logger.js';
import { loadNodeIdentity, rotateNodeKey } from './node-keys.js';
import { defaultProjectEdn, loadProject, type Project, projectNameFor } from './project.js';
import type { OpenProject } from './session.js';

/** What {@link initProject} created and issued. */
export interface InitializedProject {
  readonly project: Project;
  /** Where the control state lives, for people (the embedded store's file, or the store module). */
  readonly controlStore: string;
  /** The one-time bootstrap token: show it to the operator once, never log or store it. */
  readonly bootstrapToken: string;
  readonly expiresAt: number;
  readonly reason: BootstrapReason;
}

/**
 * Creates a project where there is none and issues a bootstrap token: the directory and a
 * default `project.edn` (owner-only) when missing, the bundled embedded store installed against
 * its pin, the control directory (0700), the control store, the node key (0600) and the project
 * id. With an enrolled management device the token is refused (code
 * `management_device_enrolled`) unless `recover` (audited).
 *
 * @example
 * const { bootstrapToken, expiresAt } = await initProject('./demo', { profile: null, env: process.env, recover: false });
 */
export async function initProject(
  dir: string,
  opts: { readonly profile: string | null; readonly env: NodeJS.ProcessEnv; readonly recover: boolean },
): Promise<InitializedProject> {
  const abs = resolve(dir);
  // Owner-only, explicitly (the umask may be 002): what the service loads must not be writable by others.
  mkdirSync(abs, { recursive: true, mode: 0o700 });
  const file = join(abs, 'project.edn');
  if (!existsSync(file)) writeFileSync(file, defaultProjectEdn(projectNameFor(abs), bundledSqliteAddon()), { flag: 'wx', mode: 0o600 });
  const project = loadProject(dir, { profile: opts.profile, env: opts.env });
  // The embedded default is an addon too: installed from the bundled archive with its pin,
  // so the default path runs the same verification as any other addon.
  await installBundledStoreIfPinned(project);
  ensureControlDir(project.controlDir);
  const log = createLogger({ env: opts.env, fallback: 'warn' });
  const store = await openControlStore(project, { create: true });
  try {
    ensureNodeKey(project.nodeKey);
    await initProjectId(store);
    const deps = await makeDeps(project, store, log);
    let issued: Awaited<ReturnType<typeof issueBootstrapToken>>;
    try {
      issued = await issueBootstrapToken(deps, { recovery: opts.recover });
    } catch (error) {
      if (error instanceof ConfigError) {
        throw new RuntimeError(`a management device is already enrolled in ${project.dir}`, {
          code: 'management_device_enrolled',
          cause: error,
        });
      }
      throw error;
    }
    return {
      project,
      controlStore: controlStoreLocation(project),
      bootstrapToken: issued.token,
      expiresAt: issued.expiresAt,
      reason: issued.reason,
    };
  } finally {
    await store.close();
  }
}

/** The audit trail could not record a change that was made: the change stands, the message says so. */
function unrecorded(what: string, error: unknown): RuntimeError {
  return new RuntimeError(
    `${what} but recording it in the audit trail failed: ${(error as Error).message}; check the store, the rotation itself stands`,
    { cause: error },
  );
}

/**
 * Rotates the node key of an open project (the old one stays published, see `rotateNodeKey`)
 * and records `node.key_rotated` in the audit trail. A running node signs with the new key from
 * its next request.
 *
 * @example
 * await withProject(dir, null, (open) => rotateProjectNodeKey(open));
 */
export async function rotateProjectNodeKey({ project, deps }: OpenProject): Promise<ReturnType<typeof rotateNodeKey>> {
  assertOwnerOnly(project.nodeKey, 'the node key');
  const rotated = rotateNodeKey(project.nodeKey, deps.clock.now());
  const { previous, current } = rotated;
  try {
    await deps.store.appendAuditEvent(
      auditDraft(deps, 'node.key_rotated', {
        data: { node_id: current.nodeId, previous_node_id: previous.nodeId, valid_from: current.validFrom ?? null },
      }),
    );
  } catch (error) {
    throw unrecorded(`the node key was rotated (now ${current.nodeId})`, error);
  }
  return rotated;
}

/**
 * Rotates the cluster's `Svc-Assertion` signing key (kept in the control store, shared by every
 * node): published before it signs; `immediate` withdraws every old key now. The new set and its
 * `app.assertion_key_rotated` event are saved in one transaction, conditional on the set this
 * rotation read, so a rotation made at the same time on another node is refused, not merged. A
 * rotation under way (a published key that does not sign yet) is refused unless `immediate`.
 *
 * @example
 * const { next } = await withProject(dir, null, (open) => rotateProjectAssertionKey(open, { immediate: false }));
 */
export async function rotateProjectAssertionKey(
  { project, deps, log }: OpenProject,
  opts: { readonly immediate: boolean },
): Promise<{ readonly next: AssertionKeyJson; readonly previous: AssertionKeyJson | null }> {
  const rotation = await rotateProjectAssertionKeys(project, deps, log, opts);
  if (rotation.outcome === 'pending') {
    throw new RuntimeError(
      `a rotation is already under way: key ${rotation.pending.kid} signs from ${rotation.pending.signs_from}; rotate again after that, or use --immediate`,
    );
  }
  if (rotation.outcome === 'conflict') {
    throw new RuntimeError(
      'another node changed the assertion key set at the same moment; nothing was changed here: run the command again if still needed',
    );
  }
  return { next: rotation.next, previous: rotation.previous };
}

/** The verdict of {@link verifyProjectAudit}. */
export type AuditVerification =
  | { readonly ok: false; readonly broken: 'chain'; readonly seq: number; readonly event: AuditEvent | undefined; readonly problem: string }
  | {
      readonly ok: false;
      readonly broken: 'checkpoints';
      readonly events: number;
      readonly head: string;
      readonly checked: number;
      readonly failures: readonly string[];
    }
  | {
      readonly ok: true;
      readonly events: number;
      readonly head: string;
      readonly checked: number;
      /** The signed checkpoint of the head, as one JSON line, when `exportTo` asked for one (written to the file unless `-`). */
      readonly checkpointLine: string | null;
    };

function checkpointFailures(file: string, chain: Parameters<typeof checkAuditCheckpoint>[1]): { checked: number; failures: string[] } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new RuntimeError(`cannot read the checkpoints ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const failures: string[] = [];
  let checked = 0;
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    checked++;
    let value: unknown = null;
    try {
      value = JSON.parse(line);
    } catch {
      value = null;
    }
    const verdict = checkAuditCheckpoint(value, chain);
    if (!verdict.ok) failures.push(`line ${i + 1}: ${verdict.problem}: ${verdict.detail}`);
  });
  return { checked, failures };
}

/**
 * Verifies the audit hash chain of an open project and, with `checkpoints`, the chain against
 * every signed checkpoint in that file (truncation, rewriting); with `exportTo`, after a
 * successful check, signs a checkpoint of the head with the node key and appends it to that
 * file (created 0600), or returns it alone for `-`.
 *
 * @example
 * const verdict = await withProject(dir, null, (open) => verifyProjectAudit(open, {}));
 */
export async function verifyProjectAudit(
  { project, store, deps, log }: OpenProject,
  opts: { readonly checkpoints?: string | undefined; readonly exportTo?: string | undefined },
): Promise<AuditVerification> {
  const events: AuditEvent[] = [];
  for await (const event of allAuditEvents(store)) events.push(event);
  const verdict = verifyAuditChain(events);
  if (!verdict.ok) {
    return { ok: false, broken: 'chain', seq: verdict.seq, event: events.find((e) => e.seq === verdict.seq), problem: verdict.problem };
  }
  let identity: ReturnType<typeof loadNodeIdentity> | undefined;
  if (opts.checkpoints !== undefined || opts.exportTo !== undefined) {
    assertOwnerOnly(project.nodeKey, 'the node key');
    identity = loadNodeIdentity(project.nodeKey);
  }
  let checked = 0;
  if (opts.checkpoints !== undefined && identity !== undefined) {
    const result = checkpointFailures(opts.checkpoints, {
      project: deps.projectId,
      events,
      publicKeyHex: identity.publicKeyHex,
      previousKeys: identity.previousKeys ?? [],
    });
    checked = result.checked;
    if (result.failures.length > 0) {
      return { ok: false, broken: 'checkpoints', events: verdict.length, head: verdict.head, checked, failures: result.failures };
    }
  }
  let checkpointLine: string | null = null;
  if (opts.exportTo !== undefined && identity !== undefined) {
    const last = events.at(-1);
    const checkpoint = signAuditCheckpoint(
      { project: deps.projectId, head: last === undefined ? null : { seq: last.seq, hash: last.hash }, now: deps.clock.now() },
      identity,
    );
    log.info({ event: 'audit.checkpoint', checkpoint }, 'audit checkpoint exported');
    checkpointLine = JSON.stringify(checkpoint);
    if (opts.exportTo !== '-') appendCheckpointLine(opts.exportTo, checkpointLine);
  }
  return { ok: true, events: verdict.length, head: verdict.head, checked, checkpointLine };
}

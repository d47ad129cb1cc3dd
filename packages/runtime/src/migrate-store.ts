import { existsSync } from 'node:fs';
import { userInfo } from 'node:os';
import { resolve } from 'node:path';
import {
  type AuditEvent,
  auditDraft,
  GENESIS_HASH,
  openAssertionKeySet,
  sealAssertionKeySet,
  sealAuditEvent,
  verifyAuditChain,
} from '@svc/core';
import type { ModuleConfig } from '@svc/core/config';
import { type ControlStateCounts, type ControlStateRow, type EventRow, toEvent } from '@svc/core/store';
import { lockSqliteStore, StoreBackupError } from 'svc-store-sqlite/backup';
import { assertionKeyCustody } from './assertion-keys.js';
import { allAuditEvents } from './audit-events.js';
import { embeddedStoreFile, openControlStore } from './control.js';
import { RuntimeError } from './errors.js';
import type { Project } from './project.js';
import { createRandomPool } from './random.js';

/** What {@link migrateProjectStore} did. */
export interface StoreMigration {
  /** The store module the state came from (`:auth/store`'s alias) and went to. */
  readonly from: string;
  readonly to: string;
  readonly fromPackage: string;
  readonly toPackage: string;
  /** Whether live sessions were copied (users stay signed in). */
  readonly sessions: boolean;
  /** Sessions that were live in the source and were not copied (0 with `sessions`). */
  readonly liveSessionsLeft: number;
  /** Rows copied, per table. */
  readonly counts: ControlStateCounts;
  /** The audit chain of the target, verified, with `store.migrated` at its end. */
  readonly auditEvents: number;
  readonly auditHead: string;
}

const random = createRandomPool();

/** The source's rows, with each audit event checked to continue the chain as it streams past. */
/**
 * The rows of an export with the cluster's assertion key set sealed under `kek` (a store other
 * than the embedded one keeps only sealed private keys, and refuses a clear set: whoever could
 * write the database could otherwise plant a key of their own). A set already sealed goes as it is.
 */
async function* sealedAssertionKeys(
  rows: AsyncIterable<ControlStateRow>,
  kek: Parameters<typeof sealAssertionKeySet>[1],
  keks: Parameters<typeof openAssertionKeySet>[1],
): AsyncGenerator<ControlStateRow> {
  for await (const r of rows) {
    if (r.table !== 'assertion_keys' || typeof r.row.key_set !== 'string') {
      yield r;
      continue;
    }
    const opened = openAssertionKeySet(r.row.key_set, keks, { requireSealed: false });
    yield opened.clear ? { table: r.table, row: { ...r.row, key_set: sealAssertionKeySet(opened.set, kek, random) } } : r;
  }
}

/** Whether a stored key set holds a private key in the clear (a set that does not parse is left to the target's nodes to refuse). */
function keySetIsClear(text: string): boolean {
  try {
    return openAssertionKeySet(text, []).clear;
  } catch {
    return false;
  }
}

async function* checkedChain(rows: AsyncIterable<ControlStateRow>, source: { seq: number; hash: string } | null) {
  let prev = GENESIS_HASH;
  let seq = 0;
  for await (const item of rows) {
    if (item.table === 'audit_events') {
      const event = toEvent(item.row as unknown as EventRow);
      const resealed = sealAuditEvent(event, seq, prev);
      if (event.seq !== seq + 1 || event.prevHash !== prev || resealed.hash !== event.hash) {
        throw new RuntimeError(
          `migration refused: the audit chain of the source changed while it was copied (event #${event.seq} does not verify); nothing was committed to the target`,
        );
      }
      prev = event.hash;
      seq = event.seq;
    }
    yield item;
  }
  if ((source?.seq ?? 0) !== seq || (source !== null && source.hash !== prev)) {
    throw new RuntimeError(
      'migration refused: the source was written while it was copied (is a service running on it?); nothing was committed to the target',
    );
  }
}

function describeModule(project: Project, module: ModuleConfig): string {
  const file = embeddedStoreFile(project, module);
  return file === null ? `${module.package} (:svc/modules :${module.alias})` : file;
}

/**
 * Refuses while a process has the embedded control database `file` open (a running service):
 * the SQLite lock taken without waiting, as a restore takes it, and let go at once.
 */
function refuseInUse(file: string, role: string): void {
  try {
    lockSqliteStore(file).release();
  } catch (error) {
    if (error instanceof StoreBackupError && error.problem === 'in_use') {
      throw new RuntimeError(
        `migration refused: the ${role} control database ${file} is in use (is \`svc serve\` running on this project?); stop the service first`,
      );
    }
    // Anything else (an empty file a refused move left, a file of another kind) is for the store
    // to judge when it opens the file: this check is only about a running service.
    if (!(error instanceof StoreBackupError)) throw error;
  }
}

/**
 * Copies the project's whole control state from its store (`:auth/store`) into the store module
 * `to` of the same project.edn, which must hold no control state: users, groups, SCIM tokens,
 * devices, links (passkeys, OIDC), bootstrap tokens and pairing intents as they are (used ones
 * stay used), the audit chain verbatim (same ids and hashes, so exported checkpoints stay valid),
 * and with `sessions` the live sessions and what keeps them signed in. Refused, with the
 * target untouched, while a service runs on the source, when the source's chain does not verify,
 * and when the target is not empty. The target's chain is verified after the copy and continued
 * with a `store.migrated` event (from, to, counts, who). The source is left as it was.
 *
 * @example
 * const moved = await migrateProjectStore(project, { to: 'pg', sessions: true });
 */
export async function migrateProjectStore(
  project: Project,
  opts: { readonly to: string; readonly sessions: boolean; readonly now?: () => number },
): Promise<StoreMigration> {
  const now = opts.now ?? Date.now;
  const source = project.config.store;
  const target = project.config.modules[opts.to.replace(/^:/, '')];
  if (target === undefined) {
    throw new RuntimeError(`migration refused: :${opts.to.replace(/^:/, '')} is not a module alias in ${project.file} (:svc/modules)`);
  }
  if (!target.activate.includes('svc/store') || target.package === null) {
    throw new RuntimeError(`migration refused: module :${target.alias} does not activate a store package's :svc/store export`);
  }
  if (target.alias === source.alias) {
    throw new RuntimeError(`migration refused: :${target.alias} is already the project's store (:auth/store); name another store module`);
  }
  const sourceFile = embeddedStoreFile(project, source);
  const targetFile = embeddedStoreFile(project, target);
  if (sourceFile !== null && targetFile !== null && resolve(sourceFile) === resolve(targetFile)) {
    throw new RuntimeError(`migration refused: :${target.alias} names the same control database ${sourceFile} as :${source.alias}`);
  }
  if (sourceFile !== null && existsSync(sourceFile)) refuseInUse(sourceFile, 'source');

  const from = await openControlStore(project, { create: false });
  try {
    const events: AuditEvent[] = [];
    for await (const event of allAuditEvents(from)) events.push(event);
    const chain = verifyAuditChain(events);
    if (!chain.ok) {
      throw new RuntimeError(
        `migration refused: the audit chain of the source is broken at event #${chain.seq} (${chain.problem}); the control state was altered outside svc, restore it from a backup first`,
      );
    }
    const head = events.length === 0 ? null : { seq: chain.length, hash: chain.head };
    const at = now();
    const live = await from.listActiveSessions({ now: at });
    // A shared store keeps the assertion keys sealed: a clear set (SQLite without a KEK) is sealed
    // on the way, under the project's :svc/key-encryption-key, which must be set first.
    const keys = targetFile === null ? await from.getAssertionKeys() : null;
    const custody = keys === null ? { keks: [] } : assertionKeyCustody(project);
    const kek = custody.keks[0] ?? null;
    const sealKeys = keys !== null && keySetIsClear(keys.keySet);
    if (sealKeys && kek === null) {
      throw new RuntimeError(
        `migration refused: the assertion keys are kept in the clear in ${describeModule(project, source)}, and ${describeModule(project, target)} keeps them sealed; set :svc/key-encryption-key in ${project.file} (#svc/secret "env:NAME" holding 32 random bytes: openssl rand -base64 32) and migrate again`,
      );
    }
    if (targetFile !== null && existsSync(targetFile)) refuseInUse(targetFile, 'target');
    const to = await openControlStore(project, { create: true, module: target });
    try {
      let rows: AsyncIterable<ControlStateRow>;
      try {
        rows = await from.exportState({ sessions: opts.sessions });
      } catch (error) {
        // A PostgreSQL source still used by running nodes (svc-store-postgres's StoreInUseError).
        if ((error as { code?: unknown }).code === 'store_in_use') {
          throw new RuntimeError(`migration refused: ${(error as Error).message}`, { cause: error });
        }
        throw error;
      }
      const outcome = await to.importState(
        checkedChain(sealKeys && kek !== null ? sealedAssertionKeys(rows, kek, custody.keks) : rows, head),
      );
      if (outcome.kind === 'not_empty') {
        throw new RuntimeError(
          `migration refused: the target store ${describeModule(project, target)} already holds control state (table ${outcome.table}); migrate only into an empty store`,
        );
      }
      const copied: AuditEvent[] = [];
      for await (const event of allAuditEvents(to)) copied.push(event);
      const after = verifyAuditChain(copied);
      if (!after.ok || after.length !== chain.length || after.head !== chain.head) {
        throw new RuntimeError(
          `the copy's audit chain does not match the source's (${after.ok ? `head ${after.head} at #${after.length}` : `broken at #${after.seq}: ${after.problem}`}); the target ${describeModule(project, target)} must be emptied before another attempt`,
        );
      }
      const counts = outcome.counts;
      const data: Record<string, string | number | boolean | null> = {
        via: 'cli',
        by: userInfo().username,
        from: `${source.package} (:${source.alias})`,
        to: `${target.package} (:${target.alias})`,
        sessions: opts.sessions,
        live_sessions_left: opts.sessions ? 0 : live.length,
        source_head: chain.head,
        ...(sealKeys && kek !== null ? { assertion_keys_sealed_with: kek.id } : {}),
      };
      for (const [table, n] of Object.entries(counts)) data[`copied_${table}`] = n;
      const clock = { now };
      await to.appendAuditEvent(auditDraft({ clock, random }, 'store.migrated', { data }));
      const final = await to.auditHead();
      return {
        from: source.alias,
        to: target.alias,
        fromPackage: source.package as string,
        toPackage: target.package,
        sessions: opts.sessions,
        liveSessionsLeft: opts.sessions ? 0 : live.length,
        counts,
        auditEvents: final?.seq ?? 0,
        auditHead: final?.hash ?? GENESIS_HASH,
      };
    } finally {
      await to.close();
    }
  } finally {
    await from.close();
  }
}

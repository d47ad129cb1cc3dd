// The memory store's control state as core's store-neutral rows, and back: what its maps hold,
// in the columns the SQL stores keep (see `Store.exportState` / `Store.importState`).
import type { AuditData, AuditEvent, Realm } from '@svc/core';
import {
  byKey,
  type ChallengeRecord,
  type ControlStateRow,
  type ControlTable,
  type ControlValue,
  type DeviceRecord,
  type ExportOptions,
  exportedTables,
  type FlowRecord,
  type GroupRecord,
  type HandoffCodeRecord,
  type LinkRecord,
  type PairingIntentRecord,
  type RefreshRow,
  type ScimTokenRecord,
  toUser,
  type UserRecord,
  type UserRow,
  userRowOf,
} from '@svc/core/store';

type Row = Readonly<Record<string, ControlValue>>;

/** The maps of a memory store that make up its control state (attempt budgets are not part of it). */
export interface MemoryControlData {
  project: { readonly projectId: string; readonly createdAt: number } | null;
  assertionKeys: { readonly version: number; readonly keySet: string; readonly updatedAt: number } | null;
  readonly handoffCodes: Map<string, { readonly record: HandoffCodeRecord; readonly usedAt: number | null }>;
  readonly bootstrap: Map<
    string,
    {
      readonly id: string;
      readonly createdAt: number;
      readonly deviceId: string | null;
      readonly usedAt: number | null;
      readonly supersededAt: number | null;
      readonly expiresAt: number;
    }
  >;
  readonly devices: Map<string, DeviceRecord>;
  readonly challenges: Map<string, { readonly record: ChallengeRecord; readonly usedAt: number | null }>;
  readonly sessions: Map<string, { readonly row: RefreshRow; readonly accessDigest: string }>;
  readonly retired: Map<string, Map<string, number>>;
  readonly events: AuditEvent[];
  readonly counts: Map<string, number>;
  readonly intents: Map<string, PairingIntentRecord>;
  readonly links: Map<string, LinkRecord>;
  readonly flows: Map<string, { readonly record: FlowRecord; readonly consumedAt: number | null }>;
  readonly dpopProofs: Map<string, number>;
  readonly users: Map<string, UserRecord>;
  readonly groups: Map<string, GroupRecord>;
  readonly scimTokens: Map<string, ScimTokenRecord>;
}

/** The rows of one table, unordered. */
function tableRows(d: MemoryControlData, name: string): Row[] {
  switch (name) {
    case 'assertion_keys':
      return d.assertionKeys === null
        ? []
        : [{ singleton: 1, version: d.assertionKeys.version, key_set: d.assertionKeys.keySet, updated_at: d.assertionKeys.updatedAt }];
    case 'project':
      return d.project === null ? [] : [{ project_id: d.project.projectId, created_at: d.project.createdAt }];
    case 'users':
      return [...d.users.values()].map((u) => ({ ...userRowOf(u), email_verified: u.emailVerified }));
    case 'groups':
      return [...d.groups.values()].map((g) => ({
        id: g.id,
        realm: g.realm,
        name: g.name,
        external_id: g.externalId,
        created_at: g.createdAt,
        updated_at: g.updatedAt,
      }));
    case 'scim_tokens':
      return [...d.scimTokens.values()].map((s) => ({
        id: s.id,
        digest: s.digest,
        name: s.name,
        created_at: s.createdAt,
        created_by: s.createdBy,
        last_used_at: s.lastUsedAt,
        revoked_at: s.revokedAt,
      }));
    case 'devices':
      return [...d.devices.values()].map((v) => ({
        id: v.id,
        public_key: v.publicKey,
        realm: v.realm,
        subject: v.subject,
        name: v.name,
        created_at: v.createdAt,
        removed_at: v.removedAt,
      }));
    case 'links':
      return [...d.links.values()].map((l) => ({
        id: l.id,
        realm: l.realm,
        subject: l.subject,
        provider: l.provider,
        issuer: l.issuer,
        external_subject: l.externalSubject,
        credential_data: l.credentialData,
        counter: l.counter,
        name: l.name,
        created_at: l.createdAt,
        last_used_at: l.lastUsedAt,
        removed_at: l.removedAt,
      }));
    case 'bootstrap_tokens':
      return [...d.bootstrap.entries()].map(([digest, b]) => ({
        id: b.id,
        digest,
        created_at: b.createdAt,
        expires_at: b.expiresAt,
        used_at: b.usedAt,
        superseded_at: b.supersededAt,
        device_id: b.deviceId,
      }));
    case 'pairing_intents':
      return [...d.intents.values()].map((p) => ({
        id: p.id,
        realm: p.realm,
        subject: p.subject,
        name: p.name,
        code_digest: p.codeDigest,
        created_at: p.createdAt,
        expires_at: p.expiresAt,
        created_by: p.createdBy,
        failures: p.failures,
        completed_at: p.completedAt,
        burned_at: p.burnedAt,
        device_id: p.deviceId,
        prepared_by_node: p.preparedByNode,
      }));
    case 'audit_events':
      return d.events.map((e) => ({
        seq: e.seq,
        id: e.id,
        at: e.at,
        type: e.type,
        realm: e.realm,
        subject: e.subject,
        device_id: e.deviceId,
        session_id: e.sessionId,
        data: JSON.stringify(e.data),
        prev_hash: e.prevHash,
        hash: e.hash,
      }));
    case 'audit_counts':
      return [...d.counts.entries()].map(([type, n]) => ({ type, n }));
    case 'sessions':
      return [...d.sessions.values()].map(({ row: r, accessDigest }) => ({
        id: r.id,
        realm: r.realm,
        subject: r.subject,
        device_id: r.device_id,
        created_at: r.created_at,
        expires_at: r.expires_at,
        access_digest: accessDigest,
        access_expires_at: r.access_expires_at,
        refresh_digest: r.refresh_digest,
        refresh_expires_at: r.refresh_expires_at,
        prev_refresh_digest: r.prev_refresh_digest,
        prev_rotated_at: r.prev_rotated_at,
        generation: r.generation,
        last_rotated_at: r.last_rotated_at,
        revoked_at: r.revoked_at,
        revoked_reason: r.revoked_reason,
        prev_successor: r.prev_successor,
        client_address: r.client_address,
        user_agent: r.user_agent,
        amr: r.amr,
        jkt: r.jkt ?? null,
        parent_id: r.parent_id ?? null,
      }));
    case 'handoff_codes':
      return [...d.handoffCodes.values()].map(({ record: c, usedAt }) => ({
        digest: c.digest,
        session_id: c.sessionId,
        origin: c.origin,
        binding_digest: c.bindingDigest,
        created_at: c.createdAt,
        expires_at: c.expiresAt,
        used_at: usedAt,
      }));
    case 'retired_refresh_tokens':
      return [...d.retired.entries()].flatMap(([sessionId, digests]) =>
        [...digests.entries()].map(([digest, retiredAt]) => ({ session_id: sessionId, digest, retired_at: retiredAt })),
      );
    case 'challenges':
      return [...d.challenges.values()].map(({ record: c, usedAt }) => ({
        id: c.id,
        public_key: c.publicKey,
        realm: c.realm,
        challenge: c.challenge,
        created_at: c.createdAt,
        expires_at: c.expiresAt,
        used_at: usedAt,
      }));
    case 'flows':
      return [...d.flows.values()].map(({ record: f, consumedAt }) => ({
        id: f.id,
        provider: f.provider,
        realm: f.realm,
        intent: f.intent,
        subject: f.subject,
        pairing_intent_id: f.pairingIntentId,
        state: f.state,
        created_at: f.createdAt,
        expires_at: f.expiresAt,
        consumed_at: consumedAt,
      }));
    case 'dpop_proofs':
      return [...d.dpopProofs.entries()].map(([key, expiresAt]) => ({ proof_key: key, expires_at: expiresAt }));
    default:
      throw new TypeError(`the memory store does not know the control-state table ${name}`);
  }
}

/**
 * The memory store's rows, as an export reads them: taken in one synchronous step (the
 * snapshot), then handed out in import order, each table by its key.
 */
export function exportMemoryState(d: MemoryControlData, opts: ExportOptions): AsyncIterable<ControlStateRow> {
  const snapshot: ControlStateRow[] = [];
  for (const table of exportedTables(opts)) {
    for (const row of tableRows(d, table.name).sort(byKey(table))) {
      snapshot.push({ table: table.name as ControlStateRow['table'], row: Object.freeze(row) });
    }
  }
  return (async function* () {
    yield* snapshot;
  })();
}

/** Whether the memory store holds any control state: the first table with a row, or null. */
export function firstNonEmptyMemoryTable(d: MemoryControlData): string | null {
  for (const table of exportedTables({ sessions: true })) if (tableRows(d, table.name).length > 0) return table.name;
  return null;
}

// The row was checked (`checkControlRow`): every column is there, of its kind.
const s = (v: ControlValue | undefined): string => v as string;
const sn = (v: ControlValue | undefined): string | null => v as string | null;
const n = (v: ControlValue | undefined): number => v as number;
const nn = (v: ControlValue | undefined): number | null => v as number | null;

/** Puts one checked neutral row into the maps. */
export function importMemoryRow(d: MemoryControlData, table: ControlTable, r: Row): void {
  switch (table.name) {
    case 'assertion_keys':
      d.assertionKeys = Object.freeze({ version: n(r.version), keySet: s(r.key_set), updatedAt: n(r.updated_at) });
      return;
    case 'project':
      d.project = Object.freeze({ projectId: s(r.project_id), createdAt: n(r.created_at) });
      return;
    case 'users': {
      const row = { ...r, email_verified: r.email_verified === true ? 1 : 0 } as unknown as UserRow;
      d.users.set(s(r.subject), toUser(row));
      return;
    }
    case 'groups':
      d.groups.set(
        s(r.id),
        Object.freeze({
          id: s(r.id),
          realm: s(r.realm) as Realm,
          name: s(r.name),
          externalId: sn(r.external_id),
          createdAt: n(r.created_at),
          updatedAt: n(r.updated_at),
        }),
      );
      return;
    case 'scim_tokens':
      d.scimTokens.set(
        s(r.id),
        Object.freeze({
          id: s(r.id),
          digest: s(r.digest),
          name: s(r.name),
          createdAt: n(r.created_at),
          createdBy: sn(r.created_by),
          lastUsedAt: nn(r.last_used_at),
          revokedAt: nn(r.revoked_at),
        }),
      );
      return;
    case 'devices':
      d.devices.set(
        s(r.id),
        Object.freeze({
          id: s(r.id),
          publicKey: s(r.public_key),
          realm: s(r.realm) as Realm,
          subject: s(r.subject),
          name: s(r.name),
          createdAt: n(r.created_at),
          removedAt: nn(r.removed_at),
        }),
      );
      return;
    case 'links':
      d.links.set(
        s(r.id),
        Object.freeze({
          id: s(r.id),
          realm: s(r.realm) as Realm,
          subject: s(r.subject),
          provider: s(r.provider),
          issuer: s(r.issuer),
          externalSubject: s(r.external_subject),
          credentialData: sn(r.credential_data),
          counter: nn(r.counter),
          name: s(r.name),
          createdAt: n(r.created_at),
          lastUsedAt: nn(r.last_used_at),
          removedAt: nn(r.removed_at),
        }),
      );
      return;
    case 'bootstrap_tokens':
      d.bootstrap.set(s(r.digest), {
        id: s(r.id),
        createdAt: n(r.created_at),
        expiresAt: n(r.expires_at),
        usedAt: nn(r.used_at),
        supersededAt: nn(r.superseded_at),
        deviceId: sn(r.device_id),
      });
      return;
    case 'pairing_intents':
      d.intents.set(
        s(r.id),
        Object.freeze({
          id: s(r.id),
          realm: s(r.realm) as Realm,
          subject: s(r.subject),
          name: sn(r.name),
          codeDigest: s(r.code_digest),
          createdAt: n(r.created_at),
          expiresAt: n(r.expires_at),
          createdBy: s(r.created_by),
          failures: n(r.failures),
          completedAt: nn(r.completed_at),
          burnedAt: nn(r.burned_at),
          deviceId: sn(r.device_id),
          preparedByNode: sn(r.prepared_by_node),
        }),
      );
      return;
    case 'audit_events':
      d.events.push(
        Object.freeze({
          seq: n(r.seq),
          id: s(r.id),
          at: n(r.at),
          type: s(r.type) as AuditEvent['type'],
          realm: sn(r.realm) as Realm | null,
          subject: sn(r.subject),
          deviceId: sn(r.device_id),
          sessionId: sn(r.session_id),
          data: Object.freeze(JSON.parse(s(r.data)) as AuditData),
          prevHash: s(r.prev_hash),
          hash: s(r.hash),
        }),
      );
      return;
    case 'audit_counts':
      d.counts.set(s(r.type), n(r.n));
      return;
    case 'sessions': {
      const { access_digest, ...rest } = r;
      d.sessions.set(s(r.id), { row: { ...rest, jkt: sn(r.jkt) } as unknown as RefreshRow, accessDigest: s(access_digest ?? null) });
      return;
    }
    case 'handoff_codes':
      d.handoffCodes.set(s(r.digest), {
        record: Object.freeze({
          digest: s(r.digest),
          sessionId: s(r.session_id),
          origin: s(r.origin),
          bindingDigest: s(r.binding_digest),
          createdAt: n(r.created_at),
          expiresAt: n(r.expires_at),
        }),
        usedAt: nn(r.used_at),
      });
      return;
    case 'retired_refresh_tokens': {
      const digests = d.retired.get(s(r.session_id)) ?? new Map<string, number>();
      digests.set(s(r.digest), n(r.retired_at));
      d.retired.set(s(r.session_id), digests);
      return;
    }
    case 'challenges':
      d.challenges.set(s(r.id), {
        record: Object.freeze({
          id: s(r.id),
          publicKey: s(r.public_key),
          realm: s(r.realm) as Realm,
          challenge: s(r.challenge),
          createdAt: n(r.created_at),
          expiresAt: n(r.expires_at),
        }),
        usedAt: nn(r.used_at),
      });
      return;
    case 'flows':
      d.flows.set(s(r.id), {
        record: Object.freeze({
          id: s(r.id),
          provider: s(r.provider),
          realm: s(r.realm) as Realm,
          intent: s(r.intent) as FlowRecord['intent'],
          subject: sn(r.subject),
          pairingIntentId: sn(r.pairing_intent_id),
          state: s(r.state),
          createdAt: n(r.created_at),
          expiresAt: n(r.expires_at),
        }),
        consumedAt: nn(r.consumed_at),
      });
      return;
    case 'dpop_proofs':
      d.dpopProofs.set(s(r.proof_key), n(r.expires_at));
      return;
    default:
      throw new TypeError(`the memory store does not know the control-state table ${table.name}`);
  }
}

/** Moves everything `staged` holds into `d` (an empty store): the commit of an import. */
export function commitMemoryState(d: MemoryControlData, staged: MemoryControlData): void {
  d.project = staged.project;
  d.assertionKeys = staged.assertionKeys;
  const move = <K, V>(from: Map<K, V>, to: Map<K, V>) => {
    for (const [k, v] of from) to.set(k, v);
  };
  move(staged.bootstrap, d.bootstrap);
  move(staged.devices, d.devices);
  move(staged.challenges, d.challenges);
  move(staged.sessions, d.sessions);
  move(staged.handoffCodes, d.handoffCodes);
  move(staged.retired, d.retired);
  move(staged.counts, d.counts);
  move(staged.intents, d.intents);
  move(staged.links, d.links);
  move(staged.flows, d.flows);
  move(staged.dpopProofs, d.dpopProofs);
  move(staged.users, d.users);
  move(staged.groups, d.groups);
  move(staged.scimTokens, d.scimTokens);
  d.events.push(...staged.events);
}

/** Empty maps to stage an import in. */
export function emptyMemoryControlData(): MemoryControlData {
  return {
    project: null,
    assertionKeys: null,
    handoffCodes: new Map(),
    bootstrap: new Map(),
    devices: new Map(),
    challenges: new Map(),
    sessions: new Map(),
    retired: new Map(),
    events: [],
    counts: new Map(),
    intents: new Map(),
    links: new Map(),
    flows: new Map(),
    dpopProofs: new Map(),
    users: new Map(),
    groups: new Map(),
    scimTokens: new Map(),
  };
}

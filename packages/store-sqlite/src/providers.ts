// The SQLite store's operations on provider links and flows (see `SqliteStore`, whose methods call these).
import type { AuditEventDraft, Realm } from '@svc/core';
import { consumableFlowSql, counterAdvanceSql, FLOW_COLUMNS, INTENT_COLUMNS, LINK_COLUMNS, liveSessionSql } from '@svc/core/sql-rows';
import {
  decideIntentUsers,
  decidePairingCompletion,
  type FlowRecord,
  type FlowRow,
  type IntentRow,
  isCounterAdvance,
  type LinkRecord,
  type LinkRow,
  type LinkSessionOutcome,
  latestTrustedTime,
  REVOKED_LINK_REMOVED,
  type Store,
  toFlow,
  toIntent,
  toLink,
  toUser,
  type UserRecord,
} from '@svc/core/store';
import type Database from 'better-sqlite3';
import type { SqliteContext } from './context.js';

/** The statements of this module, prepared once per connection. */
function prepare(db: Database.Database) {
  // Each statement declares its parameters and row, so reads need no casts.
  const p = <Params extends unknown[] | object = [], Row = unknown>(sql: string) => db.prepare<Params, Row>(sql);
  return {
    revokeDeviceSessions: p<{ now: number; deviceId: string; reason: string }>(
      `UPDATE sessions SET revoked_at = @now, revoked_reason = @reason, prev_successor = NULL WHERE device_id = @deviceId AND ${liveSessionSql('@now')}`,
    ),
    intentById: p<[string], IntentRow>(`SELECT ${INTENT_COLUMNS} FROM pairing_intents WHERE id = ?`),
    completeLinkIntent: p<{ id: string; now: number }>('UPDATE pairing_intents SET completed_at = @now WHERE id = @id'),
    insertLink: p<LinkRecord>(
      `INSERT INTO links (${LINK_COLUMNS})
       VALUES (@id, @realm, @subject, @provider, @issuer, @externalSubject, @credentialData, @counter, @name, @createdAt, @lastUsedAt, NULL)
       ON CONFLICT (realm, issuer, external_subject) WHERE removed_at IS NULL DO NOTHING`,
    ),
    linkById: p<[string], LinkRow>(`SELECT ${LINK_COLUMNS} FROM links WHERE id = ?`),
    liveLink: p<{ realm: Realm; issuer: string; externalSubject: string }, LinkRow>(
      `SELECT ${LINK_COLUMNS} FROM links WHERE realm = @realm AND issuer = @issuer AND external_subject = @externalSubject AND removed_at IS NULL`,
    ),
    listLinks: p<{ realm: Realm | null; subject: string | null; provider: string | null }, LinkRow>(
      `SELECT ${LINK_COLUMNS} FROM links
       WHERE removed_at IS NULL AND (@realm IS NULL OR realm = @realm) AND (@subject IS NULL OR subject = @subject)
         AND (@provider IS NULL OR provider = @provider)
       ORDER BY created_at, id`,
    ),
    removeLink: p<[number, string]>('UPDATE links SET removed_at = ? WHERE id = ? AND removed_at IS NULL'),
    // The other live links and active devices of a live link's subject in its realm (no row: the link is not live).
    otherWaysIn: p<{ id: string }, { n: number }>(
      `SELECT (SELECT count(*) FROM links o WHERE o.realm = l.realm AND o.subject = l.subject AND o.removed_at IS NULL AND o.id <> l.id)
            + (SELECT count(*) FROM devices d WHERE d.realm = l.realm AND d.subject = l.subject AND d.removed_at IS NULL) AS n
       FROM links l WHERE l.id = @id AND l.removed_at IS NULL`,
    ),
    renameLink: p<[string, string]>('UPDATE links SET name = ? WHERE id = ? AND removed_at IS NULL'),
    // The one conditional update of a link sign-in: live, and the counter advances (or is left alone).
    useLink: p<{ id: string; now: number; counter: number | null }>(
      `UPDATE links SET counter = @counter, last_used_at = @now WHERE id = @id AND removed_at IS NULL AND ${counterAdvanceSql('@counter')}`,
    ),
    touchLink: p<{ id: string; now: number }>('UPDATE links SET last_used_at = @now WHERE id = @id AND removed_at IS NULL'),
    pruneFlows: p<[number]>('DELETE FROM flows WHERE expires_at <= ?'),
    insertFlow: p<FlowRecord>(
      `INSERT INTO flows (${FLOW_COLUMNS})
       VALUES (@id, @provider, @realm, @intent, @subject, @pairingIntentId, @state, @createdAt, @expiresAt)`,
    ),
    consumeFlow: p<{ id: string; now: number; latest: number }, FlowRow>(
      `UPDATE flows SET consumed_at = @now WHERE id = @id AND ${consumableFlowSql('@now', '@latest')} RETURNING ${FLOW_COLUMNS}`,
    ),
  };
}

/** The SQLite store's operations on provider links and flows, on the store's connection. */
export class SqliteProviders {
  readonly #ctx: SqliteContext;
  readonly #s: ReturnType<typeof prepare>;

  constructor(ctx: SqliteContext) {
    this.#ctx = ctx;
    this.#s = prepare(ctx.db);
  }

  async createLink(
    link: LinkRecord,
    event: AuditEventDraft | readonly AuditEventDraft[],
    pairing?: Parameters<Store['createLink']>[2],
    user?: UserRecord,
  ): Promise<'created' | 'already_linked' | 'intent_invalid' | 'user_disabled'> {
    if (user !== undefined && (user.subject !== link.subject || user.realm !== link.realm)) {
      throw new TypeError(`the user of link ${link.id} must have its subject and realm`);
    }
    return this.#ctx.writes.run((): 'created' | 'already_linked' | 'intent_invalid' | 'user_disabled' => {
      if (pairing !== undefined) {
        const intent = this.#s.intentById.get(pairing.id);
        const decision = decidePairingCompletion(intent && toIntent(intent), {
          codeDigest: pairing.codeDigest,
          now: pairing.now,
          keyTaken: false,
        });
        if (decision.kind !== 'complete') return 'intent_invalid';
        // A removed (no user) or disabled subject or creator: nothing written, never a user recreated.
        const users = decideIntentUsers(
          this.#ctx.userRow(link.subject)?.status ?? null,
          this.#ctx.userRow((intent as IntentRow).created_by)?.status ?? null,
        );
        if (users === 'invalid') return 'intent_invalid';
        if (users === 'user_disabled') return 'user_disabled';
      }
      const live = { realm: link.realm, issuer: link.issuer, externalSubject: link.externalSubject };
      if (this.#s.liveLink.get(live) !== undefined) return 'already_linked';
      if (this.#ctx.userRow(link.subject)?.status === 'disabled') return 'user_disabled';
      // The partial unique index decides: a live link of the same identity makes this a no-op.
      if (this.#s.insertLink.run(link).changes === 0) return 'already_linked';
      // A new subject's user (just in time), or the default one; an existing user is kept.
      if (user !== undefined) this.#ctx.insertUser(user);
      else this.#ctx.ensureUser(link.subject, link.realm, link.createdAt);
      // `device_id` stays null: it names devices only; the `link.created` event names the intent.
      if (pairing !== undefined) this.#s.completeLinkIntent.run({ id: pairing.id, now: pairing.now });
      for (const e of [event].flat()) this.#ctx.append(e);
      return 'created';
    }, true);
  }

  async getLink(id: string): Promise<LinkRecord | null> {
    const row = this.#s.linkById.get(id);
    return row === undefined ? null : toLink(row);
  }

  async findLiveLink(input: {
    readonly realm: Realm;
    readonly issuer: string;
    readonly externalSubject: string;
  }): Promise<LinkRecord | null> {
    const row = this.#s.liveLink.get({ realm: input.realm, issuer: input.issuer, externalSubject: input.externalSubject });
    return row === undefined ? null : toLink(row);
  }

  async listLinks(filter: {
    readonly realm?: Realm;
    readonly subject?: string;
    readonly provider?: string;
  }): Promise<readonly LinkRecord[]> {
    return this.#s.listLinks
      .all({ realm: filter.realm ?? null, subject: filter.subject ?? null, provider: filter.provider ?? null })
      .map(toLink);
  }

  async removeLink(
    input: { readonly linkId: string; readonly now: number; readonly keepAnotherWayIn?: boolean },
    event: AuditEventDraft,
  ): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly lastWayIn?: boolean }> {
    return this.#ctx.writes.run((): { removed: boolean; revokedSessions: number; lastWayIn?: boolean } => {
      // Writes are serialised: the count and the removal see the same state.
      if (input.keepAnotherWayIn === true && (this.#s.otherWaysIn.get({ id: input.linkId })?.n ?? 1) === 0) {
        return { removed: false, revokedSessions: 0, lastWayIn: true };
      }
      if (this.#s.removeLink.run(input.now, input.linkId).changes === 0) return { removed: false, revokedSessions: 0 };
      this.#ctx.cache.clear();
      const revoked = this.#s.revokeDeviceSessions.run({ deviceId: input.linkId, now: input.now, reason: REVOKED_LINK_REMOVED }).changes;
      this.#ctx.append(event);
      return { removed: true, revokedSessions: revoked };
    }, true);
  }

  async renameLink(input: { readonly linkId: string; readonly name: string }, event: AuditEventDraft): Promise<boolean> {
    return this.#ctx.writes.run(() => {
      if (this.#s.renameLink.run(input.name, input.linkId).changes === 0) return false;
      this.#ctx.append(event);
      return true;
    }, true);
  }

  async createLinkSession(
    input: Parameters<Store['createLinkSession']>[0],
    events: readonly AuditEventDraft[],
  ): Promise<LinkSessionOutcome> {
    return this.#ctx.writes.run((): LinkSessionOutcome => {
      const { session, now } = input;
      // Inside the write transaction (one writer at a time): the link's and the user's state
      // cannot change between these reads, the conditional update and the session's insert.
      const link = this.#s.linkById.get(session.deviceId);
      if (link === undefined || link.removed_at !== null) return { kind: 'link_removed' };
      if (input.counter !== 'unchanged' && !isCounterAdvance(link.counter, input.counter)) {
        return { kind: 'counter_regressed', stored: link.counter };
      }
      const row = this.#ctx.userRow(link.subject);
      if (row?.status === 'disabled') return { kind: 'user_disabled' };
      // Decided before anything is written (a refresh that throws rolls this write back anyway).
      const refreshed = input.refresh === undefined ? null : input.refresh(row === undefined ? null : toUser(row));
      if (refreshed !== null && (refreshed.user.subject !== link.subject || refreshed.user.realm !== link.realm)) {
        throw new Error('a refreshed user must keep its subject and realm');
      }
      const used =
        input.counter === 'unchanged'
          ? this.#s.touchLink.run({ id: link.id, now }).changes
          : this.#s.useLink.run({ id: link.id, now, counter: input.counter }).changes;
      if (used === 0) return { kind: 'counter_regressed', stored: link.counter };
      this.#ctx.insertSession(session, input.pair);
      if (refreshed !== null) this.#ctx.writeUser(refreshed.user);
      this.#ctx.signedIn(link.subject, now);
      for (const event of events) this.#ctx.append(event);
      for (const event of refreshed?.events ?? []) this.#ctx.append(event);
      return { kind: 'created' };
    });
  }

  async createFlow(flow: FlowRecord): Promise<void> {
    await this.#ctx.writes.run(() => {
      // Expired flows can never be consumed again, so they are only clutter.
      this.#s.pruneFlows.run(flow.createdAt);
      this.#s.insertFlow.run({
        id: flow.id,
        provider: flow.provider,
        realm: flow.realm,
        intent: flow.intent,
        subject: flow.subject,
        pairingIntentId: flow.pairingIntentId,
        state: flow.state,
        createdAt: flow.createdAt,
        expiresAt: flow.expiresAt,
      });
    });
  }

  async consumeFlow(input: { readonly id: string; readonly now: number }): Promise<FlowRecord | null> {
    // One conditional UPDATE ... RETURNING: the first caller flips consumed_at, every other sees no row.
    const row = await this.#ctx.writes.run(() =>
      this.#s.consumeFlow.get({ id: input.id, now: input.now, latest: latestTrustedTime(input.now) }),
    );
    return row === undefined ? null : toFlow(row);
  }
}

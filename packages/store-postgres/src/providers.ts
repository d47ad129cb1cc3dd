// The PostgreSQL store's operations on provider links and flows (see `PostgresStore`, whose methods call these).
import type { AuditEventDraft, Realm } from '@svc/core';
import {
  consumableFlowSql,
  counterAdvanceSql,
  FLOW_COLUMNS,
  LINK_COLUMNS,
  liveIntentSql,
  liveSessionSql,
  USER_COLUMNS,
} from '@svc/core/sql-rows';
import {
  decideIntentUsers,
  defaultUser,
  type FlowRecord,
  type FlowRow,
  type LinkRecord,
  type LinkRow,
  type LinkSessionOutcome,
  latestTrustedTime,
  REVOKED_LINK_REMOVED,
  type Store,
  toFlow,
  toLink,
  toUser,
  type UserRecord,
  type UserRow,
} from '@svc/core/store';
import type { PgContext } from './context.js';
import { insertSession } from './sessions.js';
import { changes, first, rollback, rows, runReplicated, writtenRows } from './sql.js';
import { ensureUser, lockedIntentUsers, lockedUserStatus, writeUser } from './users.js';

export async function createLink(
  ctx: PgContext,
  link: LinkRecord,
  event: AuditEventDraft | readonly AuditEventDraft[],
  pairing?: Parameters<Store['createLink']>[2],
  user?: UserRecord,
): Promise<'created' | 'already_linked' | 'intent_invalid' | 'user_disabled'> {
  return ctx.tx(async (c): Promise<'created' | 'already_linked' | 'intent_invalid' | 'user_disabled'> => {
    let createdBy: string | null = null;
    if (pairing !== undefined) {
      // The one conditional update that decides which link completes the intent (device_id
      // stays null: it names devices only; the link.created event names the intent).
      const claimed = await first<{ created_by: string }>(
        c,
        `UPDATE pairing_intents SET completed_at = $3 WHERE id = $1 AND code_digest = $2 AND ${liveIntentSql('$3')} RETURNING created_by`,
        [pairing.id, pairing.codeDigest, pairing.now],
      );
      if (claimed === undefined) return 'intent_invalid';
      createdBy = claimed.created_by;
    }
    // The partial unique index decides, also between nodes: a concurrent insert of the same
    // identity waits for this one's commit, then does nothing.
    const inserted = await changes(
      c,
      `INSERT INTO links (${LINK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL)
       ON CONFLICT (realm, issuer, external_subject) WHERE removed_at IS NULL DO NOTHING`,
      [
        link.id,
        link.realm,
        link.subject,
        link.provider,
        link.issuer,
        link.externalSubject,
        link.credentialData,
        link.counter,
        link.name,
        link.createdAt,
        link.lastUsedAt,
      ],
    );
    // With an intent, its completion above goes back too: the code is not wasted.
    if (inserted === 0) return pairing === undefined ? 'already_linked' : rollback('already_linked' as const);
    if (createdBy !== null) {
      // An intent's subject and creator must both have a user, neither disabled: a removed one
      // (no row, maybe removed meanwhile) is never recreated; the intent's completion goes back.
      const locked = await lockedIntentUsers(c, link.subject, createdBy);
      const users = decideIntentUsers(locked.subject, locked.creator);
      if (users === 'invalid') return rollback('intent_invalid' as const);
      if (users === 'user_disabled') return rollback('user_disabled' as const);
    }
    // A disabled user gets no new credential (the intent's completion goes back too).
    const status = await lockedUserStatus(c, link.subject);
    if (status === 'disabled') return rollback('user_disabled' as const);
    if (user !== undefined && (user.subject !== link.subject || user.realm !== link.realm)) {
      throw new Error(`the user of link ${link.id} must have its subject and realm`);
    }
    if (status === null) await ensureUser(c, user ?? defaultUser({ subject: link.subject, realm: link.realm, now: link.createdAt }));
    for (const e of [event].flat()) await ctx.append(c, e);
    return 'created';
  });
}

export async function getLink(ctx: PgContext, id: string): Promise<LinkRecord | null> {
  const row = await first<LinkRow>(ctx.pool, `SELECT ${LINK_COLUMNS} FROM links WHERE id = $1`, [id]);
  return row === undefined ? null : toLink(row);
}

export async function findLiveLink(
  ctx: PgContext,
  input: {
    readonly realm: Realm;
    readonly issuer: string;
    readonly externalSubject: string;
  },
): Promise<LinkRecord | null> {
  const row = await first<LinkRow>(
    ctx.pool,
    `SELECT ${LINK_COLUMNS} FROM links WHERE realm = $1 AND issuer = $2 AND external_subject = $3 AND removed_at IS NULL`,
    [input.realm, input.issuer, input.externalSubject],
  );
  return row === undefined ? null : toLink(row);
}

export async function listLinks(
  ctx: PgContext,
  filter: {
    readonly realm?: Realm;
    readonly subject?: string;
    readonly provider?: string;
  },
): Promise<readonly LinkRecord[]> {
  const list = await rows<LinkRow>(
    ctx.pool,
    `SELECT ${LINK_COLUMNS} FROM links
     WHERE removed_at IS NULL AND ($1::text IS NULL OR realm = $1) AND ($2::text IS NULL OR subject = $2)
       AND ($3::text IS NULL OR provider = $3)
     ORDER BY created_at, id`,
    [filter.realm ?? null, filter.subject ?? null, filter.provider ?? null],
  );
  return list.map(toLink);
}

export async function removeLink(
  ctx: PgContext,
  input: { readonly linkId: string; readonly now: number; readonly keepAnotherWayIn?: boolean },
  event: AuditEventDraft,
): Promise<{ readonly removed: boolean; readonly revokedSessions: number; readonly lastWayIn?: boolean }> {
  return ctx.tx(async (c): Promise<{ removed: boolean; revokedSessions: number; lastWayIn?: boolean }> => {
    if (input.keepAnotherWayIn === true) {
      const link = await first<{ realm: string; subject: string }>(
        c,
        'SELECT realm, subject FROM links WHERE id = $1 AND removed_at IS NULL',
        [input.linkId],
      );
      if (link === undefined) return { removed: false, revokedSessions: 0 };
      // The subject's live links, locked in one order: a concurrent removal of another of them
      // waits here, then finds the one removed first gone (re-checked under the lock).
      const live = await c.query<{ id: string }>(
        'SELECT id FROM links WHERE realm = $1 AND subject = $2 AND removed_at IS NULL ORDER BY id COLLATE "C" FOR UPDATE',
        [link.realm, link.subject],
      );
      const devices = await first<{ n: string }>(
        c,
        'SELECT count(*) AS n FROM devices WHERE realm = $1 AND subject = $2 AND removed_at IS NULL',
        [link.realm, link.subject],
      );
      const others = live.rows.filter((r) => r.id !== input.linkId).length + Number(devices?.n ?? 0);
      if (others === 0) return { removed: false, revokedSessions: 0, lastWayIn: true };
    }
    // The row lock this update takes makes a concurrent createLinkSession wait, then see the link removed.
    const removed = await changes(c, 'UPDATE links SET removed_at = $2 WHERE id = $1 AND removed_at IS NULL', [input.linkId, input.now]);
    if (removed === 0) return { removed: false, revokedSessions: 0 };
    const revokedSessions = await changes(
      c,
      `UPDATE sessions SET revoked_at = $2, revoked_reason = $3, prev_successor = NULL WHERE device_id = $1 AND ${liveSessionSql('$2')}`,
      [input.linkId, input.now, REVOKED_LINK_REMOVED],
    );
    for (const e of [event].flat()) await ctx.append(c, e);
    return { removed: true, revokedSessions };
  });
}

export async function renameLink(
  ctx: PgContext,
  input: { readonly linkId: string; readonly name: string },
  event: AuditEventDraft,
): Promise<boolean> {
  return ctx.tx(async (c) => {
    const renamed = await changes(c, 'UPDATE links SET name = $2 WHERE id = $1 AND removed_at IS NULL', [input.linkId, input.name]);
    if (renamed === 0) return false;
    await ctx.append(c, event);
    return true;
  });
}

export async function createLinkSession(
  ctx: PgContext,
  input: Parameters<Store['createLinkSession']>[0],
  events: readonly AuditEventDraft[],
): Promise<LinkSessionOutcome> {
  const { session, now } = input;
  return ctx.tx(async (c): Promise<LinkSessionOutcome> => {
    // The one conditional update that decides: it locks the link row, so a concurrent removal
    // either waits for this session (and then revokes it) or commits first (and this matches
    // nothing); concurrent sign-ins presenting the same counter re-check the WHERE against the
    // winner's committed counter, and only one matches.
    const used =
      input.counter === 'unchanged'
        ? await first<{ subject: string; realm: Realm }>(
            c,
            'UPDATE links SET last_used_at = $2 WHERE id = $1 AND removed_at IS NULL RETURNING subject, realm',
            [session.deviceId, now],
          )
        : await first<{ subject: string; realm: Realm }>(
            c,
            `UPDATE links SET counter = $3, last_used_at = $2 WHERE id = $1 AND removed_at IS NULL AND ${counterAdvanceSql('$3::bigint')}
             RETURNING subject, realm`,
            [session.deviceId, now, input.counter],
          );
    if (used === undefined) {
      const link = await first<{ removed_at: number | null; counter: number | null }>(
        c,
        'SELECT removed_at, counter FROM links WHERE id = $1',
        [session.deviceId],
      );
      if (link === undefined || link.removed_at !== null) return { kind: 'link_removed' };
      return { kind: 'counter_regressed', stored: link.counter };
    }
    // The user row after the link row, as changeUser takes them, locked for the update of its
    // sign-in time (a share lock then an update would deadlock two sign-ins of one user): a
    // concurrent disable either commits first and is seen here, or waits and revokes this session.
    const row = await first<UserRow>(c, `SELECT ${USER_COLUMNS} FROM users WHERE subject = $1 FOR UPDATE`, [used.subject]);
    const current = row === undefined ? null : toUser(row);
    // Nothing is written: the counter's advance goes back too.
    if (current?.status === 'disabled') return rollback({ kind: 'user_disabled' });
    const refreshed = input.refresh === undefined ? null : input.refresh(current);
    if (refreshed !== null && (refreshed.user.subject !== used.subject || refreshed.user.realm !== used.realm)) {
      throw new Error('a refreshed user must keep its subject and realm');
    }
    if (refreshed !== null) await writeUser(c, { ...refreshed.user, lastSignInAt: now });
    else if (current !== null) await c.query('UPDATE users SET last_sign_in_at = $2 WHERE subject = $1', [used.subject, now]);
    await insertSession(ctx, c, session, input.pair);
    for (const event of events) await ctx.append(c, event);
    for (const event of refreshed?.events ?? []) await ctx.append(c, event);
    return { kind: 'created' };
  });
}

export async function createFlow(ctx: PgContext, flow: FlowRecord): Promise<void> {
  // Expired flows can never be consumed, so they are only clutter. SKIP LOCKED lets nodes
  // prune side by side without waiting for each other.
  await runReplicated(
    ctx.pool,
    `WITH pruned AS (
       DELETE FROM flows WHERE id = ANY(ARRAY(
         SELECT id FROM flows WHERE expires_at <= $8 ORDER BY expires_at LIMIT 500 FOR UPDATE SKIP LOCKED)
       )
     )
     INSERT INTO flows (${FLOW_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [flow.id, flow.provider, flow.realm, flow.intent, flow.subject, flow.pairingIntentId, flow.state, flow.createdAt, flow.expiresAt],
  );
}

export async function consumeFlow(ctx: PgContext, input: { readonly id: string; readonly now: number }): Promise<FlowRecord | null> {
  // One conditional UPDATE ... RETURNING: the first caller flips consumed_at; every concurrent
  // one blocks on the row, re-checks the WHERE against the committed row and matches nothing.
  const [row] = await writtenRows<FlowRow>(
    ctx.pool,
    `UPDATE flows SET consumed_at = $2 WHERE id = $1 AND ${consumableFlowSql('$2', '$3')} RETURNING ${FLOW_COLUMNS}`,
    [input.id, input.now, latestTrustedTime(input.now)],
  );
  return row === undefined ? null : toFlow(row);
}

// The PostgreSQL store's operations on users, group records and SCIM tokens (see `PostgresStore`,
// whose methods call these), and the user steps the credential-making operations share.
import { type AuditEventDraft, digestsEqual, type Realm } from '@svc/core';
import { burnSubjectIntentsSql, GROUP_COLUMNS, liveIntentSql, liveSessionSql, SCIM_TOKEN_COLUMNS, USER_COLUMNS } from '@svc/core/sql-rows';
import {
  defaultUser,
  type GroupRecord,
  type GroupRow,
  type GroupSummary,
  REVOKED_USER_REMOVED,
  type ScimTokenRecord,
  type ScimTokenRow,
  scimTokenUseIsDue,
  toGroup,
  toScimToken,
  toUser,
  type UserChange,
  type UserChangeContext,
  type UserChangeOutcome,
  type UserFilter,
  type UserRecord,
  type UserRow,
  userRowOf,
} from '@svc/core/store';
import type { PoolClient } from 'pg';
import type { PgContext } from './context.js';
import { changes, first, type Queryable, rollback, rows, writtenRows } from './sql.js';

/** The 16 values of {@link USER_COLUMNS}, in its order. */
function userValues(user: UserRecord): unknown[] {
  const r = userRowOf(user);
  return [
    r.subject,
    r.realm,
    r.user_name,
    r.external_id,
    r.name,
    r.name_source,
    r.email,
    r.email_verified === 1,
    r.email_source,
    r.groups,
    r.groups_source,
    r.status,
    r.created_at,
    r.updated_at,
    r.last_sign_in_at,
    r.disabled_at,
  ];
}

const USER_PARAMS = '$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16';

// Every column but the subject (and the realm, which never changes), from the 16 values.
const SET_USER = `user_name = $3, external_id = $4, name = $5, name_source = $6, email = $7, email_verified = $8,
  email_source = $9, groups = $10, groups_source = $11, status = $12, created_at = $13, updated_at = $14,
  last_sign_in_at = $15, disabled_at = $16`;

// The same, from the row an upsert proposed.
const SET_USER_EXCLUDED = USER_COLUMNS.split(', ')
  .slice(2)
  .map((column) => `${column} = EXCLUDED.${column}`)
  .join(', ');

/** Whether `err` is PostgreSQL's unique violation of the constraint or index `name`. */
function violates(err: unknown, name: string): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return typeof e === 'object' && e !== null && e.code === '23505' && e.constraint === name;
}

/** ASCII case folding in SQL, as core's `userMatches` folds (`lower` would fold more, by locale). */
function asciiFold(expr: string): string {
  return `translate(${expr}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')`;
}

function asciiLower(s: string): string {
  return s.replace(/[A-Z]/g, (c) => c.toLowerCase());
}

/**
 * The subject's user status, its row read under a share lock (a concurrent `changeUser` that
 * disables or removes it either commits first, and is seen, or waits for this transaction);
 * null when it has no user.
 */
export async function lockedUserStatus(c: PoolClient, subject: string): Promise<UserRecord['status'] | null> {
  const row = await first<{ status: UserRecord['status'] }>(c, 'SELECT status FROM users WHERE subject = $1 FOR SHARE', [subject]);
  return row?.status ?? null;
}

/**
 * The statuses of an intent's subject's user and of its creator's user, their rows read under a
 * share lock taken in subject order (as `changeUser` locks management users), so a completion
 * never deadlocks with a change; a concurrent disable or removal either commits first, and is
 * seen (a removed row reads as null: no user is ever recreated), or waits for this transaction.
 */
export async function lockedIntentUsers(
  c: PoolClient,
  subject: string,
  createdBy: string,
): Promise<{ readonly subject: UserRecord['status'] | null; readonly creator: UserRecord['status'] | null }> {
  const locked = await rows<{ subject: string; status: UserRecord['status'] }>(
    c,
    'SELECT subject, status FROM users WHERE subject = $1 OR subject = $2 ORDER BY subject COLLATE "C" FOR SHARE',
    [subject, createdBy],
  );
  const status = (s: string) => locked.find((u) => u.subject === s)?.status ?? null;
  return { subject: status(subject), creator: status(createdBy) };
}

/**
 * Creates `user` unless its subject has one (a concurrent creation of the same subject waits,
 * then does nothing). A `user_name` another user of the realm holds is a unique violation.
 */
export async function ensureUser(c: PoolClient, user: UserRecord): Promise<void> {
  await c.query(`INSERT INTO users (${USER_COLUMNS}) VALUES (${USER_PARAMS}) ON CONFLICT (subject) DO NOTHING`, userValues(user));
}

/** The subject's user, created (active, no attributes, created `now`) when it has none. */
export function ensureDefaultUser(
  c: PoolClient,
  input: { readonly subject: string; readonly realm: Realm; readonly now: number },
): Promise<void> {
  return ensureUser(c, defaultUser(input));
}

/** Writes `user` over the stored row of its subject, or inserts it; answers the row as written. */
export async function writeUser(c: PoolClient, user: UserRecord): Promise<UserRecord> {
  const row = await first<UserRow>(
    c,
    `INSERT INTO users (${USER_COLUMNS}) VALUES (${USER_PARAMS})
     ON CONFLICT (subject) DO UPDATE SET ${SET_USER_EXCLUDED}
     RETURNING ${USER_COLUMNS}`,
    userValues(user),
  );
  if (row === undefined) throw new Error(`user ${user.subject} was not written`);
  return toUser(row);
}

export async function getUser(ctx: PgContext, subject: string): Promise<UserRecord | null> {
  const row = await first<UserRow>(ctx.pool, `SELECT ${USER_COLUMNS} FROM users WHERE subject = $1`, [subject]);
  return row === undefined ? null : toUser(row);
}

export async function listUsers(ctx: PgContext, filter: UserFilter): Promise<readonly UserRecord[]> {
  // Ordered (and paged) by subject in code-point order, as core's rule compares (whatever the
  // database's collation); the text filter folds ASCII only, and matches literally (no LIKE).
  const text = filter.text === undefined ? null : asciiLower(filter.text);
  const contains = (column: string) => `(${column} IS NOT NULL AND strpos(${asciiFold(column)}, $7) > 0)`;
  const list = await rows<UserRow>(
    ctx.pool,
    `SELECT ${USER_COLUMNS} FROM users
     WHERE ($1::text IS NULL OR realm = $1) AND ($2::text IS NULL OR status = $2)
       AND ($3::text IS NULL OR groups::jsonb ? $3) AND ($4::text IS NULL OR email = $4)
       AND ($5::text IS NULL OR user_name = $5) AND ($6::text IS NULL OR external_id = $6)
       AND ($7::text IS NULL OR ${contains('name')} OR ${contains('email')} OR ${contains('user_name')})
       AND ($8::text IS NULL OR subject COLLATE "C" > $8::text COLLATE "C")
     ORDER BY subject COLLATE "C"
     LIMIT $9`,
    [
      filter.realm ?? null,
      filter.status ?? null,
      filter.group ?? null,
      filter.email ?? null,
      filter.userName ?? null,
      filter.externalId ?? null,
      text,
      filter.after ?? null,
      filter.limit,
    ],
  );
  return list.map(toUser);
}

export async function createUser(
  ctx: PgContext,
  user: UserRecord,
  event: AuditEventDraft,
): Promise<'created' | 'exists' | 'user_name_taken'> {
  return ctx.tx(async (c) => {
    // Any unique conflict does nothing (a concurrent insert is waited for): the subject's, or
    // the realm's userName index; which one is read after.
    const inserted = await changes(
      c,
      `INSERT INTO users (${USER_COLUMNS}) VALUES (${USER_PARAMS}) ON CONFLICT DO NOTHING`,
      userValues(user),
    );
    if (inserted === 0) {
      const known = await first(c, 'SELECT 1 FROM users WHERE subject = $1', [user.subject]);
      return known === undefined ? 'user_name_taken' : 'exists';
    }
    await ctx.append(c, event);
    return 'created';
  });
}

/** The users a `changeUser` of `subject` locks, with that subject's row among them (or not: unknown). */
async function lockForChange(
  c: PoolClient,
  subject: string,
  now: number,
): Promise<{ current: UserRow | undefined; context: UserChangeContext }> {
  // The subject's credentials first: a sign-in takes its device (or link) row, then its user
  // row, so taking them in the same order here means a removal racing a sign-in never deadlocks.
  // Before them, the live intents by or for the subject: a completion claims its intent first,
  // then its user rows, so a disable or removal burning them takes the same order.
  await c.query(
    `SELECT id FROM pairing_intents WHERE (subject = $1 OR created_by = $1) AND ${liveIntentSql('$2')} ORDER BY id FOR UPDATE`,
    [subject, now],
  );
  await c.query('SELECT id FROM devices WHERE subject = $1 AND removed_at IS NULL ORDER BY id FOR NO KEY UPDATE', [subject]);
  await c.query('SELECT id FROM links WHERE subject = $1 AND removed_at IS NULL ORDER BY id FOR NO KEY UPDATE', [subject]);
  const realm = await first<{ realm: Realm }>(c, 'SELECT realm FROM users WHERE subject = $1', [subject]);
  if (realm === undefined) return { current: undefined, context: { otherActiveManagementUsers: 0 } };
  if (realm.realm !== 'management') {
    const current = await first<UserRow>(c, `SELECT ${USER_COLUMNS} FROM users WHERE subject = $1 FOR UPDATE`, [subject]);
    return { current, context: { otherActiveManagementUsers: 0 } };
  }
  // Every active management user, and this one, locked in subject order (so two changes never
  // deadlock): a concurrent disable or removal of another waits here, then this re-reads the
  // rows as it committed them (READ COMMITTED re-checks a locked row's WHERE), and the count
  // below, a new statement, sees its devices and links as it left them. So of N concurrent
  // disables or removals of the last N, one is refused.
  const locked = await rows<UserRow>(
    c,
    `SELECT ${USER_COLUMNS} FROM users WHERE realm = 'management' AND (status = 'active' OR subject = $1)
     ORDER BY subject COLLATE "C" FOR UPDATE`,
    [subject],
  );
  const current = locked.find((u) => u.subject === subject);
  const others = await first<{ n: number }>(
    c,
    `SELECT COUNT(*)::int AS n FROM users u
     WHERE u.realm = 'management' AND u.status = 'active' AND u.subject <> $1
       AND (EXISTS (SELECT 1 FROM devices d WHERE d.subject = u.subject AND d.removed_at IS NULL)
         OR EXISTS (SELECT 1 FROM links l WHERE l.subject = u.subject AND l.removed_at IS NULL))`,
    [subject],
  );
  return { current, context: { otherActiveManagementUsers: others?.n ?? 0 } };
}

export async function changeUser(
  ctx: PgContext,
  input: { readonly subject: string; readonly now: number },
  decide: (current: UserRecord, context: UserChangeContext) => UserChange,
): Promise<UserChangeOutcome | { readonly kind: 'user_name_taken' }> {
  return ctx.tx(async (c): Promise<UserChangeOutcome | { readonly kind: 'user_name_taken' }> => {
    const { current: row, context } = await lockForChange(c, input.subject, input.now);
    if (row === undefined) return { kind: 'unknown' };
    const current = toUser(row);
    // A decision that throws (a refusal) rolls the transaction back: nothing was written yet.
    const change = decide(current, context);
    if (change.kind === 'none') return { kind: 'none', user: current };
    if (change.kind === 'update') {
      if (change.user.subject !== current.subject || change.user.realm !== current.realm) {
        throw new Error('a changed user must keep its subject and realm');
      }
      let written: UserRow | undefined;
      try {
        written = await first<UserRow>(
          c,
          `UPDATE users SET ${SET_USER} WHERE subject = $1 AND realm = $2 RETURNING ${USER_COLUMNS}`,
          userValues(change.user),
        );
      } catch (err) {
        if (violates(err, 'users_realm_user_name')) return rollback({ kind: 'user_name_taken' });
        throw err;
      }
      if (written === undefined) throw new Error(`user ${current.subject} vanished while locked`);
      const revokedSessions =
        change.revokeSessions === null ? 0 : await revokeSubjectSessions(c, current.subject, input.now, change.revokeSessions);
      // A disable also burns the intents by or for the subject (locked first, in lockForChange).
      const burnedIntents =
        change.revokeSessions === null ? 0 : await changes(c, burnSubjectIntentsSql('$1', '$2'), [current.subject, input.now]);
      for (const event of change.events) await ctx.append(c, event);
      return { kind: 'updated', user: toUser(written), revokedSessions, burnedIntents };
    }
    const removedDevices = await changes(c, 'UPDATE devices SET removed_at = $2 WHERE subject = $1 AND removed_at IS NULL', [
      current.subject,
      input.now,
    ]);
    const removedLinks = await changes(c, 'UPDATE links SET removed_at = $2 WHERE subject = $1 AND removed_at IS NULL', [
      current.subject,
      input.now,
    ]);
    const revokedSessions = await revokeSubjectSessions(c, current.subject, input.now, REVOKED_USER_REMOVED);
    const burnedIntents = await changes(c, burnSubjectIntentsSql('$1', '$2'), [current.subject, input.now]);
    await c.query('DELETE FROM users WHERE subject = $1', [current.subject]);
    for (const event of change.events) await ctx.append(c, event);
    return { kind: 'removed', revokedSessions, removedDevices, removedLinks, burnedIntents };
  });
}

/** Revokes every live session of `subject` with `reason` (its grace pair erased); how many. */
function revokeSubjectSessions(c: Queryable, subject: string, now: number, reason: string): Promise<number> {
  return changes(
    c,
    `UPDATE sessions SET revoked_at = $2, revoked_reason = $3, prev_successor = NULL WHERE subject = $1 AND ${liveSessionSql('$2')}`,
    [subject, now, reason],
  );
}

export async function listGroups(ctx: PgContext, filter: { readonly realm?: Realm }): Promise<readonly GroupSummary[]> {
  // Every group record, and every name users carry (their groups column is a JSON array's
  // text), with its member count; names compared and sorted in code-point order.
  const list = await rows<{ realm: Realm; name: string; id: string | null; members: number }>(
    ctx.pool,
    `WITH carried AS (
       SELECT u.realm, g.name, COUNT(*)::int AS members
         FROM users u CROSS JOIN LATERAL jsonb_array_elements_text(u.groups::jsonb) AS g(name)
        WHERE $1::text IS NULL OR u.realm = $1
        GROUP BY u.realm, g.name
     ), records AS (
       SELECT id, realm, name FROM groups WHERE $1::text IS NULL OR realm = $1
     )
     SELECT realm, name, id, members FROM (
       SELECT COALESCE(r.realm, n.realm) AS realm, COALESCE(r.name, n.name) AS name, r.id, COALESCE(n.members, 0) AS members
         FROM records r FULL JOIN carried n ON n.realm = r.realm AND n.name = r.name
     ) AS summary
     ORDER BY realm COLLATE "C", name COLLATE "C"`,
    [filter.realm ?? null],
  );
  return list.map((g) => Object.freeze({ realm: g.realm, name: g.name, id: g.id, members: g.members }));
}

export async function getGroup(ctx: PgContext, id: string): Promise<GroupRecord | null> {
  const row = await first<GroupRow>(ctx.pool, `SELECT ${GROUP_COLUMNS} FROM groups WHERE id = $1`, [id]);
  return row === undefined ? null : toGroup(row);
}

export async function saveGroup(ctx: PgContext, group: GroupRecord, event: AuditEventDraft): Promise<'saved' | 'name_taken'> {
  return ctx.tx(async (c): Promise<'saved' | 'name_taken'> => {
    // The unique (realm, name) constraint decides, also between nodes: a concurrent save of the
    // name waits for this one, then violates it.
    try {
      await c.query(
        `INSERT INTO groups (${GROUP_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (id) DO UPDATE SET realm = EXCLUDED.realm, name = EXCLUDED.name, external_id = EXCLUDED.external_id,
           created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at`,
        [group.id, group.realm, group.name, group.externalId, group.createdAt, group.updatedAt],
      );
    } catch (err) {
      if (violates(err, 'groups_realm_name')) return rollback('name_taken');
      throw err;
    }
    await ctx.append(c, event);
    return 'saved';
  });
}

export async function deleteGroup(
  ctx: PgContext,
  input: { readonly id: string; readonly now: number },
  event: AuditEventDraft,
): Promise<boolean> {
  return ctx.tx(async (c) => {
    const group = await first<{ realm: Realm; name: string }>(c, 'DELETE FROM groups WHERE id = $1 RETURNING realm, name', [input.id]);
    if (group === undefined) return false;
    // The members' rows are locked in subject order first, as changeUser locks them.
    await c.query(`SELECT subject FROM users WHERE realm = $1 AND groups::jsonb ? $2 ORDER BY subject COLLATE "C" FOR UPDATE`, [
      group.realm,
      group.name,
    ]);
    // The name taken out of each member's array, the rest kept in order, written as core's
    // groupsText writes it (compact JSON); a user left with no group has no groups source.
    await c.query(
      `UPDATE users SET
         groups = COALESCE((SELECT '[' || string_agg(to_json(g.name)::text, ',' ORDER BY g.n) || ']'
                              FROM jsonb_array_elements_text(users.groups::jsonb) WITH ORDINALITY AS g(name, n)
                             WHERE g.name <> $2), '[]'),
         groups_source = CASE WHEN groups::jsonb - $2 = '[]'::jsonb THEN NULL ELSE groups_source END,
         updated_at = $3
       WHERE realm = $1 AND groups::jsonb ? $2`,
      [group.realm, group.name, input.now],
    );
    await ctx.append(c, event);
    return true;
  });
}

export async function createScimToken(ctx: PgContext, token: ScimTokenRecord, event: AuditEventDraft): Promise<void> {
  await ctx.tx(async (c) => {
    await c.query(`INSERT INTO scim_tokens (${SCIM_TOKEN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)`, [
      token.id,
      token.digest,
      token.name,
      token.createdAt,
      token.createdBy,
      token.lastUsedAt,
      token.revokedAt,
    ]);
    await ctx.append(c, event);
  });
}

export async function useScimToken(
  ctx: PgContext,
  input: { readonly digest: string; readonly now: number },
): Promise<ScimTokenRecord | null> {
  // Found by its (unique) digest, a SHA-256 of a secret no one can guess; compared again in
  // constant time, as every other digest is.
  // A read first: an unknown token, or one whose use was recorded within the minute, writes nothing.
  const found = await first<ScimTokenRow>(
    ctx.pool,
    `SELECT ${SCIM_TOKEN_COLUMNS} FROM scim_tokens WHERE digest = $1 AND revoked_at IS NULL`,
    [input.digest],
  );
  if (found === undefined || !digestsEqual(found.digest, input.digest)) return null;
  if (!scimTokenUseIsDue(found.last_used_at === null ? null : Number(found.last_used_at), input.now)) return toScimToken(found);
  const [row] = await writtenRows<ScimTokenRow>(
    ctx.pool,
    `UPDATE scim_tokens SET last_used_at = $2 WHERE id = $1 AND revoked_at IS NULL RETURNING ${SCIM_TOKEN_COLUMNS}`,
    [found.id, input.now],
  );
  return row === undefined ? null : toScimToken(row);
}

export async function listScimTokens(ctx: PgContext): Promise<readonly ScimTokenRecord[]> {
  const list = await rows<ScimTokenRow>(ctx.pool, `SELECT ${SCIM_TOKEN_COLUMNS} FROM scim_tokens ORDER BY created_at, id COLLATE "C"`);
  return list.map(toScimToken);
}

export async function revokeScimToken(
  ctx: PgContext,
  input: { readonly id: string; readonly now: number },
  event: AuditEventDraft,
): Promise<boolean> {
  return ctx.tx(async (c) => {
    if ((await changes(c, 'UPDATE scim_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL', [input.id, input.now])) === 0) {
      return false;
    }
    await ctx.append(c, event);
    return true;
  });
}

// The SQLite store's operations on users, groups and SCIM tokens (see `SqliteStore`, whose methods call these).
import { type AuditEventDraft, digestsEqual, type Realm } from '@svc/core';
import { burnSubjectIntentsSql, GROUP_COLUMNS, liveSessionSql, SCIM_TOKEN_COLUMNS, USER_COLUMNS } from '@svc/core/sql-rows';
import {
  defaultUser,
  type GroupRecord,
  type GroupRow,
  type GroupSummary,
  groupsOf,
  groupsText,
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
import type Database from 'better-sqlite3';
import type { SqliteContext } from './context.js';

/** The named parameters of a user's INSERT or UPDATE. */
type UserParams = ReturnType<typeof userRowOf>;

const USER_VALUES = USER_COLUMNS.split(', ')
  .map((c) => `@${c}`)
  .join(', ');
/** The user columns as `users.<column>`: a listing by group joins user_groups, whose columns share names with them. */
const QUALIFIED_USER_COLUMNS = USER_COLUMNS.split(', ')
  .map((c) => `users.${c}`)
  .join(', ');
const USER_SET = USER_COLUMNS.split(', ')
  .filter((c) => c !== 'subject')
  .map((c) => `${c} = @${c}`)
  .join(', ');

/**
 * The SELECT of one page of users and its named parameters. Only the filters given go into the
 * WHERE clause (one statement per combination, prepared once), so that an index in subject order
 * serves each page (migration 016): a page reads about as many rows as it returns, at a million
 * users as at ten. A group's members come from user_groups (name, subject), joined to their
 * users; a realm or a status from (realm, subject) or (status, subject); the directory's
 * look-ups from (realm, email), (realm, user_name) and (realm, external_id), with both realms
 * named when none is given (the CHECK allows only those two) so that the index serves them.
 * Only the text filter (a substring) reads users until the page is full.
 *
 * @example
 * const { sql, params } = userListingSql({ group: 'ops', limit: 101 });
 */
export function userListingSql(filter: UserFilter): { readonly sql: string; readonly params: Record<string, string | number> } {
  const where: string[] = [];
  const params: Record<string, string | number> = { limit: filter.limit };
  const add = (key: keyof UserFilter, sql: string): void => {
    const value = filter[key];
    if (value === undefined) return;
    where.push(sql);
    params[key] = value;
  };
  const byGroup = filter.group !== undefined;
  // With a group, the members' index gives the order (`ug.subject`, equal to the user's).
  const order = byGroup ? 'ug.subject' : 'users.subject';
  add('group', 'ug.name = @group');
  add('realm', 'users.realm = @realm');
  const lookup = filter.email !== undefined || filter.userName !== undefined || filter.externalId !== undefined;
  if (filter.realm === undefined && lookup) where.push("users.realm IN ('management', 'application')");
  add('status', 'users.status = @status');
  add('email', 'users.email = @email');
  add('userName', 'users.user_name = @userName');
  add('externalId', 'users.external_id = @externalId');
  // A substring of the name, email or userName, ASCII letters without case: SQLite's lower()
  // folds ASCII only, and instr() has no wildcards to escape.
  add(
    'text',
    '(instr(lower(users.name), lower(@text)) > 0 OR instr(lower(users.email), lower(@text)) > 0 OR instr(lower(users.user_name), lower(@text)) > 0)',
  );
  add('after', `${order} > @after`);
  // CROSS JOIN: SQLite keeps the members' index as the outer loop (the order of the page).
  const from = byGroup ? 'user_groups ug CROSS JOIN users ON users.subject = ug.subject' : 'users';
  const sql = `SELECT ${QUALIFIED_USER_COLUMNS} FROM ${from}${where.length === 0 ? '' : ` WHERE ${where.join(' AND ')}`} ORDER BY ${order} LIMIT @limit`;
  return { sql, params };
}

/** The statements of this module, prepared once per connection. */
function prepare(db: Database.Database) {
  // Each statement declares its parameters and row, so reads need no casts.
  const p = <Params extends unknown[] | object = [], Row = unknown>(sql: string) => db.prepare<Params, Row>(sql);
  return {
    userBySubject: p<[string], UserRow>(`SELECT ${USER_COLUMNS} FROM users WHERE subject = ?`),
    userStatus: p<[string], UserRow['status']>('SELECT status FROM users WHERE subject = ?').pluck(true),
    insertUser: p<UserParams>(`INSERT INTO users (${USER_COLUMNS}) VALUES (${USER_VALUES}) ON CONFLICT (subject) DO NOTHING`),
    updateUser: p<UserParams>(`UPDATE users SET ${USER_SET} WHERE subject = @subject`),
    deleteUser: p<[string]>('DELETE FROM users WHERE subject = ?'),
    signedIn: p<[number, string]>('UPDATE users SET last_sign_in_at = ? WHERE subject = ?'),
    userNameTaken: p<[Realm, string, string], number>('SELECT 1 FROM users WHERE realm = ? AND user_name = ? AND subject <> ?').pluck(true),
    // The other management users that could still sign in: active, holding an active device or a live link.
    otherActiveManagementUsers: p<[string], number>(
      `SELECT COUNT(*) FROM users u
       WHERE u.realm = 'management' AND u.status = 'active' AND u.subject <> ?
         AND (EXISTS (SELECT 1 FROM devices d WHERE d.subject = u.subject AND d.removed_at IS NULL)
           OR EXISTS (SELECT 1 FROM links l WHERE l.subject = u.subject AND l.removed_at IS NULL))`,
    ).pluck(true),
    burnSubjectIntents: p<{ subject: string; now: number }>(burnSubjectIntentsSql('@subject', '@now')),
    revokeSubjectSessions: p<{ subject: string; now: number; reason: string }>(
      `UPDATE sessions SET revoked_at = @now, revoked_reason = @reason, prev_successor = NULL
       WHERE subject = @subject AND ${liveSessionSql('@now')}`,
    ),
    removeSubjectDevices: p<[number, string]>('UPDATE devices SET removed_at = ? WHERE subject = ? AND removed_at IS NULL'),
    removeSubjectLinks: p<[number, string]>('UPDATE links SET removed_at = ? WHERE subject = ? AND removed_at IS NULL'),
    // Group records (members 0) and the names users carry (1 per user), summed per realm and name.
    listGroups: p<{ realm: Realm | null }, GroupSummary>(
      `SELECT realm, name, MAX(id) AS id, SUM(member) AS members FROM (
         SELECT realm, name, id, 0 AS member FROM groups WHERE @realm IS NULL OR realm = @realm
         UNION ALL
         SELECT u.realm, g.value, NULL, 1 FROM users u, json_each(u.groups) g WHERE @realm IS NULL OR u.realm = @realm
       ) GROUP BY realm, name ORDER BY realm, name`,
    ),
    groupById: p<[string], GroupRow>(`SELECT ${GROUP_COLUMNS} FROM groups WHERE id = ?`),
    groupNameTaken: p<[Realm, string, string], number>('SELECT 1 FROM groups WHERE realm = ? AND name = ? AND id <> ?').pluck(true),
    saveGroup: p<GroupRow>(
      `INSERT INTO groups (${GROUP_COLUMNS}) VALUES (@id, @realm, @name, @external_id, @created_at, @updated_at)
       ON CONFLICT (id) DO UPDATE SET realm = excluded.realm, name = excluded.name, external_id = excluded.external_id,
         created_at = excluded.created_at, updated_at = excluded.updated_at`,
    ),
    deleteGroup: p<[string]>('DELETE FROM groups WHERE id = ?'),
    usersInGroup: p<[Realm, string], UserRow>(
      `SELECT ${QUALIFIED_USER_COLUMNS} FROM user_groups ug CROSS JOIN users ON users.subject = ug.subject
       WHERE users.realm = ? AND ug.name = ?`,
    ),
    setGroups: p<{ subject: string; groups: string; groupsSource: string | null; now: number }>(
      'UPDATE users SET groups = @groups, groups_source = @groupsSource, updated_at = @now WHERE subject = @subject',
    ),
    insertScimToken: p<ScimTokenRow>(
      `INSERT INTO scim_tokens (${SCIM_TOKEN_COLUMNS}) VALUES (@id, @digest, @name, @created_at, @created_by, @last_used_at, @revoked_at)`,
    ),
    liveScimToken: p<[string], ScimTokenRow>(`SELECT ${SCIM_TOKEN_COLUMNS} FROM scim_tokens WHERE digest = ? AND revoked_at IS NULL`),
    useScimToken: p<[number, string]>('UPDATE scim_tokens SET last_used_at = ? WHERE id = ?'),
    scimTokenById: p<[string], ScimTokenRow>(`SELECT ${SCIM_TOKEN_COLUMNS} FROM scim_tokens WHERE id = ?`),
    listScimTokens: p<[], ScimTokenRow>(`SELECT ${SCIM_TOKEN_COLUMNS} FROM scim_tokens ORDER BY created_at, id`),
    revokeScimToken: p<[number, string]>('UPDATE scim_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'),
  };
}

/** The SQLite store's operations on users, groups and SCIM tokens, on the store's connection. */
export class SqliteUsers {
  readonly #ctx: SqliteContext;
  readonly #s: ReturnType<typeof prepare>;
  // listUsers' statements by SQL: at most one per combination of filters.
  readonly #listUsers = new Map<string, Database.Statement<Record<string, string | number>, UserRow>>();

  constructor(ctx: SqliteContext) {
    this.#ctx = ctx;
    this.#s = prepare(ctx.db);
  }

  /** The user row of `subject` (inside a write transaction: what the write decides on). */
  userRow(subject: string): UserRow | undefined {
    return this.#s.userBySubject.get(subject);
  }

  /** The status of `subject`'s user, if it has one: what a sign-in checks (one column, not the row). */
  userStatus(subject: string): UserRow['status'] | undefined {
    return this.#s.userStatus.get(subject);
  }

  /**
   * Inserts `user` unless its subject has one; true when inserted. The subject's cached sessions
   * are dropped then: the bearer check must read the new user with them.
   */
  insertUser(user: UserRecord): boolean {
    if (this.#s.insertUser.run(userRowOf(user)).changes === 0) return false;
    this.#ctx.cache.dropSubject(user.subject);
    return true;
  }

  /** The subject's user, created (active, no attributes) when it has none. */
  ensureUser(subject: string, realm: Realm, now: number): void {
    this.insertUser(defaultUser({ subject, realm, now }));
  }

  /** Writes `user` over its row, or inserts it; the subject's cached sessions are dropped. */
  writeUser(user: UserRecord): void {
    const row = userRowOf(user);
    if (this.#s.updateUser.run(row).changes === 0) this.#s.insertUser.run(row);
    this.#ctx.cache.dropSubject(user.subject);
  }

  /** Records a sign-in of the subject's user (none: nothing). Not an attribute: the cache stays. */
  signedIn(subject: string, now: number): void {
    this.#s.signedIn.run(now, subject);
  }

  async getUser(subject: string): Promise<UserRecord | null> {
    const row = this.#s.userBySubject.get(subject);
    return row === undefined ? null : toUser(row);
  }

  async listUsers(filter: UserFilter): Promise<readonly UserRecord[]> {
    const { sql, params } = userListingSql(filter);
    let statement = this.#listUsers.get(sql);
    if (statement === undefined) {
      statement = this.#ctx.db.prepare<Record<string, string | number>, UserRow>(sql);
      this.#listUsers.set(sql, statement);
    }
    return statement.all(params).map(toUser);
  }

  async createUser(user: UserRecord, event: AuditEventDraft): Promise<'created' | 'exists' | 'user_name_taken'> {
    return this.#ctx.writes.run(() => {
      if (this.#s.userBySubject.get(user.subject) !== undefined) return 'exists';
      if (user.userName !== null && this.#s.userNameTaken.get(user.realm, user.userName, user.subject) !== undefined)
        return 'user_name_taken';
      this.insertUser(user);
      this.#ctx.append(event);
      return 'created';
    }, true);
  }

  async changeUser(
    input: { readonly subject: string; readonly now: number },
    decide: (current: UserRecord, context: UserChangeContext) => UserChange,
  ): Promise<UserChangeOutcome | { readonly kind: 'user_name_taken' }> {
    // Inside the write transaction (BEGIN IMMEDIATE: one writer at a time, in this process and
    // any other on the file), so the count the decision sees cannot change before the write: of
    // N concurrent disables of the last N administrators, the last one decided sees 0.
    return this.#ctx.writes.run((): UserChangeOutcome | { readonly kind: 'user_name_taken' } => {
      const row = this.#s.userBySubject.get(input.subject);
      if (row === undefined) return { kind: 'unknown' };
      const current = toUser(row);
      const others = current.realm === 'management' ? (this.#s.otherActiveManagementUsers.get(current.subject) ?? 0) : 0;
      // A decision that throws rolls this write's savepoint back: nothing is written.
      const change = decide(current, { otherActiveManagementUsers: others });
      if (change.kind === 'none') return { kind: 'none', user: current };
      if (change.kind === 'update') {
        if (change.user.subject !== current.subject || change.user.realm !== current.realm) {
          throw new Error('a changed user must keep its subject and realm');
        }
        const name = change.user.userName;
        if (name !== null && this.#s.userNameTaken.get(current.realm, name, current.subject) !== undefined)
          return { kind: 'user_name_taken' };
        this.writeUser(change.user);
        const revokedSessions =
          change.revokeSessions === null
            ? 0
            : this.#s.revokeSubjectSessions.run({ subject: current.subject, now: input.now, reason: change.revokeSessions }).changes;
        for (const event of change.events) this.#ctx.append(event);
        // A disable also burns the intents by or for the subject: none completes while it is disabled, nor after.
        const burnedIntents =
          change.revokeSessions === null ? 0 : this.#s.burnSubjectIntents.run({ subject: current.subject, now: input.now }).changes;
        const written = this.#s.userBySubject.get(current.subject);
        if (written === undefined) throw new Error(`user ${current.subject} vanished inside the transaction that wrote it`);
        return { kind: 'updated', user: toUser(written), revokedSessions, burnedIntents };
      }
      this.#ctx.cache.dropSubject(current.subject);
      const removedDevices = this.#s.removeSubjectDevices.run(input.now, current.subject).changes;
      const removedLinks = this.#s.removeSubjectLinks.run(input.now, current.subject).changes;
      const revokedSessions = this.#s.revokeSubjectSessions.run({
        subject: current.subject,
        now: input.now,
        reason: REVOKED_USER_REMOVED,
      }).changes;
      const burnedIntents = this.#s.burnSubjectIntents.run({ subject: current.subject, now: input.now }).changes;
      this.#s.deleteUser.run(current.subject);
      for (const event of change.events) this.#ctx.append(event);
      return { kind: 'removed', revokedSessions, removedDevices, removedLinks, burnedIntents };
    }, true);
  }

  async listGroups(filter: { readonly realm?: Realm }): Promise<readonly GroupSummary[]> {
    return this.#s.listGroups
      .all({ realm: filter.realm ?? null })
      .map((g) => Object.freeze({ realm: g.realm, name: g.name, id: g.id, members: g.members }));
  }

  async getGroup(id: string): Promise<GroupRecord | null> {
    const row = this.#s.groupById.get(id);
    return row === undefined ? null : toGroup(row);
  }

  async saveGroup(group: GroupRecord, event: AuditEventDraft): Promise<'saved' | 'name_taken'> {
    return this.#ctx.writes.run(() => {
      if (this.#s.groupNameTaken.get(group.realm, group.name, group.id) !== undefined) return 'name_taken';
      this.#s.saveGroup.run({
        id: group.id,
        realm: group.realm,
        name: group.name,
        external_id: group.externalId,
        created_at: group.createdAt,
        updated_at: group.updatedAt,
      });
      this.#ctx.append(event);
      return 'saved';
    }, true);
  }

  async deleteGroup(input: { readonly id: string; readonly now: number }, event: AuditEventDraft): Promise<boolean> {
    return this.#ctx.writes.run(() => {
      const group = this.#s.groupById.get(input.id);
      if (group === undefined) return false;
      this.#s.deleteGroup.run(group.id);
      const members = this.#s.usersInGroup.all(group.realm, group.name);
      for (const u of members) {
        const groups = groupsOf(u.groups).filter((g) => g !== group.name);
        this.#s.setGroups.run({
          subject: u.subject,
          groups: groupsText(groups),
          groupsSource: groups.length === 0 ? null : u.groups_source,
          now: input.now,
        });
      }
      // Many users may have changed: the bearer check reads them all again.
      if (members.length > 0) this.#ctx.cache.clear();
      this.#ctx.append(event);
      return true;
    }, true);
  }

  async createScimToken(token: ScimTokenRecord, event: AuditEventDraft): Promise<void> {
    await this.#ctx.writes.run(() => {
      this.#s.insertScimToken.run({
        id: token.id,
        digest: token.digest,
        name: token.name,
        created_at: token.createdAt,
        created_by: token.createdBy,
        last_used_at: token.lastUsedAt,
        revoked_at: token.revokedAt,
      });
      this.#ctx.append(event);
    }, true);
  }

  async useScimToken(input: { readonly digest: string; readonly now: number }): Promise<ScimTokenRecord | null> {
    // A read first, outside the single-writer queue: an unknown token, or one whose use was
    // recorded within the minute, writes nothing.
    const found = this.#s.liveScimToken.get(input.digest);
    // The digest found the row; it is still compared in constant time before it counts.
    if (found === undefined || !digestsEqual(found.digest, input.digest)) return null;
    if (!scimTokenUseIsDue(found.last_used_at, input.now)) return toScimToken(found);
    return this.#ctx.writes.run(() => {
      this.#s.useScimToken.run(input.now, found.id);
      const used = this.#s.scimTokenById.get(found.id);
      return used === undefined || used.revoked_at !== null ? null : toScimToken(used);
    });
  }

  async listScimTokens(): Promise<readonly ScimTokenRecord[]> {
    return this.#s.listScimTokens.all().map(toScimToken);
  }

  async revokeScimToken(input: { readonly id: string; readonly now: number }, event: AuditEventDraft): Promise<boolean> {
    return this.#ctx.writes.run(() => {
      if (this.#s.revokeScimToken.run(input.now, input.id).changes === 0) return false;
      this.#ctx.append(event);
      return true;
    }, true);
  }
}

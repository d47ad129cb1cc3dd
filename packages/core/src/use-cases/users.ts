import type { AuditData, AuditEventDraft } from '../audit.js';
import type { AuthDeps } from '../deps.js';
import { AuthError } from '../errors.js';
import { isIdOfKind, newId } from '../ids.js';
import { isRealm, type Realm } from '../realm.js';
import type { UserChange, UserChangeContext, UserFilter, UserRecord } from '../store.js';
import { rfc3339 } from '../time.js';
import {
  type AttributeSource,
  checkDisplayName,
  checkEmail,
  checkGroups,
  checkUserName,
  groupNameProblem,
  USER_STATUSES,
  type UserStatus,
} from '../users.js';
import type { GroupJson, UserJson, UserPageJson, UserRemovedJson } from '../wire/users.js';
import { auditDraft } from './event.js';

/**
 * Who changes a user: a management principal (`subject`, `session`), the company directory
 * (`via: 'scim'`, its token id), or a local operator command. Recorded in every event.
 */
export interface UserActor {
  readonly via: 'management_api' | 'scim' | 'cli' | 'console';
  readonly subject: string | null;
  readonly session: string | null;
  /** The SCIM token's id, for `via: 'scim'`. */
  readonly token?: string;
}

/** The default and largest page of {@link listUsers}. */
export const USERS_PAGE_DEFAULT = 100;
export const USERS_PAGE_MAX = 1000;

/**
 * A user as the management API answers it.
 *
 * @example
 * const json = userToJson(await store.getUser(subject));
 */
export function userToJson(u: UserRecord): UserJson {
  return {
    subject: u.subject,
    realm: u.realm,
    name: u.name,
    email: u.email,
    email_verified: u.emailVerified,
    groups: [...u.groups],
    status: u.status,
    sources: { name: u.nameSource, email: u.emailSource, groups: u.groupsSource },
    user_name: u.userName,
    external_id: u.externalId,
    created_at: rfc3339(u.createdAt),
    updated_at: rfc3339(u.updatedAt),
    last_sign_in_at: u.lastSignInAt === null ? null : rfc3339(u.lastSignInAt),
    disabled_at: u.disabledAt === null ? null : rfc3339(u.disabledAt),
  };
}

/**
 * A page of users, ordered by subject (creation order), filtered: `realm`, `status`, `group`,
 * `email` (exact), `user_name` (exact), `text` (a substring of name, email or userName).
 *
 * @example
 * const page = await listUsers(deps, { realm: 'application', group: 'ops', limit: 50 });
 */
export async function listUsers(
  deps: Pick<AuthDeps, 'store'>,
  input: {
    readonly realm?: unknown;
    readonly status?: unknown;
    readonly group?: unknown;
    readonly email?: unknown;
    readonly userName?: unknown;
    readonly text?: unknown;
    readonly after?: unknown;
    readonly limit?: unknown;
  },
): Promise<UserPageJson> {
  const limit = input.limit === undefined ? USERS_PAGE_DEFAULT : input.limit;
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1 || limit > USERS_PAGE_MAX) {
    throw new AuthError('invalid_request', `limit must be an integer from 1 to ${USERS_PAGE_MAX}`);
  }
  const filter: { -readonly [K in keyof UserFilter]: UserFilter[K] } = { limit: limit + 1 };
  if (input.realm !== undefined) filter.realm = realmOf(input.realm);
  if (input.status !== undefined) {
    if (!USER_STATUSES.includes(input.status as UserStatus)) throw new AuthError('invalid_request', 'status must be active or disabled');
    filter.status = input.status as UserStatus;
  }
  if (input.group !== undefined) {
    const problem = groupNameProblem(input.group);
    if (problem !== null) throw new AuthError('invalid_request', problem);
    filter.group = input.group as string;
  }
  if (input.email !== undefined) filter.email = checked(checkEmail(input.email)).email;
  if (input.userName !== undefined) filter.userName = checked(checkUserName(input.userName)).userName;
  if (input.text !== undefined) {
    if (typeof input.text !== 'string' || input.text.length > 256)
      throw new AuthError('invalid_request', 'filter must be a string of at most 256 characters');
    if (input.text !== '') filter.text = input.text;
  }
  if (input.after !== undefined) filter.after = subjectOf(input.after, 'after');
  const users = await deps.store.listUsers(filter);
  const page = users.slice(0, limit);
  return { users: page.map(userToJson), next: users.length > limit ? (page.at(-1)?.subject ?? null) : null };
}

/**
 * A user by subject, or `404 not_found`.
 *
 * @example
 * const user = await getUser(deps, { subject: 'sub_...' });
 */
export async function getUser(deps: Pick<AuthDeps, 'store'>, input: { readonly subject: unknown }): Promise<UserJson> {
  const user = await deps.store.getUser(subjectOf(input.subject));
  if (user === null) throw new AuthError('not_found', 'no such user');
  return userToJson(user);
}

/** The attributes an operator or the directory sets; absent: left as is (null clears). */
export interface UserAttributesInput {
  readonly name?: unknown;
  readonly email?: unknown;
  readonly email_verified?: unknown;
  readonly groups?: unknown;
  readonly user_name?: unknown;
  readonly external_id?: unknown;
  /** `active` or `disabled`. */
  readonly status?: unknown;
}

/**
 * Creates a user without a credential yet (it can then be paired, linked or provisioned): a new
 * subject in `realm` with the attributes given, owned by `source` (`operator` or `scim`).
 * Audited as `user.created`.
 *
 * @example
 * const user = await addUser(deps, { realm: 'application', attributes: { name: 'Ada', email: 'ada@example.com' }, actor, source: 'operator' });
 */
export async function addUser(
  deps: AuthDeps,
  input: { readonly realm: unknown; readonly attributes: UserAttributesInput; readonly actor: UserActor; readonly source: AttributeSource },
): Promise<UserJson> {
  const realm = realmOf(input.realm);
  const now = deps.clock.now();
  const subject = newId('subject', deps.clock, deps.random);
  const blank: UserRecord = {
    subject,
    realm,
    userName: null,
    externalId: null,
    name: null,
    nameSource: null,
    email: null,
    emailVerified: false,
    emailSource: null,
    groups: [],
    groupsSource: null,
    status: 'active',
    createdAt: now,
    updatedAt: now,
    lastSignInAt: null,
    disabledAt: null,
  };
  const user = applyAttributes(blank, input.attributes, input.source, now);
  const created = await deps.store.createUser(
    user,
    auditDraft(deps, 'user.created', { realm, subject, at: now, data: { ...actorData(input.actor), ...describeUser(user) } }),
  );
  if (created !== 'created') {
    throw new AuthError('user_exists', created === 'user_name_taken' ? 'another user of the realm has that user_name' : 'that user exists');
  }
  deps.log.info({ event: 'user.created', subject, realm, via: input.actor.via }, 'user created');
  return userToJson(user);
}

/**
 * Changes a user's attributes and, with `status`, enables or disables them, in one audited
 * transaction (`user.updated` with each attribute's old and new value; `user.disabled` or
 * `user.enabled`). Disabling revokes every session of the user at once (reason `user_disabled`,
 * on every node sharing the store) and refuses every later sign-in; enabling restores sign-in,
 * not the revoked sessions. The last active management user cannot be disabled.
 *
 * @example
 * await updateUser(deps, { subject, attributes: { groups: ['ops'] }, actor, source: 'operator' });
 * await updateUser(deps, { subject, attributes: { status: 'disabled' }, actor, source: 'operator' });
 */
export async function updateUser(
  deps: AuthDeps,
  input: {
    readonly subject: unknown;
    readonly attributes: UserAttributesInput;
    readonly actor: UserActor;
    readonly source: AttributeSource;
    /** Only a user of this realm (SCIM serves one realm): another realm's reads as unknown. */
    readonly realm?: Realm;
  },
): Promise<UserJson> {
  return (await updateUserCounting(deps, input)).user;
}

/**
 * {@link updateUser}, also answering how many sessions the change revoked (a disable: every live
 * session of the user; otherwise 0), as the management API's disable and enable report it.
 *
 * @example
 * const { user, revokedSessions } = await updateUserCounting(deps, { subject, attributes: { status: 'disabled' }, actor, source: 'operator' });
 */
export async function updateUserCounting(
  deps: AuthDeps,
  input: Parameters<typeof updateUser>[1],
): Promise<{ readonly user: UserJson; readonly revokedSessions: number }> {
  const subject = subjectOf(input.subject);
  const now = deps.clock.now();
  // Bad input throws inside the decision: the store rolls back and nothing is written.
  const outcome = await deps.store.changeUser({ subject, now }, (current, context) => {
    if (input.realm !== undefined && current.realm !== input.realm) throw new AuthError('not_found', 'no such user');
    return decideUserUpdate(deps, current, context, { attributes: input.attributes, source: input.source, actor: input.actor, now });
  });
  if (outcome.kind === 'unknown' || outcome.kind === 'removed') throw new AuthError('not_found', 'no such user');
  if (outcome.kind === 'user_name_taken') throw new AuthError('user_exists', 'another user of the realm has that user_name');
  if (outcome.kind === 'updated') {
    deps.log.info(
      {
        event: 'user.updated',
        subject,
        status: outcome.user.status,
        revoked_sessions: outcome.revokedSessions,
        burned_intents: outcome.burnedIntents,
        via: input.actor.via,
      },
      'user changed',
    );
  }
  return { user: userToJson(outcome.user), revokedSessions: outcome.kind === 'updated' ? outcome.revokedSessions : 0 };
}

/**
 * The decision of {@link updateUser}, inside the store's transaction: the new user and its
 * events, or `none` when nothing changes. Throws `last_management_user` for a disable that
 * would leave the management realm without an active administrator.
 *
 * @example
 * store.changeUser({ subject, now }, (current, ctx) => decideUserUpdate(deps, current, ctx, { attributes, source, actor, now }));
 */
export function decideUserUpdate(
  deps: Pick<AuthDeps, 'clock' | 'random'>,
  current: UserRecord,
  context: UserChangeContext,
  input: { readonly attributes: UserAttributesInput; readonly source: AttributeSource; readonly actor: UserActor; readonly now: number },
): UserChange {
  const next = applyAttributes(current, input.attributes, input.source, input.now);
  const events: AuditEventDraft[] = [];
  const base = { realm: current.realm, subject: current.subject, at: input.now };
  const changes = changedAttributes(current, next);
  if (Object.keys(changes).length > 0) {
    events.push(auditDraft(deps, 'user.updated', { ...base, data: { ...actorData(input.actor), ...changes } }));
  }
  let revokeSessions: string | null = null;
  if (current.status !== next.status) {
    if (next.status === 'disabled') {
      if (current.realm === 'management' && context.otherActiveManagementUsers === 0) throw lastManagementUser('disable');
      revokeSessions = 'user_disabled';
      events.push(auditDraft(deps, 'user.disabled', { ...base, data: actorData(input.actor) }));
    } else {
      events.push(auditDraft(deps, 'user.enabled', { ...base, data: actorData(input.actor) }));
    }
  }
  if (events.length === 0) return { kind: 'none' };
  return { kind: 'update', user: next, revokeSessions, events };
}

/**
 * Removes a user: its devices and links, its sessions (revoked at once), and the user itself,
 * audited as `user.removed`. The last active management user cannot be removed.
 *
 * @example
 * await removeUser(deps, { subject: 'sub_...', actor });
 */
export async function removeUser(
  deps: AuthDeps,
  input: { readonly subject: unknown; readonly actor: UserActor; readonly realm?: Realm },
): Promise<UserRemovedJson> {
  const subject = subjectOf(input.subject);
  const now = deps.clock.now();
  const outcome = await deps.store.changeUser({ subject, now }, (current, context) => {
    if (input.realm !== undefined && current.realm !== input.realm) throw new AuthError('not_found', 'no such user');
    if (current.realm === 'management' && current.status === 'active' && context.otherActiveManagementUsers === 0) {
      throw lastManagementUser('remove');
    }
    return {
      kind: 'remove',
      events: [
        auditDraft(deps, 'user.removed', {
          realm: current.realm,
          subject,
          at: now,
          data: { ...actorData(input.actor), ...describeUser(current) },
        }),
      ],
    };
  });
  if (outcome.kind !== 'removed') throw new AuthError('not_found', 'no such user');
  deps.log.info(
    { event: 'user.removed', subject, revoked_sessions: outcome.revokedSessions, burned_intents: outcome.burnedIntents },
    'user removed',
  );
  return {
    subject,
    removed: true,
    revoked_sessions: outcome.revokedSessions,
    removed_devices: outcome.removedDevices,
    removed_links: outcome.removedLinks,
  };
}

/**
 * The groups of a realm (or both) with their member counts.
 *
 * @example
 * const groups = await listGroups(deps, { realm: 'application' });
 */
export async function listGroups(deps: Pick<AuthDeps, 'store'>, input: { readonly realm?: unknown }): Promise<GroupJson[]> {
  const realm = input.realm === undefined ? undefined : realmOf(input.realm);
  const groups = await deps.store.listGroups(realm === undefined ? {} : { realm });
  return groups.map((g) => ({ realm: g.realm, name: g.name, id: g.id, members: g.members }));
}

/** What an identity provider says about a user at sign-in (already checked: see `identityAttributesFromClaims`). */
export interface ProvidedAttributes {
  readonly name?: string;
  readonly email?: string;
  readonly emailVerified?: boolean;
  readonly groups?: readonly string[];
}

/**
 * The user after an identity provider's sign-in refreshed its attributes, with a `user.updated`
 * event naming what changed, or null when nothing does. An attribute is refreshed only while
 * unset or owned by this provider (`provider:<name>`): what an operator or the directory set
 * stays theirs (an operator hands an attribute back by clearing it). An attribute the provider
 * no longer sends is cleared when the provider owned it.
 *
 * @example
 * store.createLinkSession({ ..., refresh: (current) => refreshedUser(deps, current, attrs, 'google', now) }, events);
 */
export function refreshedUser(
  deps: Pick<AuthDeps, 'clock' | 'random'>,
  current: UserRecord,
  provided: ProvidedAttributes,
  provider: string,
  now: number,
): { readonly user: UserRecord; readonly events: readonly AuditEventDraft[] } | null {
  const source: AttributeSource = `provider:${provider}`;
  const owns = (s: AttributeSource | null): boolean => s === null || s === source;
  let user: UserRecord = current;
  if (owns(current.nameSource)) {
    user = { ...user, name: provided.name ?? null, nameSource: provided.name === undefined ? null : source };
  }
  if (owns(current.emailSource)) {
    user = {
      ...user,
      email: provided.email ?? null,
      emailVerified: provided.email !== undefined && provided.emailVerified === true,
      emailSource: provided.email === undefined ? null : source,
    };
  }
  if (owns(current.groupsSource) && (provided.groups !== undefined || current.groupsSource === source)) {
    const groups = provided.groups ?? [];
    user = { ...user, groups, groupsSource: provided.groups === undefined ? null : source };
  }
  const changes = changedAttributes(current, user);
  if (Object.keys(changes).length === 0) return null;
  const updated = Object.freeze({ ...user, updatedAt: now });
  return {
    user: updated,
    events: [
      auditDraft(deps, 'user.updated', {
        realm: current.realm,
        subject: current.subject,
        at: now,
        data: { via: 'provider', provider, by_subject: null, by_session: null, ...changes },
      }),
    ],
  };
}

/**
 * The identity attributes in a provider's claims, checked like an operator's input; a claim
 * that fails its check is left out (and named in `dropped`), never passed on. `groupsClaim`
 * names the claim holding the groups (an array of strings, or one space- or comma-separated
 * string); with `groupPrefix`, only groups starting with it are kept, the prefix removed.
 *
 * @example
 * identityAttributesFromClaims({ email: 'ada@example.com', email_verified: true, name: 'Ada' });
 */
export function identityAttributesFromClaims(
  claims: Readonly<Record<string, unknown>>,
  options: { readonly groupsClaim?: string | null; readonly groupPrefix?: string | null } = {},
): { readonly attributes: ProvidedAttributes; readonly dropped: readonly string[] } {
  const out: { name?: string; email?: string; emailVerified?: boolean; groups?: readonly string[] } = {};
  const dropped: string[] = [];
  if (claims.name !== undefined) {
    const n = checkDisplayName(claims.name);
    if ('name' in n) out.name = n.name;
    else dropped.push('name');
  }
  if (claims.email !== undefined) {
    const e = checkEmail(claims.email);
    if ('email' in e) {
      out.email = e.email;
      out.emailVerified = claims.email_verified === true;
    } else dropped.push('email');
  }
  const groupsClaim = options.groupsClaim ?? null;
  if (groupsClaim !== null && claims[groupsClaim] !== undefined) {
    const raw = claims[groupsClaim];
    const list = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(/[\s,]+/).filter((g) => g !== '') : null;
    if (list === null) dropped.push('groups');
    else {
      const prefix = options.groupPrefix ?? '';
      const kept: string[] = [];
      for (const g of list) {
        if (typeof g !== 'string' || !g.startsWith(prefix)) continue;
        const name = g.slice(prefix.length);
        if (groupNameProblem(name) === null) kept.push(name);
        else dropped.push(`group ${JSON.stringify(g.slice(0, 70))}`);
      }
      const checkedGroups = checkGroups(kept);
      if ('groups' in checkedGroups) out.groups = checkedGroups.groups;
      else dropped.push('groups');
    }
  }
  return { attributes: out, dropped };
}

function lastManagementUser(action: 'disable' | 'remove'): AuthError {
  return new AuthError(
    'last_management_user',
    `refusing to ${action} the last active management user: enroll or enable another administrator first`,
  );
}

/** The user with the attributes of `input` applied (each one checked; bad input throws `invalid_request`). */
function applyAttributes(current: UserRecord, input: UserAttributesInput, source: AttributeSource, now: number): UserRecord {
  const known = new Set(['name', 'email', 'email_verified', 'groups', 'user_name', 'external_id', 'status']);
  for (const key of Object.keys(input)) {
    if (!known.has(key)) throw new AuthError('invalid_request', `unknown user attribute ${JSON.stringify(key)}`);
  }
  const u: { -readonly [K in keyof UserRecord]: UserRecord[K] } = { ...current };
  if (input.name !== undefined) {
    if (input.name === null) {
      u.name = null;
      u.nameSource = null;
    } else {
      u.name = checked(checkDisplayName(input.name)).name;
      u.nameSource = source;
    }
  }
  if (input.email !== undefined) {
    if (input.email === null) {
      u.email = null;
      u.emailVerified = false;
      u.emailSource = null;
    } else {
      const email = checked(checkEmail(input.email)).email;
      if (email !== current.email) u.emailVerified = false;
      u.email = email;
      u.emailSource = source;
    }
  }
  if (input.email_verified !== undefined) {
    if (typeof input.email_verified !== 'boolean') throw new AuthError('invalid_request', 'email_verified must be true or false');
    if (input.email_verified && u.email === null) throw new AuthError('invalid_request', 'email_verified needs an email');
    u.emailVerified = input.email_verified;
  }
  if (input.groups !== undefined) {
    if (input.groups === null) {
      u.groups = [];
      u.groupsSource = null;
    } else {
      const g = checkGroups(input.groups);
      if ('problem' in g) throw new AuthError('invalid_request', g.problem);
      u.groups = g.groups;
      u.groupsSource = g.groups.length === 0 ? null : source;
    }
  }
  if (input.user_name !== undefined) u.userName = input.user_name === null ? null : checked(checkUserName(input.user_name)).userName;
  if (input.external_id !== undefined) {
    u.externalId = input.external_id === null ? null : checked(checkUserName(input.external_id, 'external_id')).userName;
  }
  if (input.status !== undefined) {
    if (!USER_STATUSES.includes(input.status as UserStatus)) throw new AuthError('invalid_request', 'status must be active or disabled');
    u.status = input.status as UserStatus;
    if (u.status !== current.status) u.disabledAt = u.status === 'disabled' ? now : null;
  }
  u.updatedAt = now;
  return Object.freeze(u);
}

/** Each attribute that differs, as `<attr>_old` / `<attr>_new` (groups comma-joined): never a token. */
function changedAttributes(a: UserRecord, b: UserRecord): Record<string, string | boolean | null> {
  const out: Record<string, string | boolean | null> = {};
  const diff = (key: string, x: string | boolean | null, y: string | boolean | null): void => {
    if (x !== y) {
      out[`${key}_old`] = x;
      out[`${key}_new`] = y;
    }
  };
  diff('name', a.name, b.name);
  diff('email', a.email, b.email);
  diff('email_verified', a.emailVerified, b.emailVerified);
  diff('groups', a.groups.join(','), b.groups.join(','));
  diff('user_name', a.userName, b.userName);
  diff('external_id', a.externalId, b.externalId);
  if (a.nameSource !== b.nameSource) out.name_source = b.nameSource;
  if (a.emailSource !== b.emailSource) out.email_source = b.emailSource;
  if (a.groupsSource !== b.groupsSource) out.groups_source = b.groupsSource;
  return out;
}

function describeUser(u: UserRecord): AuditData {
  return {
    name: u.name,
    email: u.email,
    email_verified: u.emailVerified,
    groups: u.groups.join(','),
    status: u.status,
    user_name: u.userName,
  };
}

function actorData(actor: UserActor): AuditData {
  return {
    via: actor.via,
    by_subject: actor.subject,
    by_session: actor.session,
    ...(actor.token === undefined ? {} : { by_token: actor.token }),
  };
}

function checked<T extends object>(r: T | { readonly problem: string }): T {
  if ('problem' in r) throw new AuthError('invalid_request', (r as { problem: string }).problem);
  return r as T;
}

function realmOf(realm: unknown): Realm {
  if (!isRealm(realm)) throw new AuthError('invalid_request', 'realm must be management or application');
  return realm;
}

function subjectOf(subject: unknown, field = 'subject'): string {
  if (!isIdOfKind(subject, 'subject')) throw new AuthError('invalid_request', `${field} must be a subject id (sub_...)`);
  return subject;
}

import type { AuthDeps } from '../deps.js';
import { AuthError } from '../errors.js';
import { isIdOfKind, newId } from '../ids.js';
import {
  applyScimGroupPatch,
  applyScimUserPatch,
  SCIM_REALM,
  ScimError,
  type ScimFilter,
  type ScimGroupState,
  scimGroupInput,
  scimPatchOperations,
  scimSameEmail,
  scimUserAttributes,
  scimUserChanges,
  scimUserInput,
  scimUserNameMatches,
  scimUserState,
} from '../scim.js';
import type { GroupRecord, ScimTokenRecord, UserFilter, UserRecord } from '../store.js';
import { checkEmail, checkUserName, groupNameProblem, MAX_USER_GROUPS } from '../users.js';
import { auditDraft } from './event.js';
import { addUser, decideUserUpdate, removeUser, type UserActor, updateUser } from './users.js';

// The SCIM service's use cases: a directory (authenticated by its SCIM token) provisions the
// users and groups of the application realm through the user use cases, as `via: 'scim'` with
// the token's id, each attribute it sets owned by `scim`. The mapping rules are core's `scim.ts`.

/** The actor of every change a SCIM token makes. */
export function scimActor(token: ScimTokenRecord): UserActor {
  return { via: 'scim', subject: null, session: null, token: token.id };
}

function noSuchUser(): ScimError {
  return new ScimError('not_found', null, 'no such user');
}

function noSuchGroup(): ScimError {
  return new ScimError('not_found', null, 'no such group');
}

const PAGE = 1000;

function bySubject(a: UserRecord, b: UserRecord): number {
  return a.subject < b.subject ? -1 : a.subject > b.subject ? 1 : 0;
}

/** Every user matching `filter`, page by page (the store's pages are keyed by subject). */
async function allUsers(deps: Pick<AuthDeps, 'store'>, filter: Omit<UserFilter, 'limit' | 'after'>): Promise<UserRecord[]> {
  const out: UserRecord[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await deps.store.listUsers({ ...filter, limit: PAGE, ...(after === undefined ? {} : { after }) });
    out.push(...page);
    if (page.length < PAGE) return out;
    after = page.at(-1)?.subject;
  }
}

/**
 * An application-realm user by subject (a SCIM User's id), or `404`.
 *
 * @example
 * const user = await scimGetUser(deps, 'sub_...');
 */
export async function scimGetUser(deps: Pick<AuthDeps, 'store'>, id: string): Promise<UserRecord> {
  if (!isIdOfKind(id, 'subject')) throw noSuchUser();
  const user = await deps.store.getUser(id);
  if (user === null || user.realm !== SCIM_REALM) throw noSuchUser();
  return user;
}

/**
 * The application-realm users a `userName eq "<value>"` finds: those SHOWN with that userName
 * (core's `scimUserNameMatches`: the directory's userName, else the email case-insensitively,
 * else the subject), so a directory looking up a person it did not create finds them instead of
 * creating a second account. Candidates come from the store's filters (exact userName, the
 * case-insensitive text match, the subject), never a scan of every user.
 */
async function usersShownAs(deps: Pick<AuthDeps, 'store'>, value: string): Promise<UserRecord[]> {
  const found = new Map<string, UserRecord>();
  for (const u of await allUsers(deps, { realm: SCIM_REALM, userName: value })) found.set(u.subject, u);
  // Only an address can be an email (and a short value would match half the realm as text).
  if (value.includes('@')) {
    for (const u of await allUsers(deps, { realm: SCIM_REALM, text: value })) {
      if (scimUserNameMatches(u, value)) found.set(u.subject, u);
    }
  }
  if (isIdOfKind(value, 'subject')) {
    const u = await deps.store.getUser(value);
    if (u !== null && u.realm === SCIM_REALM && scimUserNameMatches(u, value)) found.set(u.subject, u);
  }
  return [...found.values()].sort(bySubject);
}

/**
 * The application-realm users a SCIM list asks for (`filter`: `username` eq, matching the
 * userName each user is shown with, or `externalid` eq), the page from `startIndex` (1-based)
 * of `count`, and the total. Without a filter the store is read page by page and only the asked
 * page is kept (the total needs every user counted).
 *
 * @example
 * const { total, users } = await scimListUsers(deps, { filter: { attr: 'username', value: 'bjensen' }, startIndex: 1, count: 100 });
 */
export async function scimListUsers(
  deps: Pick<AuthDeps, 'store'>,
  input: { readonly filter: ScimFilter | null; readonly startIndex: number; readonly count: number },
): Promise<{ readonly total: number; readonly users: readonly UserRecord[] }> {
  const from = input.startIndex - 1;
  if (input.filter === null) {
    const users: UserRecord[] = [];
    let total = 0;
    let after: string | undefined;
    for (;;) {
      const page = await deps.store.listUsers({ realm: SCIM_REALM, limit: PAGE, ...(after === undefined ? {} : { after }) });
      for (const u of page) {
        if (total >= from && users.length < input.count) users.push(u);
        total += 1;
      }
      if (page.length < PAGE) return { total, users };
      after = page.at(-1)?.subject;
    }
  }
  let users: UserRecord[];
  const checked = checkUserName(input.filter.value, input.filter.attr);
  if ('problem' in checked) users = [];
  else if (input.filter.attr === 'username') users = await usersShownAs(deps, checked.userName);
  else users = await allUsers(deps, { realm: SCIM_REALM, externalId: checked.userName });
  return { total: users.length, users: users.slice(from, from + input.count) };
}

/**
 * Refuses (`409 user_exists`, SCIM `uniqueness`) to create a user the realm already has: one
 * shown with that userName (a user the directory did not create is shown with its email, else
 * its subject), or one holding that email, verified. A directory that did not find the person
 * must not make a second account of them: its later `active: false` or DELETE would end the
 * duplicate and leave the real account active.
 */
async function refuseExistingPerson(deps: Pick<AuthDeps, 'store'>, input: ReturnType<typeof scimUserInput>): Promise<void> {
  const userName = checkUserName(input.userName, 'userName');
  if (!('problem' in userName) && (await usersShownAs(deps, userName.userName)).length > 0) {
    throw new ScimError(
      'user_exists',
      'uniqueness',
      'a user of the realm is already shown with that userName: find it with filter=userName eq "..." and change it instead',
    );
  }
  if (input.email === null) return;
  const email = checkEmail(input.email);
  if ('problem' in email) return; // refused later, by the user rules
  const holders = await allUsers(deps, { realm: SCIM_REALM, text: email.email });
  if (holders.some((u) => u.emailVerified && u.email !== null && scimSameEmail(u.email, email.email))) {
    throw new ScimError(
      'user_exists',
      'uniqueness',
      'a user of the realm already has that email (verified): find it with filter=userName eq "<email>" and change it instead',
    );
  }
}

/**
 * Creates an application-realm user from a SCIM User (`POST /Users`): audited `user.created`
 * by the token. A `userName` another user is shown with, or an email another user holds
 * verified, is `409 uniqueness` (the directory must find and change that user instead).
 *
 * @example
 * const user = await scimCreateUser(deps, { body, token });
 */
export async function scimCreateUser(
  deps: AuthDeps,
  input: { readonly body: unknown; readonly token: ScimTokenRecord },
): Promise<UserRecord> {
  const parsed = scimUserInput(input.body);
  const attributes = scimUserAttributes(parsed);
  await refuseExistingPerson(deps, parsed);
  const created = await addUser(deps, { realm: SCIM_REALM, attributes, actor: scimActor(input.token), source: 'scim' });
  return scimGetUser(deps, created.subject);
}

/**
 * Replaces an application-realm user's attributes with a SCIM User (`PUT /Users/:id`): what the
 * body leaves out is cleared (`active` left out stays as it is).
 *
 * @example
 * const user = await scimReplaceUser(deps, { id, body, token });
 */
export async function scimReplaceUser(
  deps: AuthDeps,
  input: { readonly id: string; readonly body: unknown; readonly token: ScimTokenRecord },
): Promise<UserRecord> {
  await scimGetUser(deps, input.id);
  const attributes = scimUserAttributes(scimUserInput(input.body));
  await updateUser(deps, { subject: input.id, attributes, actor: scimActor(input.token), source: 'scim', realm: SCIM_REALM });
  return scimGetUser(deps, input.id);
}

/**
 * Applies a SCIM PATCH to an application-realm user (`PATCH /Users/:id`), read, decided and
 * written in one store transaction: only the attributes the operations change are set.
 * `active: false` disables the user, which revokes every session at once.
 *
 * @example
 * await scimPatchUser(deps, { id, body: { schemas: [SCIM_SCHEMA.patchOp], Operations: [{ op: 'replace', value: { active: false } }] }, token });
 */
export async function scimPatchUser(
  deps: AuthDeps,
  input: { readonly id: string; readonly body: unknown; readonly token: ScimTokenRecord },
): Promise<UserRecord> {
  const ops = scimPatchOperations(input.body);
  if (!isIdOfKind(input.id, 'subject')) throw noSuchUser();
  const now = deps.clock.now();
  const actor = scimActor(input.token);
  const outcome = await deps.store.changeUser({ subject: input.id, now }, (current, context) => {
    if (current.realm !== SCIM_REALM) throw noSuchUser();
    const before = scimUserState(current);
    const attributes = scimUserChanges(before, applyScimUserPatch(before, ops));
    return decideUserUpdate(deps, current, context, { attributes, source: 'scim', actor, now });
  });
  if (outcome.kind === 'unknown' || outcome.kind === 'removed') throw noSuchUser();
  if (outcome.kind === 'user_name_taken') throw new AuthError('user_exists', 'another user of the realm has that userName');
  if (outcome.kind === 'updated') {
    deps.log.info({ event: 'user.updated', subject: input.id, revoked_sessions: outcome.revokedSessions, via: 'scim' }, 'user changed');
  }
  return outcome.user;
}

/**
 * Removes an application-realm user (`DELETE /Users/:id`): its devices, links and sessions go
 * with it, audited `user.removed` by the token.
 *
 * @example
 * await scimDeleteUser(deps, { id, token });
 */
export async function scimDeleteUser(deps: AuthDeps, input: { readonly id: string; readonly token: ScimTokenRecord }): Promise<void> {
  if (!isIdOfKind(input.id, 'subject')) throw noSuchUser();
  try {
    await removeUser(deps, { subject: input.id, actor: scimActor(input.token), realm: SCIM_REALM });
  } catch (err) {
    if (err instanceof AuthError && err.code === 'not_found') throw noSuchUser();
    throw err;
  }
}

// ---- Groups --------------------------------------------------------------------------------

/**
 * The group records of the application realm, by name (how a user's groups are shown as SCIM
 * references).
 *
 * @example
 * const refs = await scimGroupRefs(deps);
 */
export async function scimGroupRefs(deps: Pick<AuthDeps, 'store'>): Promise<{ readonly id: string; readonly name: string }[]> {
  const groups = await deps.store.listGroups({ realm: SCIM_REALM });
  return groups.flatMap((g) => (g.id === null ? [] : [{ id: g.id, name: g.name }]));
}

/** A group record of the application realm by id, or `404`. */
export async function scimGetGroup(deps: Pick<AuthDeps, 'store'>, id: string): Promise<GroupRecord> {
  if (!isIdOfKind(id, 'group')) throw noSuchGroup();
  const group = await deps.store.getGroup(id);
  if (group === null || group.realm !== SCIM_REALM) throw noSuchGroup();
  return group;
}

/**
 * The members of a group: the application-realm users carrying its name.
 *
 * @example
 * const members = await scimGroupMembers(deps, group);
 */
export async function scimGroupMembers(deps: Pick<AuthDeps, 'store'>, group: GroupRecord): Promise<UserRecord[]> {
  return allUsers(deps, { realm: SCIM_REALM, group: group.name });
}

/**
 * The group records a SCIM list asks for (`filter`: `displayname` or `externalid` eq), the page
 * and the total.
 *
 * @example
 * const { total, groups } = await scimListGroups(deps, { filter: null, startIndex: 1, count: 100 });
 */
export async function scimListGroups(
  deps: Pick<AuthDeps, 'store'>,
  input: { readonly filter: ScimFilter | null; readonly startIndex: number; readonly count: number },
): Promise<{ readonly total: number; readonly groups: readonly GroupRecord[] }> {
  const f = input.filter;
  const from = input.startIndex - 1;
  const refs = (await scimGroupRefs(deps)).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const records = async (ids: readonly { readonly id: string }[]): Promise<GroupRecord[]> => {
    const out: GroupRecord[] = [];
    for (const r of ids) {
      const g = await deps.store.getGroup(r.id);
      if (g !== null && g.realm === SCIM_REALM) out.push(g);
    }
    return out;
  };
  if (f !== null && f.attr === 'externalid') {
    // The one filter the group summaries cannot answer: every record is read.
    const matching = (await records(refs)).filter((g) => g.externalId === f.value);
    return { total: matching.length, groups: matching.slice(from, from + input.count) };
  }
  // Paged on the summaries; only the page's records are read.
  const named = f === null ? refs : refs.filter((r) => r.name === f.value);
  return { total: named.length, groups: await records(named.slice(from, from + input.count)) };
}

function checkedGroupState(state: ScimGroupState): ScimGroupState {
  const problem = groupNameProblem(state.displayName);
  if (problem !== null) throw new ScimError('invalid_request', 'invalidValue', `displayName: ${problem}`);
  if (state.externalId !== null) {
    const ext = checkUserName(state.externalId, 'externalId');
    if ('problem' in ext) throw new ScimError('invalid_request', 'invalidValue', ext.problem);
    return { ...state, externalId: ext.userName };
  }
  return state;
}

/**
 * Checks every member a group change adds BEFORE anything is written: each an application-realm
 * user with room for one more group (at most {@link MAX_USER_GROUPS}), so a refused request
 * (`400 invalidValue`) writes nothing.
 */
async function checkMembers(deps: Pick<AuthDeps, 'store'>, subjects: readonly string[], group: string): Promise<void> {
  for (const s of subjects) {
    const user = isIdOfKind(s, 'subject') ? await deps.store.getUser(s) : null;
    if (user === null || user.realm !== SCIM_REALM)
      throw new ScimError('invalid_request', 'invalidValue', `member ${JSON.stringify(s.slice(0, 70))} is not a user`);
    if (!user.groups.includes(group) && user.groups.length >= MAX_USER_GROUPS)
      throw new ScimError(
        'invalid_request',
        'invalidValue',
        `member ${s} is already in ${MAX_USER_GROUPS} groups, the most a user can be in`,
      );
  }
}

/** Takes `remove` out of and puts `add` into one user's groups (source `scim`), in one store transaction. */
async function changeMembership(
  deps: AuthDeps,
  subject: string,
  change: { readonly add: string | null; readonly remove: string | null },
  actor: UserActor,
): Promise<void> {
  const now = deps.clock.now();
  const outcome = await deps.store.changeUser({ subject, now }, (current, context) => {
    if (current.realm !== SCIM_REALM) return { kind: 'none' };
    const groups = new Set(current.groups);
    if (change.remove !== null) groups.delete(change.remove);
    if (change.add !== null) groups.add(change.add);
    return decideUserUpdate(deps, current, context, { attributes: { groups: [...groups] }, source: 'scim', actor, now });
  });
  if (outcome.kind === 'unknown' && change.add !== null)
    throw new ScimError('invalid_request', 'invalidValue', `member ${subject} is not a user`);
}

function groupEvent(deps: AuthDeps, type: 'group.saved' | 'group.removed', group: GroupRecord, token: ScimTokenRecord, now: number) {
  return auditDraft(deps, type, {
    realm: group.realm,
    at: now,
    data: {
      via: 'scim',
      by_subject: null,
      by_session: null,
      by_token: token.id,
      group_id: group.id,
      name: group.name,
      external_id: group.externalId,
    },
  });
}

async function saveGroupRecord(deps: AuthDeps, group: GroupRecord, token: ScimTokenRecord): Promise<void> {
  const saved = await deps.store.saveGroup(group, groupEvent(deps, 'group.saved', group, token, group.updatedAt));
  if (saved === 'name_taken') throw new AuthError('group_exists', `another group of the realm is named ${group.name}`);
}

/**
 * Creates a group record from a SCIM Group (`POST /Groups`) and adds its members (each a
 * change of that user's groups, source `scim`), every member checked before anything is
 * written (a refused request writes nothing; the writes are then one transaction each). A `displayName` that is not a valid group name
 * (`[a-z0-9][a-z0-9._-]{0,63}`) is `400 invalidValue`, never rewritten; a taken one `409
 * uniqueness`.
 *
 * @example
 * const group = await scimCreateGroup(deps, { body: { schemas: [SCIM_SCHEMA.group], displayName: 'tour-guides' }, token });
 */
export async function scimCreateGroup(
  deps: AuthDeps,
  input: { readonly body: unknown; readonly token: ScimTokenRecord },
): Promise<GroupRecord> {
  const state = checkedGroupState(scimGroupInput(input.body));
  await checkMembers(deps, state.members, state.displayName);
  const now = deps.clock.now();
  const group: GroupRecord = {
    id: newId('group', deps.clock, deps.random),
    realm: SCIM_REALM,
    name: state.displayName,
    externalId: state.externalId,
    createdAt: now,
    updatedAt: now,
  };
  await saveGroupRecord(deps, group, input.token);
  const actor = scimActor(input.token);
  for (const s of state.members) await changeMembership(deps, s, { add: group.name, remove: null }, actor);
  deps.log.info({ event: 'group.saved', group_id: group.id, via: 'scim' }, 'group created');
  return group;
}

/**
 * Brings a group from its current state to `next`: renamed (on every member too), its
 * externalId, its members; the name and every added member checked before anything is written.
 */
async function applyGroupState(deps: AuthDeps, group: GroupRecord, next: ScimGroupState, token: ScimTokenRecord): Promise<GroupRecord> {
  const state = checkedGroupState(next);
  const current = (await scimGroupMembers(deps, group)).map((u) => u.subject);
  const adds = state.members.filter((s) => !current.includes(s));
  const removes = current.filter((s) => !state.members.includes(s));
  await checkMembers(deps, adds, state.displayName);
  const actor = scimActor(token);
  let saved = group;
  if (state.displayName !== group.name || state.externalId !== group.externalId) {
    saved = { ...group, name: state.displayName, externalId: state.externalId, updatedAt: deps.clock.now() };
    await saveGroupRecord(deps, saved, token);
    // Group membership is the name each user carries: a rename moves every member that stays.
    if (saved.name !== group.name) {
      for (const s of current) if (!removes.includes(s)) await changeMembership(deps, s, { add: saved.name, remove: group.name }, actor);
    }
  }
  for (const s of removes) await changeMembership(deps, s, { add: null, remove: group.name }, actor);
  for (const s of adds) await changeMembership(deps, s, { add: saved.name, remove: null }, actor);
  return saved;
}

/**
 * Replaces a group with a SCIM Group (`PUT /Groups/:id`): its name, externalId and exactly the
 * members listed.
 *
 * @example
 * await scimReplaceGroup(deps, { id, body, token });
 */
export async function scimReplaceGroup(
  deps: AuthDeps,
  input: { readonly id: string; readonly body: unknown; readonly token: ScimTokenRecord },
): Promise<GroupRecord> {
  const group = await scimGetGroup(deps, input.id);
  return applyGroupState(deps, group, scimGroupInput(input.body), input.token);
}

/**
 * Applies a SCIM PATCH to a group (`PATCH /Groups/:id`): members added or removed (each a
 * change of that user's groups, source `scim`), renamed, its externalId.
 *
 * @example
 * await scimPatchGroup(deps, { id, body: { schemas: [SCIM_SCHEMA.patchOp], Operations: [{ op: 'add', path: 'members', value: [{ value: 'sub_...' }] }] }, token });
 */
export async function scimPatchGroup(
  deps: AuthDeps,
  input: { readonly id: string; readonly body: unknown; readonly token: ScimTokenRecord },
): Promise<GroupRecord> {
  const ops = scimPatchOperations(input.body);
  const group = await scimGetGroup(deps, input.id);
  const members = (await scimGroupMembers(deps, group)).map((u) => u.subject);
  const next = applyScimGroupPatch({ displayName: group.name, externalId: group.externalId, members }, ops);
  return applyGroupState(deps, group, next, input.token);
}

/**
 * Deletes a group record (`DELETE /Groups/:id`); the store takes its name out of every user.
 *
 * @example
 * await scimDeleteGroup(deps, { id, token });
 */
export async function scimDeleteGroup(deps: AuthDeps, input: { readonly id: string; readonly token: ScimTokenRecord }): Promise<void> {
  const group = await scimGetGroup(deps, input.id);
  const now = deps.clock.now();
  const deleted = await deps.store.deleteGroup({ id: group.id, now }, groupEvent(deps, 'group.removed', group, input.token, now));
  if (!deleted) throw noSuchGroup();
  deps.log.info({ event: 'group.removed', group_id: group.id, via: 'scim' }, 'group removed');
}

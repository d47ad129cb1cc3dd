// SCIM 2.0 (RFC 7643 resources, RFC 7644 protocol) as svc maps it onto its users and groups:
// what a directory's User and Group resources mean here, how PATCH operations and filters are
// read, and what the resources look like on the way out. Pure: the gateway's SCIM routes only
// apply these (docs/scim.md).
import { AuthError, type ErrorCode } from './errors.js';
import type { GroupRecord, UserRecord } from './store.js';
import { rfc3339 } from './time.js';
import type { UserAttributesInput } from './use-cases/users.js';

/** The schema and message URNs of RFC 7643/7644. */
export const SCIM_SCHEMA = {
  user: 'urn:ietf:params:scim:schemas:core:2.0:User',
  group: 'urn:ietf:params:scim:schemas:core:2.0:Group',
  enterpriseUser: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User',
  listResponse: 'urn:ietf:params:scim:api:messages:2.0:ListResponse',
  patchOp: 'urn:ietf:params:scim:api:messages:2.0:PatchOp',
  error: 'urn:ietf:params:scim:api:messages:2.0:Error',
  serviceProviderConfig: 'urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig',
  resourceType: 'urn:ietf:params:scim:schemas:core:2.0:ResourceType',
  schema: 'urn:ietf:params:scim:schemas:core:2.0:Schema',
} as const;

/** The realm a directory provisions: the people who use the applications. */
export const SCIM_REALM = 'application' as const;

/** The path of the SCIM service on the gateway (the base URL an IdP is given ends with it). */
export const SCIM_BASE_PATH = '/.svc/scim/v2';

/** The default and largest `count` of a SCIM list. */
export const SCIM_PAGE_DEFAULT = 100;
export const SCIM_PAGE_MAX = 1000;

/** The most operations one PATCH request may carry. */
export const SCIM_PATCH_MAX_OPERATIONS = 1000;

/** RFC 7644 §3.12 `scimType`s used here. */
export type ScimType =
  | 'invalidFilter'
  | 'invalidSyntax'
  | 'invalidPath'
  | 'invalidValue'
  | 'uniqueness'
  | 'mutability'
  | 'noTarget'
  | 'tooMany';

/**
 * A SCIM refusal: an {@link AuthError} (its registered `code` gives the HTTP status) with the
 * RFC 7644 `scimType` that fits, if any.
 */
export class ScimError extends AuthError {
  readonly scimType: ScimType | null;
  constructor(code: ErrorCode, scimType: ScimType | null, detail: string) {
    super(code, detail);
    this.name = 'ScimError';
    this.scimType = scimType;
  }
}

/** The RFC 7644 §3.12 error body. */
export interface ScimErrorJson {
  readonly schemas: readonly [typeof SCIM_SCHEMA.error];
  readonly status: string;
  readonly scimType?: ScimType;
  readonly detail: string;
}

const SCIM_TYPE_OF_CODE: Partial<Record<ErrorCode, ScimType>> = {
  invalid_request: 'invalidValue',
  user_exists: 'uniqueness',
  group_exists: 'uniqueness',
};

/**
 * The SCIM error of anything a SCIM request threw: a {@link ScimError} as it is; an
 * {@link AuthError} with its status (`invalid_request` is `invalidValue`, `user_exists` and
 * `group_exists` are `uniqueness`), its detail only when it is exposed; anything else a generic 500.
 *
 * @example
 * scimErrorOf(new AuthError('user_exists', 'taken')); // { status: 409, scimType: 'uniqueness', ... }
 */
export function scimErrorOf(err: unknown): ScimError {
  if (err instanceof ScimError) return err;
  if (err instanceof AuthError) {
    const detail = err.expose ? err.detail : 'the request failed';
    return new ScimError(err.code, SCIM_TYPE_OF_CODE[err.code] ?? null, detail);
  }
  return new ScimError('internal_error', null, 'the request failed');
}

/**
 * The RFC 7644 §3.12 body of a SCIM error (`status` is a string there).
 *
 * @example
 * scimErrorJson(new ScimError('user_exists', 'uniqueness', 'userName is taken'));
 */
export function scimErrorJson(err: ScimError): ScimErrorJson {
  return {
    schemas: [SCIM_SCHEMA.error],
    status: String(err.status),
    ...(err.scimType === null ? {} : { scimType: err.scimType }),
    detail: err.detail,
  };
}

function invalid(detail: string, scimType: ScimType = 'invalidValue'): ScimError {
  return new ScimError('invalid_request', scimType, detail);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads `body[key]` case-insensitively (SCIM attribute names are case-insensitive, RFC 7643 §2.1). */
function field(body: Record<string, unknown>, key: string): unknown {
  if (Object.hasOwn(body, key)) return body[key];
  const lower = key.toLowerCase();
  for (const k of Object.keys(body)) if (k.toLowerCase() === lower) return body[k];
  return undefined;
}

function checkSchemas(body: Record<string, unknown>, schema: string): void {
  const schemas = field(body, 'schemas');
  if (schemas === undefined) return;
  if (!Array.isArray(schemas) || !schemas.some((s) => typeof s === 'string' && s.toLowerCase() === schema.toLowerCase())) {
    throw invalid(`schemas must include ${schema}`, 'invalidSyntax');
  }
}

function optionalString(value: unknown, name: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw invalid(`${name} must be a string`);
  return value;
}

// ---- Users ---------------------------------------------------------------------------------

/**
 * What svc keeps of a SCIM User: `userName`, `externalId`, one display name, one email and
 * whether the user is active. Everything else a directory sends is accepted and not kept.
 */
export interface ScimUserState {
  readonly userName: string | null;
  readonly externalId: string | null;
  readonly name: string | null;
  readonly email: string | null;
  readonly active: boolean;
}

/** The name parts a SCIM `name` may carry. */
interface NameParts {
  formatted?: string | null;
  givenName?: string | null;
  familyName?: string | null;
}

/** The display name of a SCIM `name`: `formatted`, else `givenName familyName`, else null. */
function nameOf(parts: NameParts): string | null {
  if (typeof parts.formatted === 'string' && parts.formatted.trim() !== '') return parts.formatted;
  const joined = [parts.givenName, parts.familyName].filter((p): p is string => typeof p === 'string' && p.trim() !== '').join(' ');
  return joined === '' ? null : joined;
}

function namePartsOf(value: unknown): NameParts {
  if (value === undefined || value === null) return {};
  if (!isObject(value)) throw invalid('name must be an object (formatted, givenName, familyName)');
  return {
    formatted: optionalString(field(value, 'formatted'), 'name.formatted'),
    givenName: optionalString(field(value, 'givenName'), 'name.givenName'),
    familyName: optionalString(field(value, 'familyName'), 'name.familyName'),
  };
}

/** The email a SCIM `emails` value names: the primary one, else the first; null for none. */
function emailOf(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  const list = Array.isArray(value) ? value : [value];
  if (list.length === 0) return null;
  for (const e of list) {
    if (!isObject(e) || typeof field(e, 'value') !== 'string') throw invalid('emails must be an array of {"value": "<address>", ...}');
  }
  const objects = list as Record<string, unknown>[];
  const chosen = objects.find((e) => field(e, 'primary') === true || field(e, 'primary') === 'true') ?? objects[0];
  return chosen === undefined ? null : (field(chosen, 'value') as string);
}

function hasPrimary(value: unknown): boolean {
  const list = Array.isArray(value) ? value : [value];
  return list.some((e) => isObject(e) && (field(e, 'primary') === true || field(e, 'primary') === 'true'));
}

/** `active` as a boolean; some directories send the strings "True"/"False". */
function activeOf(value: unknown): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string' && /^(true|false)$/i.test(value)) return value.toLowerCase() === 'true';
  throw invalid('active must be true or false');
}

/**
 * A SCIM User resource (the body of a POST or PUT) as what svc keeps: `userName` (required),
 * `externalId`, the display name (`displayName`, else `name.formatted`, else `name.givenName`
 * and `name.familyName`), the email (the primary of `emails`, else the first) and `active`
 * (`undefined` when not sent). Read-only and unkept attributes (`id`, `meta`, `groups`,
 * `password`, phone numbers, ...) are ignored. Values are checked later, by the user rules.
 *
 * @throws {ScimError} `400 invalidSyntax`/`invalidValue` for a body that is not a User.
 * @example
 * scimUserInput({ schemas: [SCIM_SCHEMA.user], userName: 'bjensen', name: { formatted: 'Barbara Jensen' } });
 */
export function scimUserInput(body: unknown): Omit<ScimUserState, 'active'> & { readonly active: boolean | undefined } {
  if (!isObject(body)) throw invalid('the body must be a SCIM User object', 'invalidSyntax');
  checkSchemas(body, SCIM_SCHEMA.user);
  const userName = field(body, 'userName');
  if (typeof userName !== 'string' || userName.trim() === '') throw invalid('userName is required');
  const displayName = optionalString(field(body, 'displayName'), 'displayName');
  const name = displayName !== null && displayName.trim() !== '' ? displayName : nameOf(namePartsOf(field(body, 'name')));
  const active = field(body, 'active');
  return {
    userName,
    externalId: optionalString(field(body, 'externalId'), 'externalId'),
    name,
    email: emailOf(field(body, 'emails')),
    active: active === undefined || active === null ? undefined : activeOf(active),
  };
}

/**
 * The user attributes of a whole SCIM User (POST, or PUT: an attribute not sent is cleared,
 * except `active`, which stays as it is when not sent). A directory's email is taken as
 * verified: the directory is the company's own record of its people (docs/scim.md).
 *
 * @example
 * const attributes = scimUserAttributes(scimUserInput(body));
 */
export function scimUserAttributes(input: ReturnType<typeof scimUserInput>): UserAttributesInput {
  return {
    user_name: input.userName,
    external_id: input.externalId,
    name: input.name,
    email: input.email,
    ...(input.email === null ? {} : { email_verified: true }),
    ...(input.active === undefined ? {} : { status: input.active ? 'active' : 'disabled' }),
  };
}

/**
 * The SCIM view of a stored user, the starting point of a PATCH.
 *
 * @example
 * scimUserState(user).active; // true
 */
export function scimUserState(u: UserRecord): ScimUserState {
  return { userName: u.userName, externalId: u.externalId, name: u.name, email: u.email, active: u.status === 'active' };
}

/**
 * The user attributes that differ between two SCIM states: only what a PATCH changed, so an
 * attribute it did not touch keeps its value and its source.
 *
 * @example
 * scimUserChanges(before, { ...before, active: false }); // { status: 'disabled' }
 */
export function scimUserChanges(before: ScimUserState, after: ScimUserState): UserAttributesInput {
  const out: { -readonly [K in keyof UserAttributesInput]: UserAttributesInput[K] } = {};
  if (after.userName !== before.userName) out.user_name = after.userName;
  if (after.externalId !== before.externalId) out.external_id = after.externalId;
  if (after.name !== before.name) out.name = after.name;
  if (after.email !== before.email) {
    out.email = after.email;
    if (after.email !== null) out.email_verified = true;
  }
  if (after.active !== before.active) out.status = after.active ? 'active' : 'disabled';
  return out;
}

/** A parsed PATCH path (RFC 7644 §3.5.2): attribute, optional value filter, optional sub-attribute. */
interface PatchPath {
  readonly attr: string;
  readonly filter: ScimFilter | null;
  readonly sub: string | null;
}

const CORE_URN = /^urn:ietf:params:scim:schemas:core:2\.0:(user|group):/i;
const EXTENSION_URN = /^urn:ietf:params:scim:schemas:extension:/i;

function parsePath(path: string): PatchPath | 'extension' {
  const p = path.trim();
  if (EXTENSION_URN.test(p)) return 'extension';
  const bare = p.replace(CORE_URN, '');
  const m = /^([A-Za-z][\w$-]*)(?:\[(.*)\])?(?:\.([A-Za-z][\w$-]*))?$/s.exec(bare);
  if (m === null) throw invalid(`cannot read the path ${describe(path)}`, 'invalidPath');
  const [, attr = '', filterText, sub] = m;
  return {
    attr: attr.toLowerCase(),
    filter: filterText === undefined ? null : parseScimFilter(filterText, 'invalidPath'),
    sub: sub?.toLowerCase() ?? null,
  };
}

/** User attributes a directory may send that svc does not keep: accepted, not stored. */
const UNKEPT_USER_ATTRIBUTES = new Set([
  'nickname',
  'profileurl',
  'title',
  'usertype',
  'preferredlanguage',
  'locale',
  'timezone',
  'password',
  'phonenumbers',
  'ims',
  'photos',
  'addresses',
  'entitlements',
  'roles',
  'x509certificates',
  'schemas',
  'id',
  'meta',
]);

/** One PATCH operation, checked. */
interface PatchOperation {
  readonly op: 'add' | 'remove' | 'replace';
  readonly path: string | null;
  readonly value: unknown;
}

/**
 * The operations of a PATCH body (RFC 7644 §3.5.2), checked: the PatchOp schema, `op` one of
 * add, remove, replace (any letter case: some directories send `Replace`), `path` a string
 * when given (required for remove).
 *
 * @throws {ScimError} `400 invalidSyntax` otherwise.
 * @example
 * scimPatchOperations({ schemas: [SCIM_SCHEMA.patchOp], Operations: [{ op: 'replace', value: { active: false } }] });
 */
export function scimPatchOperations(body: unknown): readonly PatchOperation[] {
  if (!isObject(body)) throw invalid('the body must be a SCIM PatchOp object', 'invalidSyntax');
  const schemas = field(body, 'schemas');
  if (!Array.isArray(schemas) || !schemas.some((s) => typeof s === 'string' && s.toLowerCase() === SCIM_SCHEMA.patchOp.toLowerCase())) {
    throw invalid(`schemas must include ${SCIM_SCHEMA.patchOp}`, 'invalidSyntax');
  }
  const ops = field(body, 'Operations');
  if (!Array.isArray(ops) || ops.length === 0) throw invalid('Operations must be a non-empty array', 'invalidSyntax');
  if (ops.length > SCIM_PATCH_MAX_OPERATIONS) throw invalid(`at most ${SCIM_PATCH_MAX_OPERATIONS} operations per request`, 'tooMany');
  return ops.map((o): PatchOperation => {
    if (!isObject(o)) throw invalid('each operation must be an object', 'invalidSyntax');
    const op = field(o, 'op');
    if (typeof op !== 'string' || !['add', 'remove', 'replace'].includes(op.toLowerCase())) {
      throw invalid('op must be add, remove or replace', 'invalidSyntax');
    }
    const path = field(o, 'path');
    if (path !== undefined && path !== null && (typeof path !== 'string' || path.trim() === ''))
      throw invalid('path must be a string', 'invalidPath');
    const lower = op.toLowerCase() as PatchOperation['op'];
    const value = field(o, 'value');
    if (lower === 'remove' && (path === undefined || path === null)) throw invalid('remove needs a path', 'noTarget');
    if (lower !== 'remove' && value === undefined) throw invalid(`${lower} needs a value`, 'invalidSyntax');
    return { op: lower, path: typeof path === 'string' ? path : null, value };
  });
}

/** Splits a stored display name into a given and family name, the best guess for a PATCH of one part. */
function splitName(name: string | null): { givenName: string | null; familyName: string | null } {
  if (name === null) return { givenName: null, familyName: null };
  const i = name.indexOf(' ');
  return i < 0 ? { givenName: name, familyName: null } : { givenName: name.slice(0, i), familyName: name.slice(i + 1) };
}

/**
 * A user's SCIM state after a PATCH (RFC 7644 §3.5.2): `add`/`replace`/`remove` on `active`,
 * `userName`, `displayName`, `externalId`, `name` (and `name.formatted`, `.givenName`,
 * `.familyName`), `emails` (and `emails[<filter>].value`); an operation without a path takes an
 * object of attributes (`{"op": "replace", "value": {"active": false}}`). svc keeps one email:
 * replacing the emails keeps their primary (else first) one; adding emails replaces the kept one
 * only with a primary one (or when none is kept); `emails[<filter>].value` sets it; removing it
 * clears it. One part of a name (given or
 * family) replaces that part of the stored display name (split at its first space). Attributes
 * svc does not keep (phone numbers, the enterprise extension, ...) are accepted and ignored;
 * `groups` is read-only (`400 mutability`, RFC 7643: changed through the Group); anything else
 * is `400 invalidPath`.
 *
 * @throws {ScimError} for an operation that cannot apply.
 * @example
 * applyScimUserPatch(state, scimPatchOperations(body)).active; // false
 */
export function applyScimUserPatch(state: ScimUserState, ops: readonly PatchOperation[]): ScimUserState {
  const s: { -readonly [K in keyof ScimUserState]: ScimUserState[K] } = { ...state };
  let parts: NameParts | null = null;
  const setPart = (key: keyof NameParts, value: string | null): void => {
    if (parts === null) parts = key === 'formatted' ? {} : splitName(s.name);
    parts[key] = value;
  };
  const apply = (op: PatchOperation['op'], path: PatchPath | 'extension', value: unknown): void => {
    if (path === 'extension') return;
    const remove = op === 'remove';
    switch (path.attr) {
      case 'active':
        if (remove) throw invalid('active cannot be removed; replace it with false', 'mutability');
        s.active = activeOf(value);
        return;
      case 'username':
        if (remove || value === null) throw invalid('userName is required and cannot be removed', 'mutability');
        if (typeof value !== 'string' || value.trim() === '') throw invalid('userName must be a string');
        s.userName = value;
        return;
      case 'displayname':
        s.name = remove ? null : optionalString(value, 'displayName');
        parts = null;
        return;
      case 'externalid':
        s.externalId = remove ? null : optionalString(value, 'externalId');
        return;
      case 'name': {
        if (path.sub === null) {
          if (remove) {
            s.name = null;
            parts = null;
            return;
          }
          const given = namePartsOf(value);
          if (op === 'replace') parts = {};
          for (const k of ['formatted', 'givenName', 'familyName'] as const)
            if (given[k] !== undefined && given[k] !== null) setPart(k, given[k] ?? null);
          if (parts === null) parts = {};
          return;
        }
        const key = ({ formatted: 'formatted', givenname: 'givenName', familyname: 'familyName' } as const)[path.sub as 'formatted'];
        if (key === undefined) return; // middleName, honorificPrefix, ...: not kept
        setPart(key, remove ? null : optionalString(value, `name.${key}`));
        return;
      }
      case 'emails': {
        if (path.sub !== null && path.sub !== 'value') return; // type, primary, display: not kept
        if (remove) {
          const f = path.filter;
          const target = f !== null && f.attr === 'value' ? f.value : null;
          if (target === null || (s.email !== null && s.email.toLowerCase() === target.toLowerCase())) s.email = null;
          return;
        }
        if (path.sub === 'value' || path.filter !== null) {
          s.email = path.sub === 'value' ? optionalString(value, 'emails.value') : emailOf(value);
          return;
        }
        // svc keeps one email: an added one that is not primary does not displace it.
        if (op === 'add' && s.email !== null && !hasPrimary(value)) return;
        s.email = emailOf(value);
        return;
      }
      case 'groups':
        throw invalid('groups is read-only on a User: change the Group members', 'mutability');
      default:
        if (UNKEPT_USER_ATTRIBUTES.has(path.attr)) return;
        throw invalid(`unknown attribute ${describe(path.attr)}`, 'invalidPath');
    }
  };
  for (const o of ops) {
    if (o.path !== null) {
      apply(o.op, parsePath(o.path), o.value);
      continue;
    }
    if (!isObject(o.value)) throw invalid(`${o.op} without a path needs an object value`, 'invalidSyntax');
    for (const [key, value] of Object.entries(o.value)) {
      const path = parsePath(key);
      // A whole name object given without a path merges (RFC 7644 §3.5.2.1/3).
      apply(o.op, path, value);
    }
  }
  if (parts !== null) {
    const p: NameParts = parts;
    if (p.formatted !== undefined)
      s.name = p.formatted === null || p.formatted.trim() === '' ? nameOf({ ...p, formatted: null }) : p.formatted;
    else s.name = nameOf(p);
  }
  return s;
}

/**
 * The `userName` a stored user is shown with: the directory's `userName`, else the email, else
 * the subject (a user that did not come from the directory).
 *
 * @example
 * scimShownUserName(pairedUser); // 'ann@example.com'
 */
export function scimShownUserName(u: UserRecord): string {
  return u.userName ?? u.email ?? u.subject;
}

/** ASCII lower case (how emails and shown userNames are compared: RFC 7643 userName is case-insensitive). */
function asciiLower(s: string): string {
  return s.replace(/[A-Z]/g, (c) => c.toLowerCase());
}

/**
 * Whether a `userName eq "<value>"` filter finds the user: its userName when it has one (exact,
 * as it is unique), else its email compared case-insensitively, else its subject. So a directory
 * looking up a person by the userName the listing shows finds them.
 *
 * @example
 * scimUserNameMatches(pairedUser, 'Ann@Example.com'); // true when its email is ann@example.com and it has no userName
 */
export function scimUserNameMatches(u: UserRecord, value: string): boolean {
  if (u.userName !== null) return u.userName === value;
  if (u.email !== null) return asciiLower(u.email) === asciiLower(value);
  return u.subject === value;
}

/**
 * Whether two emails are the same address for uniqueness (ASCII case folded).
 *
 * @example
 * scimSameEmail('Ann@example.com', 'ann@example.com'); // true
 */
export function scimSameEmail(a: string, b: string): boolean {
  return asciiLower(a) === asciiLower(b);
}

/**
 * A stored user as a SCIM User resource (RFC 7643 §4.1): `id` is the subject; `userName` is the
 * directory's, else the email, else the subject (a user that did not come from the directory);
 * `groups` (read-only) lists the group records the user is in.
 *
 * @example
 * scimUser(user, [{ id: 'grp_...', name: 'ops' }], 'https://gw.example.com/.svc/scim/v2');
 */
export function scimUser(
  u: UserRecord,
  groups: readonly { readonly id: string; readonly name: string }[],
  base: string,
): Record<string, unknown> {
  const location = `${base}/Users/${u.subject}`;
  return {
    schemas: [SCIM_SCHEMA.user],
    id: u.subject,
    ...(u.externalId === null ? {} : { externalId: u.externalId }),
    userName: scimShownUserName(u),
    ...(u.name === null ? {} : { name: { formatted: u.name }, displayName: u.name }),
    ...(u.email === null ? {} : { emails: [{ value: u.email, type: 'work', primary: true }] }),
    active: u.status === 'active',
    groups: u.groups.flatMap((name) => {
      const g = groups.find((x) => x.name === name);
      return g === undefined ? [] : [{ value: g.id, display: g.name, $ref: `${base}/Groups/${g.id}`, type: 'direct' }];
    }),
    meta: { resourceType: 'User', created: rfc3339(u.createdAt), lastModified: rfc3339(u.updatedAt), location },
  };
}

// ---- Groups --------------------------------------------------------------------------------

/** What svc keeps of a SCIM Group: its name, the directory's id, and the subjects in it. */
export interface ScimGroupState {
  readonly displayName: string;
  readonly externalId: string | null;
  readonly members: readonly string[];
}

function membersOf(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  const list = Array.isArray(value) ? value : [value];
  return list.map((m) => {
    const v = isObject(m) ? field(m, 'value') : undefined;
    if (typeof v !== 'string' || v === '') throw invalid('members must be an array of {"value": "<user id>"}');
    return v;
  });
}

/**
 * A SCIM Group resource (POST or PUT body) as what svc keeps: `displayName` (required; checked
 * as a group name later, never rewritten), `externalId`, and the member ids.
 *
 * @throws {ScimError} `400` for a body that is not a Group.
 * @example
 * scimGroupInput({ schemas: [SCIM_SCHEMA.group], displayName: 'ops', members: [{ value: 'sub_...' }] });
 */
export function scimGroupInput(body: unknown): ScimGroupState {
  if (!isObject(body)) throw invalid('the body must be a SCIM Group object', 'invalidSyntax');
  checkSchemas(body, SCIM_SCHEMA.group);
  const displayName = field(body, 'displayName');
  if (typeof displayName !== 'string') throw invalid('displayName is required');
  return {
    displayName,
    externalId: optionalString(field(body, 'externalId'), 'externalId'),
    members: [...new Set(membersOf(field(body, 'members')))],
  };
}

/**
 * A group's SCIM state after a PATCH: `add`/`remove`/`replace` on `members` (remove with
 * `members[value eq "<id>"]`, or with a value listing the members, or all of them without
 * one), `displayName` and `externalId`; without a path, an object of those attributes.
 *
 * @throws {ScimError} for an operation that cannot apply.
 * @example
 * applyScimGroupPatch(state, ops).members;
 */
export function applyScimGroupPatch(state: ScimGroupState, ops: readonly PatchOperation[]): ScimGroupState {
  let displayName = state.displayName;
  let externalId = state.externalId;
  const members = new Set(state.members);
  const apply = (op: PatchOperation['op'], path: PatchPath | 'extension', value: unknown): void => {
    if (path === 'extension') throw invalid('no extension attributes on a Group', 'invalidPath');
    switch (path.attr) {
      case 'members': {
        if (path.sub !== null && path.sub !== 'value') throw invalid('only members.value can be changed', 'invalidPath');
        if (op === 'remove') {
          if (path.filter !== null) {
            if (path.filter.attr !== 'value') throw invalid('members can be selected by value only', 'invalidFilter');
            members.delete(path.filter.value);
          } else if (value === undefined || value === null) members.clear();
          else for (const m of membersOf(value)) members.delete(m);
          return;
        }
        if (path.filter !== null) throw invalid('add or replace members without a filter', 'invalidPath');
        const given = path.sub === 'value' ? [optionalString(value, 'members.value') ?? ''] : membersOf(value);
        if (op === 'replace') members.clear();
        for (const m of given) if (m !== '') members.add(m);
        return;
      }
      case 'displayname':
        if (op === 'remove') throw invalid('displayName is required and cannot be removed', 'mutability');
        if (typeof value !== 'string') throw invalid('displayName must be a string');
        displayName = value;
        return;
      case 'externalid':
        externalId = op === 'remove' ? null : optionalString(value, 'externalId');
        return;
      case 'id':
      case 'schemas':
      case 'meta':
        return;
      default:
        throw invalid(`unknown attribute ${describe(path.attr)}`, 'invalidPath');
    }
  };
  for (const o of ops) {
    if (o.path !== null) {
      apply(o.op, parsePath(o.path), o.value);
      continue;
    }
    if (!isObject(o.value)) throw invalid(`${o.op} without a path needs an object value`, 'invalidSyntax');
    for (const [key, value] of Object.entries(o.value)) apply(o.op, parsePath(key), value);
  }
  return { displayName, externalId, members: [...members] };
}

/**
 * A group record as a SCIM Group resource (RFC 7643 §4.2); `members` left out when null
 * (`excludedAttributes=members`).
 *
 * @example
 * scimGroup(group, [{ subject: 'sub_...', name: 'Ada' }], base);
 */
export function scimGroup(
  g: GroupRecord,
  members: readonly { readonly subject: string; readonly name: string | null }[] | null,
  base: string,
): Record<string, unknown> {
  return {
    schemas: [SCIM_SCHEMA.group],
    id: g.id,
    ...(g.externalId === null ? {} : { externalId: g.externalId }),
    displayName: g.name,
    ...(members === null
      ? {}
      : {
          members: members.map((m) => ({
            value: m.subject,
            $ref: `${base}/Users/${m.subject}`,
            type: 'User',
            ...(m.name === null ? {} : { display: m.name }),
          })),
        }),
    meta: { resourceType: 'Group', created: rfc3339(g.createdAt), lastModified: rfc3339(g.updatedAt), location: `${base}/Groups/${g.id}` },
  };
}

// ---- Queries -------------------------------------------------------------------------------

/** A SCIM filter svc answers: one attribute `eq` a string. */
export interface ScimFilter {
  /** The attribute, lower-cased, without its schema URN. */
  readonly attr: string;
  readonly value: string;
}

/**
 * Reads a SCIM filter of the one form svc answers, `<attribute> eq "<value>"` (the attribute in
 * any letter case, optionally with its schema URN; the value a JSON string).
 *
 * @throws {ScimError} `400 invalidFilter` (or `scimType` given) for anything else.
 * @example
 * parseScimFilter('userName eq "bjensen"'); // { attr: 'username', value: 'bjensen' }
 */
export function parseScimFilter(text: string, scimType: ScimType = 'invalidFilter'): ScimFilter {
  const m = /^\s*(\S+?)\s+eq\s+("(?:[^"\\]|\\.)*")\s*$/is.exec(text);
  if (m === null) throw invalid(`only filters of the form <attribute> eq "<value>" are supported, got ${describe(text)}`, scimType);
  let value: unknown;
  try {
    value = JSON.parse(m[2] as string);
  } catch {
    throw invalid('the filter value is not a valid string', scimType);
  }
  return { attr: (m[1] as string).replace(CORE_URN, '').toLowerCase(), value: value as string };
}

/**
 * The list filter of a SCIM query on `resource`: `userName` or `externalId` eq for Users,
 * `displayName` or `externalId` eq for Groups; null without a filter.
 *
 * @throws {ScimError} `400 invalidFilter` for any other filter.
 * @example
 * scimListFilter('User', 'userName eq "bjensen"'); // { attr: 'username', value: 'bjensen' }
 */
export function scimListFilter(resource: 'User' | 'Group', filter: unknown): ScimFilter | null {
  if (filter === undefined || filter === '') return null;
  if (typeof filter !== 'string') throw invalid('filter must be a string', 'invalidFilter');
  const f = parseScimFilter(filter);
  const allowed = resource === 'User' ? ['username', 'externalid'] : ['displayname', 'externalid'];
  if (!allowed.includes(f.attr)) {
    throw invalid(
      `${resource}s can be filtered by ${resource === 'User' ? 'userName' : 'displayName'} or externalId (eq) only`,
      'invalidFilter',
    );
  }
  return f;
}

/**
 * The page of a SCIM list (RFC 7644 §3.4.2.4): `startIndex` 1-based (below 1 reads as 1),
 * `count` from 0 to {@link SCIM_PAGE_MAX} (default {@link SCIM_PAGE_DEFAULT}; negative reads as 0).
 *
 * @throws {ScimError} `400 invalidValue` for a value that is not an integer.
 * @example
 * scimPage({ startIndex: '1', count: '10' }); // { startIndex: 1, count: 10 }
 */
export function scimPage(query: { readonly startIndex?: unknown; readonly count?: unknown }): {
  readonly startIndex: number;
  readonly count: number;
} {
  const int = (v: unknown, name: string, fallback: number): number => {
    if (v === undefined || v === '') return fallback;
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^-?\d{1,9}$/.test(v) ? Number(v) : Number.NaN;
    if (!Number.isSafeInteger(n)) throw invalid(`${name} must be an integer`);
    return n;
  };
  const startIndex = Math.max(1, int(query.startIndex, 'startIndex', 1));
  const count = Math.min(SCIM_PAGE_MAX, Math.max(0, int(query.count, 'count', SCIM_PAGE_DEFAULT)));
  return { startIndex, count };
}

/**
 * A SCIM ListResponse (RFC 7644 §3.4.2).
 *
 * @example
 * scimListResponse([user], 1, 1);
 */
export function scimListResponse(resources: readonly unknown[], totalResults: number, startIndex: number): Record<string, unknown> {
  return { schemas: [SCIM_SCHEMA.listResponse], totalResults, startIndex, itemsPerPage: resources.length, Resources: resources };
}

// ---- Discovery (RFC 7644 §4) ---------------------------------------------------------------

/**
 * `/ServiceProviderConfig`: PATCH and filtering supported (filters: `eq` on the listed
 * attributes), no bulk, no sort, no ETags, no password change; OAuth bearer token auth.
 *
 * @example
 * scimServiceProviderConfig('https://gw.example.com/.svc/scim/v2');
 */
export function scimServiceProviderConfig(base: string): Record<string, unknown> {
  return {
    schemas: [SCIM_SCHEMA.serviceProviderConfig],
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
    filter: { supported: true, maxResults: SCIM_PAGE_MAX },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: false },
    authenticationSchemes: [
      {
        type: 'oauthbearertoken',
        name: 'Bearer token',
        description: 'A SCIM token (svcs_...) created with `svc auth scim token create`',
        primary: true,
      },
    ],
    meta: { resourceType: 'ServiceProviderConfig', location: `${base}/ServiceProviderConfig` },
  };
}

/**
 * `/ResourceTypes`: User and Group.
 *
 * @example
 * scimResourceTypes(base).length; // 2
 */
export function scimResourceTypes(base: string): Record<string, unknown>[] {
  return [
    {
      schemas: [SCIM_SCHEMA.resourceType],
      id: 'User',
      name: 'User',
      endpoint: '/Users',
      schema: SCIM_SCHEMA.user,
      meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/User` },
    },
    {
      schemas: [SCIM_SCHEMA.resourceType],
      id: 'Group',
      name: 'Group',
      endpoint: '/Groups',
      schema: SCIM_SCHEMA.group,
      meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/Group` },
    },
  ];
}

function attribute(
  name: string,
  type: string,
  extra: {
    multiValued?: boolean;
    required?: boolean;
    mutability?: string;
    uniqueness?: string;
    subAttributes?: unknown[];
    caseExact?: boolean;
  } = {},
): Record<string, unknown> {
  return {
    name,
    type,
    multiValued: extra.multiValued ?? false,
    required: extra.required ?? false,
    caseExact: extra.caseExact ?? false,
    mutability: extra.mutability ?? 'readWrite',
    returned: 'default',
    uniqueness: extra.uniqueness ?? 'none',
    ...(extra.subAttributes === undefined ? {} : { subAttributes: extra.subAttributes }),
  };
}

/**
 * `/Schemas`: the User and Group attributes svc keeps.
 *
 * @example
 * scimSchemas(base).map((s) => s.id);
 */
export function scimSchemas(base: string): Record<string, unknown>[] {
  return [
    {
      schemas: [SCIM_SCHEMA.schema],
      id: SCIM_SCHEMA.user,
      name: 'User',
      description: 'A person of the application realm',
      attributes: [
        attribute('userName', 'string', { required: true, uniqueness: 'server', caseExact: true }),
        attribute('externalId', 'string', { caseExact: true }),
        attribute('displayName', 'string'),
        attribute('name', 'complex', {
          subAttributes: [attribute('formatted', 'string'), attribute('givenName', 'string'), attribute('familyName', 'string')],
        }),
        attribute('emails', 'complex', {
          multiValued: true,
          subAttributes: [attribute('value', 'string'), attribute('type', 'string'), attribute('primary', 'boolean')],
        }),
        attribute('active', 'boolean'),
        attribute('groups', 'complex', {
          multiValued: true,
          mutability: 'readOnly',
          subAttributes: [
            attribute('value', 'string', { mutability: 'readOnly' }),
            attribute('display', 'string', { mutability: 'readOnly' }),
          ],
        }),
      ],
      meta: { resourceType: 'Schema', location: `${base}/Schemas/${SCIM_SCHEMA.user}` },
    },
    {
      schemas: [SCIM_SCHEMA.schema],
      id: SCIM_SCHEMA.group,
      name: 'Group',
      description: 'A group of the application realm (its displayName is the group name applications see)',
      attributes: [
        attribute('displayName', 'string', { required: true, uniqueness: 'server', caseExact: true }),
        attribute('externalId', 'string', { caseExact: true }),
        attribute('members', 'complex', {
          multiValued: true,
          subAttributes: [
            attribute('value', 'string', { mutability: 'immutable' }),
            attribute('display', 'string', { mutability: 'readOnly' }),
          ],
        }),
      ],
      meta: { resourceType: 'Schema', location: `${base}/Schemas/${SCIM_SCHEMA.group}` },
    },
  ];
}

function describe(value: string): string {
  return JSON.stringify(value.length > 70 ? `${value.slice(0, 70)}…` : value);
}

import { realmSchema } from './management.js';
import type { WireType } from './wire-type.js';

// The wire shapes of users and groups (docs/api.md, "Users"): what the management API answers
// and accepts. A user's credentials and sessions are listed by their own routes.

const nullableString = { type: ['string', 'null'] } as const;
const source = {
  type: ['string', 'null'],
  description: '`operator`, `scim`, `self` (the user chose it at sign-up), `provider:<name>`, or null while unset',
} as const;

/** A user: who a subject is, its status, and where each attribute came from. */
export const userSchema = {
  type: 'object',
  required: [
    'subject',
    'realm',
    'name',
    'email',
    'email_verified',
    'groups',
    'status',
    'sources',
    'user_name',
    'external_id',
    'created_at',
    'updated_at',
    'last_sign_in_at',
    'disabled_at',
  ],
  properties: {
    subject: { type: 'string' },
    realm: realmSchema,
    name: nullableString,
    email: nullableString,
    email_verified: { type: 'boolean' },
    groups: { type: 'array', items: { type: 'string' } },
    status: { type: 'string', enum: ['active', 'disabled'] },
    sources: {
      type: 'object',
      required: ['name', 'email', 'groups'],
      properties: { name: source, email: source, groups: source },
    },
    user_name: nullableString,
    external_id: nullableString,
    created_at: { type: 'string' },
    updated_at: { type: 'string' },
    last_sign_in_at: nullableString,
    disabled_at: nullableString,
  },
} as const;
/** A user, as the management API answers it. */
export type UserJson = WireType<typeof userSchema>;

/** A page of users: `next` is the `after` of the next page, null on the last. */
export const userPageSchema = {
  type: 'object',
  required: ['users', 'next'],
  properties: { users: { type: 'array', items: userSchema }, next: nullableString },
} as const;
/** A page of users. */
export type UserPageJson = WireType<typeof userPageSchema>;

/** A group with its member count. */
export const groupSchema = {
  type: 'object',
  required: ['realm', 'name', 'id', 'members'],
  properties: { realm: realmSchema, name: { type: 'string' }, id: nullableString, members: { type: 'integer' } },
} as const;
/** A group, as `GET /v1/auth/groups` lists it. */
export type GroupJson = WireType<typeof groupSchema>;

/** What removing a user did. */
export const userRemovedSchema = {
  type: 'object',
  required: ['subject', 'removed', 'revoked_sessions', 'removed_devices', 'removed_links'],
  properties: {
    subject: { type: 'string' },
    removed: { type: 'boolean' },
    revoked_sessions: { type: 'integer' },
    removed_devices: { type: 'integer' },
    removed_links: { type: 'integer' },
  },
} as const;
/** What removing a user did. */
export type UserRemovedJson = WireType<typeof userRemovedSchema>;

// Requests of the management API's user routes: exact shapes with generous caps; the use cases
// (`listUsers`, `addUser`, `updateUser`) check every format, so the rules live in one place.

const queryString = { type: 'string', maxLength: 320 } as const;
const attribute = { type: ['string', 'null'], maxLength: 1024 } as const;
const groupList = { type: ['array', 'null'], maxItems: 1000, items: { type: 'string', maxLength: 256 } } as const;

/** The query of `GET /v1/auth/users`: each filter given narrows the page (`filter`: a substring of name, email or user name). */
export const userListQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    realm: realmSchema,
    status: { type: 'string', enum: ['active', 'disabled'] },
    group: queryString,
    email: queryString,
    filter: queryString,
    after: { type: 'string', maxLength: 64 },
    limit: { type: 'string', pattern: '^[1-9][0-9]{0,3}$' },
  },
} as const;
/** The query of `GET /v1/auth/users`. */
export type UserListQuery = WireType<typeof userListQuery>;

/** The body of `POST /v1/auth/users`: a user without a credential yet. */
export const userCreateBody = {
  type: 'object',
  required: ['realm'],
  additionalProperties: false,
  properties: { realm: realmSchema, name: attribute, email: attribute, email_verified: { type: 'boolean' }, groups: groupList },
} as const;
/** The body of `POST /v1/auth/users`. */
export type UserCreateBody = WireType<typeof userCreateBody>;

/** The body of `PATCH /v1/auth/users/:subject`: each attribute given is set, `null` clears it. */
export const userChangeBody = {
  type: 'object',
  additionalProperties: false,
  properties: { name: attribute, email: attribute, email_verified: { type: 'boolean' }, groups: groupList },
} as const;
/** The body of `PATCH /v1/auth/users/:subject`. */
export type UserChangeBody = WireType<typeof userChangeBody>;

/** The path parameters of `/v1/auth/users/:subject...`. */
export const userParams = {
  type: 'object',
  required: ['subject'],
  additionalProperties: false,
  properties: { subject: { type: 'string', maxLength: 64 } },
} as const;
/** The path parameters of the routes of one user. */
export type UserParams = WireType<typeof userParams>;

/** The query of `GET /v1/auth/groups`. */
export const groupListQuery = { type: 'object', additionalProperties: false, properties: { realm: realmSchema } } as const;
/** The query of `GET /v1/auth/groups`. */
export type GroupListQuery = WireType<typeof groupListQuery>;

/** `{user}`: what reading, adding and changing a user answer. */
export const userResponse = { type: 'object', required: ['user'], properties: { user: userSchema } } as const;
/** `{user}`. */
export type UserResponseJson = WireType<typeof userResponse>;

/** What disabling or enabling a user answers: the user and how many sessions it revoked (enabling: 0). */
export const userStatusResponse = {
  type: 'object',
  required: ['user', 'revoked_sessions'],
  properties: { user: userSchema, revoked_sessions: { type: 'integer' } },
} as const;
/** The answer of `POST /v1/auth/users/:subject/disable` and `/enable`. */
export type UserStatusJson = WireType<typeof userStatusResponse>;

/** The answer of `GET /v1/auth/groups`. */
export const groupListResponse = {
  type: 'object',
  required: ['groups'],
  properties: { groups: { type: 'array', items: groupSchema } },
} as const;
/** The answer of `GET /v1/auth/groups`. */
export type GroupListJson = WireType<typeof groupListResponse>;

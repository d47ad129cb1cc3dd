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

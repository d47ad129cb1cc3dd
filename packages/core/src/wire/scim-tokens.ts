import type { WireType } from './wire-type.js';

// The wire shapes of SCIM tokens (docs/scim.md): what the management API answers. The token
// itself appears once, in the answer that creates it; listings never carry it.

const nullableString = { type: ['string', 'null'] } as const;

/** `POST /v1/auth/scim-tokens`: a name for the token (the directory it is for). */
export const scimTokenCreateBody = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: { name: { type: 'string', minLength: 1, maxLength: 128 } },
} as const;
/** The body of `POST /v1/auth/scim-tokens`. */
export type ScimTokenCreateBody = WireType<typeof scimTokenCreateBody>;

/** A new SCIM token: shown once. */
export const scimTokenCreatedResponse = {
  type: 'object',
  required: ['id', 'name', 'token', 'created_at'],
  properties: { id: { type: 'string' }, name: { type: 'string' }, token: { type: 'string' }, created_at: { type: 'string' } },
} as const;
/** A new SCIM token (the only answer that carries the token). */
export type ScimTokenCreatedJson = WireType<typeof scimTokenCreatedResponse>;

/** A SCIM token in a listing: never the token. */
export const scimTokenSchema = {
  type: 'object',
  required: ['id', 'name', 'created_at', 'last_used_at', 'revoked_at'],
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    created_at: { type: 'string' },
    last_used_at: nullableString,
    revoked_at: nullableString,
  },
} as const;
/** A SCIM token in a listing. */
export type ScimTokenJson = WireType<typeof scimTokenSchema>;

/** `GET /v1/auth/scim-tokens`. */
export const scimTokenListResponse = {
  type: 'object',
  required: ['tokens'],
  properties: { tokens: { type: 'array', items: scimTokenSchema } },
} as const;
/** The SCIM tokens, revoked ones included, oldest first. */
export type ScimTokenListJson = WireType<typeof scimTokenListResponse>;

/** `DELETE /v1/auth/scim-tokens/:id`: the path parameter. */
export const scimTokenParams = {
  type: 'object',
  required: ['id'],
  additionalProperties: false,
  properties: { id: { type: 'string', maxLength: 64 } },
} as const;
/** The path parameters of `DELETE /v1/auth/scim-tokens/:id`. */
export type ScimTokenParams = WireType<typeof scimTokenParams>;

/** The answer of revoking a SCIM token. */
export const scimTokenRevokedResponse = {
  type: 'object',
  required: ['id', 'revoked'],
  properties: { id: { type: 'string' }, revoked: { type: 'boolean' } },
} as const;
/** A revoked SCIM token. */
export type ScimTokenRevokedJson = WireType<typeof scimTokenRevokedResponse>;

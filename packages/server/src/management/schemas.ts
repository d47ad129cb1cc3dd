/**
 * JSON schemas of the management API. Requests: exact shapes (`additionalProperties: false`,
 * never coerced), with generous length caps; the use cases check formats (hex, ids, token
 * shapes) so there is one source of truth for them. Responses: the hot ones are serialized
 * by fast-json-stringify.
 */

const shortString = { type: 'string', maxLength: 256 } as const;
const hexString = { type: 'string', maxLength: 256 } as const;
const idString = { type: 'string', maxLength: 64 } as const;
const realm = { type: 'string', enum: ['management', 'application'] } as const;

export const enrollBody = {
  type: 'object',
  required: ['bootstrap_token', 'public_key'],
  additionalProperties: false,
  properties: { bootstrap_token: shortString, public_key: hexString, name: { type: 'string', maxLength: 1024 } },
} as const;
export interface EnrollBody {
  bootstrap_token: string;
  public_key: string;
  name?: string;
}

export const challengeBody = {
  type: 'object',
  required: ['public_key'],
  additionalProperties: false,
  properties: { public_key: hexString },
} as const;
export interface ChallengeBody {
  public_key: string;
}

export const sessionBody = {
  type: 'object',
  required: ['challenge_id', 'signature'],
  additionalProperties: false,
  properties: { challenge_id: idString, signature: hexString },
} as const;
export interface SessionBody {
  challenge_id: string;
  signature: string;
}

export const refreshBody = {
  type: 'object',
  required: ['refresh_token'],
  additionalProperties: false,
  properties: { refresh_token: shortString },
} as const;
export interface RefreshBody {
  refresh_token: string;
}

export const revokeBody = {
  type: 'object',
  additionalProperties: false,
  properties: { session_id: idString },
} as const;
export interface RevokeBody {
  session_id?: string;
}

export const auditQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    after: { type: 'string', pattern: '^(0|[1-9][0-9]{0,14})$' },
    limit: { type: 'string', pattern: '^[1-9][0-9]{0,3}$' },
  },
} as const;
export interface AuditQuery {
  after?: string;
  limit?: string;
}

export const realmQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    realm,
    // `?mine` (or `?mine=true`): only the caller's own subject's, in the caller's realm.
    mine: { type: 'string', enum: ['', 'true'] },
  },
} as const;
export interface RealmQuery {
  realm?: 'management' | 'application';
  mine?: '' | 'true';
}

export const deviceParams = {
  type: 'object',
  required: ['id'],
  additionalProperties: false,
  properties: { id: idString },
} as const;
export interface DeviceParams {
  id: string;
}

export const noQuery = { type: 'object', additionalProperties: false, properties: {} } as const;

const device = {
  type: 'object',
  required: ['id', 'public_key', 'realm', 'subject', 'name', 'created_at'],
  properties: {
    id: { type: 'string' },
    public_key: { type: 'string' },
    realm: { type: 'string' },
    subject: { type: 'string' },
    name: { type: 'string' },
    created_at: { type: 'string' },
  },
} as const;

export const deviceResponse = { type: 'object', required: ['device'], properties: { device } } as const;

export const tokenPairResponse = {
  type: 'object',
  required: ['session_id', 'realm', 'token_type', 'access_token', 'expires_in', 'refresh_token', 'refresh_expires_in'],
  properties: {
    session_id: { type: 'string' },
    realm: { type: 'string' },
    token_type: { type: 'string' },
    access_token: { type: 'string' },
    expires_in: { type: 'integer' },
    refresh_token: { type: 'string' },
    refresh_expires_in: { type: 'integer' },
  },
} as const;

export const challengeResponse = {
  type: 'object',
  required: ['challenge_id', 'challenge', 'expires_at', 'expires_in'],
  properties: {
    challenge_id: { type: 'string' },
    challenge: { type: 'string' },
    expires_at: { type: 'string' },
    expires_in: { type: 'integer' },
  },
} as const;

export const principalResponse = {
  type: 'object',
  required: ['subject', 'realm', 'session', 'device', 'claims'],
  properties: {
    subject: { type: 'string' },
    realm: { type: 'string' },
    session: { type: 'string' },
    device: { type: 'string' },
    // Claims are open-ended: known ones are typed, future ones still pass through.
    claims: {
      type: 'object',
      additionalProperties: true,
      properties: { amr: { type: 'array', items: { type: 'string' } }, auth_time: { type: 'string' }, exp: { type: 'string' } },
    },
  },
} as const;

export const revokeResponse = {
  type: 'object',
  required: ['session_id', 'revoked'],
  properties: { session_id: { type: 'string' }, revoked: { type: 'boolean' } },
} as const;

const nullableString = { type: ['string', 'null'] } as const;

/** One event of the audit chain (core's `auditEventToJson`): every field, since clients re-hash it. */
const auditEvent = {
  type: 'object',
  required: ['id', 'seq', 'at', 'type', 'realm', 'subject', 'device_id', 'session_id', 'data', 'prev_hash', 'hash'],
  properties: {
    id: { type: 'string' },
    seq: { type: 'integer' },
    at: { type: 'string' },
    type: { type: 'string' },
    realm: nullableString,
    subject: nullableString,
    device_id: nullableString,
    session_id: nullableString,
    data: { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean', 'null'] } },
    prev_hash: { type: 'string' },
    hash: { type: 'string' },
  },
} as const;

export const auditPageResponse = {
  type: 'object',
  required: ['events', 'next_after'],
  properties: { events: { type: 'array', items: auditEvent }, next_after: { type: ['integer', 'null'] } },
} as const;

export const deviceListResponse = {
  type: 'object',
  required: ['devices'],
  properties: { devices: { type: 'array', items: device } },
} as const;

export const deviceRemovedResponse = {
  type: 'object',
  required: ['device_id', 'removed', 'revoked_sessions'],
  properties: { device_id: { type: 'string' }, removed: { type: 'boolean' }, revoked_sessions: { type: 'integer' } },
} as const;

/** A session as operators list it (core's `sessionToJson`; no token material). */
const session = {
  type: 'object',
  required: [
    'id',
    'realm',
    'subject',
    'device_id',
    'created_at',
    'expires_at',
    'access_expires_at',
    'refresh_expires_at',
    'generation',
    'last_rotated_at',
    'revoked_at',
    'revoked_reason',
    'client_address',
    'user_agent',
  ],
  properties: {
    id: { type: 'string' },
    realm: { type: 'string' },
    subject: { type: 'string' },
    device_id: { type: 'string' },
    created_at: { type: 'string' },
    expires_at: { type: 'string' },
    access_expires_at: { type: 'string' },
    refresh_expires_at: { type: 'string' },
    generation: { type: 'integer' },
    last_rotated_at: nullableString,
    revoked_at: nullableString,
    revoked_reason: nullableString,
    client_address: nullableString,
    user_agent: nullableString,
  },
} as const;

export const sessionListResponse = {
  type: 'object',
  required: ['sessions'],
  properties: { sessions: { type: 'array', items: session } },
} as const;

export const revokeOthersResponse = {
  type: 'object',
  required: ['revoked'],
  properties: { revoked: { type: 'array', items: { type: 'string' } } },
} as const;

export const healthResponse = {
  type: 'object',
  required: ['status'],
  properties: { status: { type: 'string' } },
} as const;

/** The status of the management API's DNS-rebinding guard (`403 forbidden_host`), on every route. */
export const LOOPBACK_GUARD = 403;
/** The statuses of a refused body: over 64 KiB, not JSON. */
export const BODY_PROBLEMS = [413, 415] as const;
/** The bearer-token security requirement of the OpenAPI document. */
export const MANAGEMENT_BEARER = [{ managementBearer: [] }];

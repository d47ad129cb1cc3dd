import type { StoreFault } from '../store-fault.js';
import { problemSchema } from './problem.js';
import type { WireType } from './wire-type.js';

/*
 * The wire shapes of the management API, declared once: the server validates requests and
 * serializes responses with these schemas (and documents them in docs/openapi.json), and the
 * client SDK's types are derived from them.
 *
 * Requests: exact shapes (`additionalProperties: false`, never coerced), with generous length
 * caps; the use cases check formats (hex, ids, token shapes) so there is one source of truth
 * for them. Responses: complete, since fast-json-stringify drops any field a schema does not
 * name.
 */

const shortString = { type: 'string', maxLength: 256 } as const;
const hexString = { type: 'string', maxLength: 256 } as const;
const idString = { type: 'string', maxLength: 64 } as const;
/** The realms (core's `REALMS`), as a schema. */
export const realmSchema = { type: 'string', enum: ['management', 'application'] } as const;
const nullableString = { type: ['string', 'null'] } as const;
/** Why the control store cannot serve (core's `StoreFault`): a fixed word, never a message. */
export const storeFaultSchema = {
  type: 'string',
  enum: ['connection', 'timeout', 'locked', 'disk_full', 'io_error'] satisfies StoreFault[],
} as const;

export const enrollBody = {
  type: 'object',
  required: ['bootstrap_token', 'public_key'],
  additionalProperties: false,
  properties: { bootstrap_token: shortString, public_key: hexString, name: { type: 'string', maxLength: 1024 } },
} as const;
/** The body of `POST /v1/auth/enroll`. */
export type EnrollBody = WireType<typeof enrollBody>;

export const challengeBody = {
  type: 'object',
  required: ['public_key'],
  additionalProperties: false,
  properties: { public_key: hexString },
} as const;
/** The body of `POST /v1/auth/challenges`. */
export type ChallengeBody = WireType<typeof challengeBody>;

export const sessionBody = {
  type: 'object',
  required: ['challenge_id', 'signature'],
  additionalProperties: false,
  properties: { challenge_id: idString, signature: hexString },
} as const;
/** The body of `POST /v1/auth/sessions`. */
export type SessionBody = WireType<typeof sessionBody>;

export const refreshBody = {
  type: 'object',
  required: ['refresh_token'],
  additionalProperties: false,
  properties: { refresh_token: shortString },
} as const;
/** The body of `POST /v1/auth/refresh`. */
export type RefreshBody = WireType<typeof refreshBody>;

export const revokeBody = {
  type: 'object',
  additionalProperties: false,
  properties: { session_id: idString },
} as const;
/** The body of `POST /v1/auth/revoke`: empty (own session) or naming a session. */
export type RevokeBody = WireType<typeof revokeBody>;

export const auditQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    after: { type: 'string', pattern: '^(0|[1-9][0-9]{0,14})$' },
    limit: { type: 'string', pattern: '^[1-9][0-9]{0,3}$' },
  },
} as const;
/** The query of `GET /v1/auth/audit`. */
export type AuditQuery = WireType<typeof auditQuery>;

export const realmQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    realm: realmSchema,
    // `?mine` (or `?mine=true`): only the caller's own subject's, in the caller's realm.
    mine: { type: 'string', enum: ['', 'true'] },
  },
} as const;
/** The query of the operator listings: an optional realm. */
export type RealmQuery = WireType<typeof realmQuery>;

export const deviceParams = {
  type: 'object',
  required: ['id'],
  additionalProperties: false,
  properties: { id: idString },
} as const;
/** The path parameters of `DELETE /v1/auth/devices/:id`. */
export type DeviceParams = WireType<typeof deviceParams>;

export const noQuery = { type: 'object', additionalProperties: false, properties: {} } as const;

/** `Device` of the contract. */
export const deviceSchema = {
  type: 'object',
  required: ['id', 'public_key', 'realm', 'subject', 'name', 'created_at'],
  properties: {
    id: { type: 'string' },
    public_key: { type: 'string' },
    realm: realmSchema,
    subject: { type: 'string' },
    name: { type: 'string' },
    created_at: { type: 'string' },
  },
} as const;
/** `Device` of the contract. */
export type DeviceJson = WireType<typeof deviceSchema>;

/** Enrollment and pairing completion answer the same `{"device": Device}`. */
export const deviceResponse = { type: 'object', required: ['device'], properties: { device: deviceSchema } } as const;
/** The answer of enrollment and of pairing completion. */
export type DeviceResponseJson = WireType<typeof deviceResponse>;

export const tokenPairResponse = {
  type: 'object',
  required: ['session_id', 'realm', 'token_type', 'access_token', 'expires_in', 'refresh_token', 'refresh_expires_in'],
  properties: {
    session_id: { type: 'string' },
    realm: realmSchema,
    token_type: { type: 'string', enum: ['Bearer', 'DPoP'] },
    access_token: { type: 'string' },
    expires_in: { type: 'integer' },
    refresh_token: { type: 'string' },
    refresh_expires_in: { type: 'integer' },
  },
} as const;
/** `TokenPair` of the contract. */
export type TokenPairJson = WireType<typeof tokenPairResponse>;

export const challengeResponse = {
  type: 'object',
  required: ['challenge_id', 'challenge', 'expires_at', 'expires_in'],
  properties: {
    challenge_id: { type: 'string' },
    /** The exact printable string to sign (its UTF-8 bytes, pure Ed25519). */
    challenge: { type: 'string' },
    expires_at: { type: 'string' },
    expires_in: { type: 'integer' },
  },
} as const;
/** The answer of `POST /v1/auth/challenges`. */
export type ChallengeJson = WireType<typeof challengeResponse>;

export const principalResponse = {
  type: 'object',
  required: ['subject', 'realm', 'session', 'device', 'claims'],
  properties: {
    subject: { type: 'string' },
    realm: realmSchema,
    session: { type: 'string' },
    device: { type: 'string' },
    // Claims are open-ended: known ones are typed, future ones still pass through.
    claims: {
      type: 'object',
      required: ['amr', 'auth_time', 'exp'],
      additionalProperties: true,
      properties: {
        amr: { type: 'array', items: { type: 'string' } },
        auth_time: { type: 'string' },
        exp: { type: 'string' },
        email: { type: 'string' },
        email_verified: { type: 'boolean' },
        name: { type: 'string' },
        groups: { type: 'array', items: { type: 'string' } },
      },
    },
  },
} as const;
/** `Principal` of the contract, as `GET /v1/auth/me` answers it. */
export type PrincipalJson = WireType<typeof principalResponse>;

export const revokeResponse = {
  type: 'object',
  required: ['session_id', 'revoked'],
  properties: { session_id: { type: 'string' }, revoked: { type: 'boolean' } },
} as const;
/** The answer of `POST /v1/auth/revoke`. */
export type RevokedJson = WireType<typeof revokeResponse>;

/** One event of the audit chain (core's `auditEventToJson`): every field, since clients re-hash it. */
export const auditEventSchema = {
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
/** An audit event as the API prints it. */
export type AuditEventJson = WireType<typeof auditEventSchema>;

export const auditPageResponse = {
  type: 'object',
  required: ['events', 'next_after'],
  properties: { events: { type: 'array', items: auditEventSchema }, next_after: { type: ['integer', 'null'] } },
} as const;
/** A page of the audit log; pass `next_after` as `after` for the next page (null at the end). */
export type AuditPageJson = WireType<typeof auditPageResponse>;

export const auditCheckpointsQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { limit: { type: 'string', pattern: '^[1-9][0-9]{0,2}$' } },
} as const;
/** The query of `GET /v1/auth/audit/checkpoints`: how many of the latest checkpoints (default 20, at most 200). */
export type AuditCheckpointsQuery = WireType<typeof auditCheckpointsQuery>;

/** One exported checkpoint, as `GET /v1/auth/audit/checkpoints` reviews it against the chain and the node key history. */
export const auditCheckpointReviewSchema = {
  type: 'object',
  required: ['line', 'at', 'length', 'head', 'node_id', 'ok', 'problem', 'detail'],
  properties: {
    line: { type: 'integer', description: 'The line of the checkpoint file it was read from (1-based).' },
    at: nullableString,
    length: { type: ['integer', 'null'], description: 'How many events the chain had: the sequence number of its head.' },
    head: nullableString,
    node_id: nullableString,
    ok: {
      type: 'boolean',
      description: 'Signed by the node key (or a previous one inside its window), and the chain still holds that head.',
    },
    problem: {
      type: ['string', 'null'],
      enum: ['malformed', 'bad_signature', 'other_key', 'other_project', 'truncated', 'rewritten', null],
    },
    detail: nullableString,
  },
} as const;
/** A checkpoint with its verdict. */
export type AuditCheckpointReviewJson = WireType<typeof auditCheckpointReviewSchema>;

export const auditCheckpointsResponse = {
  type: 'object',
  required: ['exported', 'total', 'failed', 'checkpoints'],
  properties: {
    exported: { type: 'boolean', description: 'Whether this service exports checkpoints to a file (SVC_AUDIT_CHECKPOINT_FILE).' },
    total: { type: 'integer', description: 'How many checkpoints the file holds.' },
    failed: { type: 'integer', description: 'How many of them, of all in the file, do not verify or no longer match the chain.' },
    checkpoints: { type: 'array', items: auditCheckpointReviewSchema, description: 'The latest ones, newest first.' },
  },
} as const;
/** The answer of `GET /v1/auth/audit/checkpoints`. */
export type AuditCheckpointsJson = WireType<typeof auditCheckpointsResponse>;

export const deviceListResponse = {
  type: 'object',
  required: ['devices'],
  properties: { devices: { type: 'array', items: deviceSchema } },
} as const;
/** The answer of `GET /v1/auth/devices`. */
export type DeviceListJson = WireType<typeof deviceListResponse>;

export const deviceRemovedResponse = {
  type: 'object',
  required: ['device_id', 'removed', 'revoked_sessions'],
  properties: { device_id: { type: 'string' }, removed: { type: 'boolean' }, revoked_sessions: { type: 'integer' } },
} as const;
/** The answer of `DELETE /v1/auth/devices/:id`. */
export type DeviceRemovedJson = WireType<typeof deviceRemovedResponse>;

/** A session as operators list it (core's `sessionToJson`; no token material). */
export const sessionSchema = {
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
    realm: realmSchema,
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
    /** The address the session was created from; null when unknown. */
    client_address: nullableString,
    /** The `User-Agent` it was created with; null when none. */
    user_agent: nullableString,
  },
} as const;
/** A session as operators list it (no token material). */
export type SessionJson = WireType<typeof sessionSchema>;

export const sessionListResponse = {
  type: 'object',
  required: ['sessions'],
  properties: { sessions: { type: 'array', items: sessionSchema } },
} as const;
/** The answer of `GET /v1/auth/sessions`. */
export type SessionListJson = WireType<typeof sessionListResponse>;

/** The body of `POST /v1/auth/sessions/revoke-others`: nothing to say. */
export const emptyBody = { type: 'object', additionalProperties: false, properties: {} } as const;

export const revokeOthersResponse = {
  type: 'object',
  required: ['revoked'],
  properties: { revoked: { type: 'array', items: { type: 'string' } } },
} as const;
/** The answer of `POST /v1/auth/sessions/revoke-others`: the sessions revoked, newest first. */
export type RevokeOthersJson = WireType<typeof revokeOthersResponse>;

export const healthResponse = {
  type: 'object',
  required: ['status'],
  properties: { status: { type: 'string' } },
} as const;
/** The answer of the management API's `GET /health`. */
export type HealthJson = WireType<typeof healthResponse>;

/**
 * The 503 of `GET /health`: the problem+json of `store_unavailable`, plus what a monitor
 * needs: `health` degraded and the `reason` (a store fault, or `unavailable` when the cause is
 * none of those).
 */
export const degradedHealthProblem = {
  type: 'object',
  required: [...problemSchema.required, 'health', 'reason'],
  additionalProperties: false,
  properties: {
    ...problemSchema.properties,
    health: { type: 'string', enum: ['degraded'] },
    reason: { type: 'string', enum: [...storeFaultSchema.enum, 'unavailable'] },
  },
} as const;
/** The body of `GET /health` when the control store cannot serve (503). */
export type DegradedHealthProblemJson = WireType<typeof degradedHealthProblem>;

import type { StoreFault } from '@svc/core';

/**
 * Request schemas of the node surface: exact shapes (`additionalProperties: false`, never
 * coerced) with generous length caps; the core use cases check formats (hex, ids, realms,
 * codes) so there is one source of truth for them.
 */

const idString = { type: 'string', maxLength: 64 } as const;
const hexString = { type: 'string', maxLength: 256 } as const;

/** Printable ASCII, 8 to 128 characters: enough for a UUID, a counter or a random hex string. */
export const NONCE_PATTERN = '^[\\x20-\\x7E]{8,128}$';

export const diagnosticsBody = {
  type: 'object',
  required: ['nonce'],
  additionalProperties: false,
  properties: { nonce: { type: 'string', maxLength: 128, pattern: NONCE_PATTERN } },
} as const;
export interface DiagnosticsBody {
  nonce: string;
}

export const prepareBody = {
  type: 'object',
  required: ['realm', 'public_key'],
  additionalProperties: false,
  properties: {
    realm: { type: 'string', maxLength: 32 },
    public_key: { type: 'string', maxLength: 128 },
    name: { type: 'string', maxLength: 1024 },
    subject: idString,
    ttl_seconds: { type: 'integer' },
  },
} as const;
export interface PrepareBody {
  realm: string;
  public_key: string;
  name?: string;
  subject?: string;
  ttl_seconds?: number;
}

export const completeBody = {
  type: 'object',
  required: ['intent_id', 'code', 'public_key', 'signature'],
  additionalProperties: false,
  properties: {
    intent_id: idString,
    code: { type: 'string', maxLength: 32 },
    public_key: hexString,
    signature: hexString,
    name: { type: 'string', maxLength: 1024 },
  },
} as const;
export interface CompleteBody {
  intent_id: string;
  code: string;
  public_key: string;
  signature: string;
  name?: string;
}

/*
 * Response schemas of the node surface. Complete: Fastify serializes with them and drops any
 * field a schema does not name, and the diagnostics payload is signed over its RFC 8785 form.
 */

const realmCounts = {
  type: 'object',
  required: ['management', 'application'],
  properties: { management: { type: 'integer' }, application: { type: 'integer' } },
} as const;

const counts = <const K extends readonly string[]>(keys: K) =>
  ({
    type: 'object',
    required: keys,
    properties: Object.fromEntries(keys.map((k) => [k, { type: 'integer' }])) as Record<K[number], { type: 'integer' }>,
  }) as const;

const nullableString = { type: ['string', 'null'] } as const;

/** A node key replaced by a rotation, with the window it signed in. */
const retiredNodeKeys = {
  type: 'array',
  items: {
    type: 'object',
    required: ['node_id', 'public_key', 'valid_from', 'valid_until'],
    properties: {
      node_id: { type: 'string' },
      public_key: { type: 'string' },
      valid_from: nullableString,
      valid_until: { type: 'string' },
    },
  },
} as const;

export const discoveryResponse = {
  type: 'object',
  required: ['node_id', 'public_key', 'valid_from', 'previous_keys', 'alg', 'api_version', 'routes'],
  properties: {
    node_id: { type: 'string' },
    public_key: { type: 'string' },
    valid_from: nullableString,
    previous_keys: retiredNodeKeys,
    alg: { type: 'string', enum: ['Ed25519'] },
    api_version: { type: 'string' },
    routes: {
      type: 'array',
      items: {
        type: 'object',
        required: ['method', 'path', 'auth'],
        properties: {
          method: { type: 'string' },
          path: { type: 'string' },
          auth: { type: 'string', enum: ['public', 'management_bearer', 'pairing_code_and_signature'] },
        },
      },
    },
  },
} as const;

const componentHealth = {
  type: 'object',
  required: ['status'],
  properties: {
    status: { type: 'string', enum: ['ok', 'failed'] },
    /** Why the store failed, when the fault is known (a fixed word, never a message). */
    reason: { type: 'string', enum: ['connection', 'timeout', 'locked', 'disk_full', 'io_error'] satisfies StoreFault[] },
  },
} as const;

export const nodeHealthResponse = {
  type: 'object',
  required: ['status', 'node_id', 'checked_at', 'store', 'providers'],
  properties: {
    status: { type: 'string', enum: ['ok', 'degraded'] },
    node_id: { type: 'string' },
    checked_at: { type: 'string' },
    store: componentHealth,
    providers: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'kind', 'status'],
        properties: { name: { type: 'string' }, kind: { type: 'string' }, status: { type: 'string', enum: ['ok', 'failed'] } },
      },
    },
  },
} as const;

export const nodeStatusResponse = {
  type: 'object',
  required: ['node_id', 'api_version', 'checked_at', 'service', 'store_addon', 'providers', 'modules'],
  properties: {
    node_id: { type: 'string' },
    api_version: { type: 'string' },
    checked_at: { type: 'string' },
    service: { type: 'object', required: ['name', 'version'], properties: { name: { type: 'string' }, version: { type: 'string' } } },
    store_addon: {
      anyOf: [
        { type: 'null' },
        {
          type: 'object',
          required: ['package', 'version', 'sha256', 'verified', 'detail'],
          properties: {
            package: { type: 'string' },
            version: { type: 'string' },
            sha256: nullableString,
            verified: { type: ['boolean', 'null'] },
            detail: { type: 'string' },
          },
        },
      ],
    },
    providers: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'kind', 'builtin', 'version'],
        properties: { name: { type: 'string' }, kind: { type: 'string' }, builtin: { type: 'boolean' }, version: nullableString },
      },
    },
    modules: {
      type: 'array',
      items: {
        type: 'object',
        required: ['alias', 'module', 'package', 'activate'],
        properties: {
          alias: { type: 'string' },
          module: nullableString,
          package: nullableString,
          activate: { type: 'array', items: { type: 'string' } },
        },
      },
    },
  },
} as const;

export const signedDiagnosticsResponse = {
  type: 'object',
  required: ['payload', 'signature', 'alg', 'canonicalization', 'public_key', 'node_id', 'previous_keys'],
  properties: {
    payload: {
      type: 'object',
      required: [
        'type',
        'api_version',
        'node_id',
        'project_id',
        'nonce',
        'generated_at',
        'devices',
        'active_sessions',
        'counters',
        'pairing',
        'audit',
      ],
      properties: {
        type: { type: 'string', enum: ['svc-edge-diagnostics'] },
        api_version: { type: 'string' },
        node_id: { type: 'string' },
        project_id: { type: 'string' },
        nonce: { type: 'string' },
        generated_at: { type: 'string' },
        devices: realmCounts,
        active_sessions: realmCounts,
        counters: counts([
          'enrollments',
          'device_removals',
          'sign_ins',
          'sign_in_failures',
          'rotations',
          'grace_rotations',
          'refresh_reuses',
          'revocations',
          'bootstrap_tokens_issued',
        ] as const),
        pairing: counts(['prepared', 'completed', 'failed', 'burned'] as const),
        audit: { type: 'object', required: ['length', 'head'], properties: { length: { type: 'integer' }, head: { type: 'string' } } },
      },
    },
    signature: { type: 'string' },
    alg: { type: 'string', enum: ['Ed25519'] },
    canonicalization: { type: 'string', enum: ['RFC8785'] },
    public_key: { type: 'string' },
    node_id: { type: 'string' },
    previous_keys: retiredNodeKeys,
  },
} as const;

export const preparedPairingResponse = {
  type: 'object',
  required: ['intent_id', 'realm', 'subject', 'name', 'public_key', 'code', 'expires_at', 'expires_in', 'node_id'],
  properties: {
    intent_id: { type: 'string' },
    realm: { type: 'string' },
    subject: { type: 'string' },
    name: nullableString,
    public_key: { type: 'string' },
    code: { type: 'string' },
    expires_at: { type: 'string' },
    expires_in: { type: 'integer' },
    node_id: { type: 'string' },
  },
} as const;

/** Pairing completion answers the same `{"device": Device}` as enrollment: one wire shape. */
export { deviceResponse as pairedDeviceResponse } from '../management/schemas.js';

/** The bearer-token security requirement of the OpenAPI document. */
export const MANAGEMENT_BEARER = [{ managementBearer: [] }];
/** The statuses of a refused body: over 64 KiB, not JSON. */
export const BODY_PROBLEMS = [413, 415] as const;

import { deviceSchema, realmSchema, storeFaultSchema } from './management.js';
import type { WireType } from './wire-type.js';

/*
 * The wire shapes of the node HTTP surface, declared once: the server validates and
 * serializes with these schemas (and documents them in docs/openapi.json), the client SDK's
 * types are derived from them.
 *
 * Requests: exact shapes (`additionalProperties: false`, never coerced) with generous length
 * caps; the core use cases check formats (hex, ids, realms, codes) so there is one source of
 * truth for them. Responses: complete, since fast-json-stringify drops any field a schema does
 * not name, and the diagnostics payload is signed over its RFC 8785 form.
 */

const idString = { type: 'string', maxLength: 64 } as const;
const hexString = { type: 'string', maxLength: 256 } as const;
const nullableString = { type: ['string', 'null'] } as const;

/** Printable ASCII, 8 to 128 characters: enough for a UUID, a counter or a random hex string. */
export const NONCE_PATTERN = '^[\\x20-\\x7E]{8,128}$';

export const diagnosticsBody = {
  type: 'object',
  required: ['nonce'],
  additionalProperties: false,
  properties: { nonce: { type: 'string', maxLength: 128, pattern: NONCE_PATTERN } },
} as const;
/** The body of `POST /edge/0-alpha/diagnostics`. */
export type DiagnosticsBody = WireType<typeof diagnosticsBody>;

export const prepareBody = {
  type: 'object',
  required: ['realm'],
  additionalProperties: false,
  properties: {
    realm: { type: 'string', maxLength: 32 },
    /** The new device's Ed25519 public key (64 hex): only it can complete the intent. */
    public_key: { type: 'string', maxLength: 128 },
    /** Instead of `public_key`: a link intent, completed by linking a credential of this provider (its configured name) at the gateway. */
    provider: { type: 'string', maxLength: 128 },
    name: { type: 'string', maxLength: 1024 },
    subject: idString,
    ttl_seconds: { type: 'integer' },
  },
} as const;
/** The body of `POST /edge/0-alpha/pairing/prepare`. */
export type PrepareBody = WireType<typeof prepareBody>;

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
/** The body of `POST /edge/0-alpha/pairing/complete`. */
export type CompleteBody = WireType<typeof completeBody>;

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

export const nodeRouteSchema = {
  type: 'object',
  required: ['method', 'path', 'auth'],
  properties: {
    method: { type: 'string' },
    path: { type: 'string' },
    auth: { type: 'string', enum: ['public', 'management_bearer', 'pairing_code_and_signature'] },
  },
} as const;
/** A route the node advertises, and how it is authorised. */
export type NodeRouteJson = WireType<typeof nodeRouteSchema>;

/** A node identity key this node signed with before a rotation, and the window it signed in. */
export const retiredNodeKeySchema = {
  type: 'object',
  required: ['node_id', 'public_key', 'valid_from', 'valid_until'],
  properties: {
    node_id: { type: 'string' },
    /** The Ed25519 public key, 64 hex digits. */
    public_key: { type: 'string' },
    /** When it became the node key (RFC 3339), or null when that is not known (a key older than rotation). */
    valid_from: nullableString,
    /** When it was replaced (RFC 3339): nothing it signs from then on is accepted. */
    valid_until: { type: 'string' },
  },
} as const;
/** A node identity key this node signed with before a rotation, and the window it signed in. */
export type RetiredNodeKeyJson = WireType<typeof retiredNodeKeySchema>;

export const discoveryResponse = {
  type: 'object',
  required: ['node_id', 'cluster_id', 'public_key', 'valid_from', 'previous_keys', 'alg', 'api_version', 'routes', 'providers'],
  properties: {
    /** This node: the id of its own key (each node of a cluster has its own). */
    node_id: { type: 'string' },
    /** The cluster this node serves in: the same on every node of the project (see `clusterIdOf`). */
    cluster_id: { type: 'string' },
    public_key: { type: 'string' },
    /** When the current key became the node key, or null when not known (never rotated). */
    valid_from: nullableString,
    /** The keys this node signed with before, newest first, with the window each was valid in. */
    previous_keys: { type: 'array', items: retiredNodeKeySchema },
    alg: { type: 'string', enum: ['Ed25519'] },
    api_version: { type: 'string' },
    routes: { type: 'array', items: nodeRouteSchema },
    /**
     * The authentication providers, as data only (the names and kinds health already shows):
     * a provider package adds no route to this surface, its browser routes are the gateway's.
     */
    providers: {
      type: 'array',
      items: { type: 'object', required: ['name', 'kind'], properties: { name: { type: 'string' }, kind: { type: 'string' } } },
    },
  },
} as const;
/** The answer of `GET /.well-known/edge`. */
export type NodeDiscoveryJson = WireType<typeof discoveryResponse>;

const componentStatus = { type: 'string', enum: ['ok', 'failed'] } as const;

export const componentHealthSchema = {
  type: 'object',
  required: ['status'],
  properties: {
    status: componentStatus,
    /** Why the store failed, when the fault is known (a fixed word, never a message). */
    reason: storeFaultSchema,
  },
} as const;
/** One checked component of node health. */
export type ComponentHealthJson = WireType<typeof componentHealthSchema>;

export const nodeHealthResponse = {
  type: 'object',
  required: ['status', 'node_id', 'checked_at', 'store', 'providers'],
  properties: {
    status: { type: 'string', enum: ['ok', 'degraded'] },
    node_id: { type: 'string' },
    checked_at: { type: 'string' },
    store: componentHealthSchema,
    providers: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'kind', 'status'],
        properties: { name: { type: 'string' }, kind: { type: 'string' }, status: componentStatus },
      },
    },
    /**
     * Present when `:svc/audit-sinks` is set: `failed` while the last delivery attempt failed,
     * with the stable error code of why (`audit_ship_stalled`, `audit_sink_refused`, ...).
     */
    audit_shipping: {
      type: 'object',
      required: ['status'],
      properties: { status: componentStatus, code: { type: 'string' } },
    },
  },
} as const;
/** The answer of `GET /edge/0-alpha/health`, the same shape whether healthy (200) or degraded (503). */
export type NodeHealthJson = WireType<typeof nodeHealthResponse>;

/** The store addon as installed: its pin and the result of verifying it before the store was opened. */
export const storeAddonStatusSchema = {
  type: 'object',
  required: ['package', 'version', 'sha256', 'verified', 'detail'],
  properties: {
    package: { type: 'string' },
    version: { type: 'string' },
    /** The pinned SHA-256 of the published archive, or null when the project pins none. */
    sha256: nullableString,
    /** The verification result; null when none was recorded (e.g. a store built into this `svc`). */
    verified: { type: ['boolean', 'null'] },
    detail: { type: 'string' },
  },
} as const;
/** The store addon as installed: its pin and the result of verifying it before the store was opened. */
export type StoreAddonStatusJson = WireType<typeof storeAddonStatusSchema>;

/** A module of `:svc/modules`, as status reports it (no configuration values: they may hold secret references). */
export const moduleStatusSchema = {
  type: 'object',
  required: ['alias', 'module', 'package', 'activate'],
  properties: {
    alias: { type: 'string' },
    module: nullableString,
    package: nullableString,
    activate: { type: 'array', items: { type: 'string' } },
  },
} as const;
/** A module of `:svc/modules`, as status reports it. */
export type ModuleStatusJson = WireType<typeof moduleStatusSchema>;

export const nodeStatusResponse = {
  type: 'object',
  required: ['node_id', 'cluster_id', 'api_version', 'checked_at', 'service', 'store_addon', 'providers', 'modules'],
  properties: {
    node_id: { type: 'string' },
    /** The cluster this node serves in, the same on every node of the project. */
    cluster_id: { type: 'string' },
    api_version: { type: 'string' },
    checked_at: { type: 'string' },
    service: { type: 'object', required: ['name', 'version'], properties: { name: { type: 'string' }, version: { type: 'string' } } },
    store_addon: { anyOf: [{ type: 'null' }, storeAddonStatusSchema] },
    providers: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'kind', 'builtin', 'version'],
        properties: {
          /** The built-in provider's name, or a provider package's module alias in `:svc/modules`. */
          name: { type: 'string' },
          kind: { type: 'string' },
          builtin: { type: 'boolean' },
          version: nullableString,
          /** A provider package only: its npm name (`version` is its version). */
          package: { type: 'string' },
          /** A provider package only: the trusted publisher whose signature it carries. */
          signer: { type: 'string' },
          /** A provider package only: `verified`, since only a verified package is started. */
          verification: { type: 'string', enum: ['verified'] },
          /** A provider package only: the realms its policy lets it sign in to. */
          realms: { type: 'array', items: realmSchema },
        },
      },
    },
    modules: { type: 'array', items: moduleStatusSchema },
  },
} as const;
/** The answer of `GET /edge/0-alpha/status`. */
export type NodeStatusJson = WireType<typeof nodeStatusResponse>;

/** The `type` inside every signed diagnostics payload: a signature over it means nothing else. */
export const DIAGNOSTICS_TYPE = 'svc-edge-diagnostics';

/** Aggregate counters of the control store at one moment. Never per-user data. */
export const diagnosticsPayloadSchema = {
  type: 'object',
  required: [
    'type',
    'api_version',
    'node_id',
    'cluster_id',
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
    type: { type: 'string', enum: [DIAGNOSTICS_TYPE] },
    api_version: { type: 'string' },
    node_id: { type: 'string' },
    /** The cluster the signing node serves in (derived from `project_id`, the same on every node). */
    cluster_id: { type: 'string' },
    project_id: { type: 'string' },
    /** The caller's nonce, echoed inside the signature: proves the answer is fresh. */
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
} as const;
/** The signed part of diagnostics: aggregate counters, the nonce, the time and the node id. */
export type DiagnosticsPayload = WireType<typeof diagnosticsPayloadSchema>;

export const signedDiagnosticsResponse = {
  type: 'object',
  required: ['payload', 'signature', 'alg', 'canonicalization', 'public_key', 'node_id', 'previous_keys'],
  properties: {
    payload: diagnosticsPayloadSchema,
    /** Ed25519 over the UTF-8 bytes of the RFC 8785 canonical JSON of `payload`, 128 hex digits. */
    signature: { type: 'string' },
    alg: { type: 'string', enum: ['Ed25519'] },
    canonicalization: { type: 'string', enum: ['RFC8785'] },
    public_key: { type: 'string' },
    node_id: { type: 'string' },
    /** The keys this node signed with before (outside the signature): check an older report against them, within their windows. */
    previous_keys: { type: 'array', items: retiredNodeKeySchema },
  },
} as const;
/** The answer of `POST /edge/0-alpha/diagnostics`: the payload, and the node's signature over its RFC 8785 form. */
export type SignedDiagnosticsJson = WireType<typeof signedDiagnosticsResponse>;

export const preparedPairingResponse = {
  type: 'object',
  required: [
    'intent_id',
    'realm',
    'subject',
    'name',
    'public_key',
    'provider',
    'code',
    'expires_at',
    'expires_in',
    'node_id',
    'cluster_id',
  ],
  properties: {
    intent_id: { type: 'string' },
    realm: realmSchema,
    subject: { type: 'string' },
    name: nullableString,
    /** The only device key that can complete the intent; null for a link intent. */
    public_key: nullableString,
    /** A link intent: the provider whose credential completes it; null for a device pairing. */
    provider: nullableString,
    /** The one-time code (`XXXX-XXXX`): give it to the new device's owner, nobody else. */
    code: { type: 'string' },
    expires_at: { type: 'string' },
    expires_in: { type: 'integer' },
    /** The node that prepared the intent (the one whose id the new device signs over). */
    node_id: { type: 'string' },
    /** The cluster it serves in: any node of it can complete the intent. */
    cluster_id: { type: 'string' },
  },
} as const;
/** The answer of `POST /edge/0-alpha/pairing/prepare`. */
export type PreparedPairingJson = WireType<typeof preparedPairingResponse>;

/**
 * The answer of `POST /edge/0-alpha/pairing/complete`: the enrolled device (as enrollment
 * answers it), and which node and which cluster answered. An intent prepared on one node may be
 * completed on another node of the same cluster (they share the store).
 */
export const pairedDeviceResponse = {
  type: 'object',
  required: ['device', 'prepared_by_node', 'completed_by_node', 'cluster_id'],
  properties: {
    device: deviceSchema,
    /** The node that prepared the intent; null for an intent prepared before nodes were recorded. */
    prepared_by_node: nullableString,
    /** The node that completed the pairing: the one that answered. */
    completed_by_node: { type: 'string' },
    /** The cluster it serves in. */
    cluster_id: { type: 'string' },
  },
} as const;
/** The answer of `POST /edge/0-alpha/pairing/complete`. */
export type PairedDeviceJson = WireType<typeof pairedDeviceResponse>;

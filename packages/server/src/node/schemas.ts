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

import { realmSchema } from './management.js';
import type { WireType } from './wire-type.js';

// The wire shapes of provider links (docs/providers.md §3): what the operator listing, a
// principal's own listing and a finished `link` ceremony answer. The credential's own data
// (a passkey's public key, its counter) stays in the store: it is no business of a listing.

const nullableString = { type: ['string', 'null'] } as const;

/** A link: an external identity tied to a subject of one realm. */
export const linkSchema = {
  type: 'object',
  required: ['id', 'realm', 'subject', 'provider', 'issuer', 'external_subject', 'name', 'created_at', 'last_used_at'],
  properties: {
    id: { type: 'string' },
    realm: realmSchema,
    subject: { type: 'string' },
    provider: { type: 'string' },
    issuer: { type: 'string' },
    external_subject: { type: 'string' },
    name: { type: 'string' },
    created_at: { type: 'string' },
    last_used_at: nullableString,
  },
} as const;
/** A link, as listings and a finished `link` ceremony show it. */
export type LinkJson = WireType<typeof linkSchema>;

/** The answer of a link listing: `{"links": [Link]}`. */
export const linkListResponse = {
  type: 'object',
  required: ['links'],
  properties: { links: { type: 'array', items: linkSchema } },
} as const;
/** The answer of a link listing. */
export type LinkListJson = WireType<typeof linkListResponse>;

/** The answer of removing a link. */
export const linkRemovedResponse = {
  type: 'object',
  required: ['link_id', 'removed', 'revoked_sessions'],
  properties: { link_id: { type: 'string' }, removed: { type: 'boolean' }, revoked_sessions: { type: 'integer' } },
} as const;
/** The answer of removing a link: its id and how many sessions it ended. */
export type LinkRemovedJson = WireType<typeof linkRemovedResponse>;

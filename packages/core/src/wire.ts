import type { Realm } from './realm.js';
import type { DeviceRecord, SessionRecord } from './store.js';
import { rfc3339, secondsUntil } from './time.js';

/** `Device` of the contract. */
export interface DeviceJson {
  readonly id: string;
  readonly public_key: string;
  readonly realm: Realm;
  readonly subject: string;
  readonly name: string;
  readonly created_at: string;
}

/** `TokenPair` of the contract. */
export interface TokenPairJson {
  readonly session_id: string;
  readonly realm: Realm;
  readonly token_type: 'Bearer';
  readonly access_token: string;
  readonly expires_in: number;
  readonly refresh_token: string;
  readonly refresh_expires_in: number;
}

/** A session as operators list it (no token material). */
export interface SessionJson {
  readonly id: string;
  readonly realm: Realm;
  readonly subject: string;
  readonly device_id: string;
  readonly created_at: string;
  readonly expires_at: string;
  readonly access_expires_at: string;
  readonly refresh_expires_at: string;
  readonly generation: number;
  readonly last_rotated_at: string | null;
  readonly revoked_at: string | null;
  readonly revoked_reason: string | null;
  /** The address the session was created from; null when unknown. */
  readonly client_address: string | null;
  /** The `User-Agent` it was created with; null when none. */
  readonly user_agent: string | null;
}

/** The contract's `Device` for a record. */
export function deviceToJson(d: DeviceRecord): DeviceJson {
  return {
    id: d.id,
    public_key: d.publicKey,
    realm: d.realm,
    subject: d.subject,
    name: d.name,
    created_at: rfc3339(d.createdAt),
  };
}

/** The listing form of a session. */
export function sessionToJson(s: SessionRecord): SessionJson {
  return {
    id: s.id,
    realm: s.realm,
    subject: s.subject,
    device_id: s.deviceId,
    created_at: rfc3339(s.createdAt),
    expires_at: rfc3339(s.expiresAt),
    access_expires_at: rfc3339(s.accessExpiresAt),
    refresh_expires_at: rfc3339(s.refreshExpiresAt),
    generation: s.generation,
    last_rotated_at: s.lastRotatedAt === null ? null : rfc3339(s.lastRotatedAt),
    revoked_at: s.revokedAt === null ? null : rfc3339(s.revokedAt),
    revoked_reason: s.revokedReason,
    client_address: s.clientAddress,
    user_agent: s.userAgent,
  };
}

/** The contract's `TokenPair` for a session that just received `access` and `refresh`. */
export function tokenPairToJson(s: SessionRecord, access: string, refresh: string, now: number): TokenPairJson {
  return {
    session_id: s.id,
    realm: s.realm,
    token_type: 'Bearer',
    access_token: access,
    expires_in: secondsUntil(s.accessExpiresAt, now),
    refresh_token: refresh,
    refresh_expires_in: secondsUntil(s.refreshExpiresAt, now),
  };
}

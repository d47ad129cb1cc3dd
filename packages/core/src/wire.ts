import type { DeviceRecord, SessionRecord } from './store.js';
import { rfc3339, secondsUntil } from './time.js';
import type { DeviceJson, SessionJson, TokenPairJson } from './wire/management.js';

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

/**
 * The contract's `TokenPair` for a session that just received `access` and `refresh`.
 * `token_type` is `DPoP` when its access token is bound to the device key (`accessBound`: the
 * session has a `jkt` and its realm is `:auth/sender-constraint :required`), else `Bearer`.
 */
export function tokenPairToJson(s: SessionRecord, access: string, refresh: string, now: number, accessBound = false): TokenPairJson {
  return {
    session_id: s.id,
    realm: s.realm,
    token_type: accessBound && typeof s.jkt === 'string' ? 'DPoP' : 'Bearer',
    access_token: access,
    expires_in: secondsUntil(s.accessExpiresAt, now),
    refresh_token: refresh,
    refresh_expires_in: secondsUntil(s.refreshExpiresAt, now),
  };
}

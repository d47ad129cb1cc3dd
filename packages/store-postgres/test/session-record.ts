import type { SessionRecord } from '@svc/core/store';

/**
 * A live management session record of `device`, made at `at` and not yet stored: its access
 * token lasts 15 minutes, its refresh token a day, the session itself `sessionMs`.
 *
 * @example
 * const session = managementSession('ses_01JDZ0000000000000000000AB', device, NOW, 86_400_000);
 */
export function managementSession(
  id: string,
  device: { readonly id: string; readonly subject: string },
  at: number,
  sessionMs: number,
): SessionRecord {
  return {
    id,
    realm: 'management',
    subject: device.subject,
    deviceId: device.id,
    createdAt: at,
    expiresAt: at + sessionMs,
    accessExpiresAt: at + 900_000,
    refreshExpiresAt: at + 86_400_000,
    generation: 0,
    lastRotatedAt: null,
    revokedAt: null,
    revokedReason: null,
    clientAddress: null,
    userAgent: null,
    amr: ['ed25519'],
  };
}

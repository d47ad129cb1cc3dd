import type { AuthDeps } from '../deps.js';
import { AuthError } from '../errors.js';
import { isIdOfKind } from '../ids.js';
import type { Principal } from '../principal.js';
import type { DeviceRemovedJson } from '../wire/management.js';
import { auditDraft } from './event.js';

function lastManagementDevice(): AuthError {
  return new AuthError('invalid_request', 'refusing to remove the last management device; enroll another one first');
}

/**
 * Removes an enrolled device and revokes all its sessions in one transaction. Refuses to
 * remove the last management device, which would lock every administrator out (recovery would
 * then need shell access to the control directory).
 *
 * @example
 * await removeDevice(deps, { principal, deviceId: 'dev_...' });
 */
export async function removeDevice(
  deps: AuthDeps,
  input: { readonly principal: Principal | null; readonly deviceId: unknown; readonly force?: boolean },
): Promise<DeviceRemovedJson> {
  const { deviceId } = input;
  if (typeof deviceId !== 'string' || !isIdOfKind(deviceId, 'device')) {
    throw new AuthError('invalid_request', 'device_id must be a device id (dev_...)');
  }
  const device = await deps.store.getDevice(deviceId);
  if (device === null || device.removedAt !== null) throw new AuthError('not_found', 'no such device');
  const keepLast = device.realm === 'management' && input.force !== true;
  if (keepLast && (await deps.store.countDevices('management')) <= 1) throw lastManagementDevice();
  const now = deps.clock.now();
  // The check above answers the common case early; the store repeats it inside its transaction,
  // where it also holds against a concurrent removal of the other remaining device.
  const result = await deps.store.removeDevice(
    { deviceId, now, keepLast },
    auditDraft(deps, 'device.removed', {
      realm: device.realm,
      subject: device.subject,
      deviceId,
      at: now,
      data: { by_subject: input.principal?.subject ?? 'operator-cli' },
    }),
  );
  if (result.last === true) throw lastManagementDevice();
  if (!result.removed) throw new AuthError('not_found', 'no such device');
  deps.log.info({ event: 'device.removed', device_id: deviceId, revoked_sessions: result.revokedSessions }, 'device removed');
  return { device_id: deviceId, removed: true, revoked_sessions: result.revokedSessions };
}

import type { AuthDeps } from '../deps.js';
import { parsePublicKeyHex } from '../ed25519.js';
import { AuthError } from '../errors.js';
import { newId } from '../ids.js';
import { formatLimit } from '../settings.js';
import type { DeviceRecord } from '../store.js';
import { digestToken, isTokenOfKind } from '../tokens.js';
import { auditDraft } from './event.js';

/** The longest device name accepted. */
export const MAX_DEVICE_NAME = 100;

/**
 * What a device name may not contain: C0 controls, DEL, C1 controls, the Unicode bidirectional
 * controls (U+061C, U+200E/F, U+202A-202E, U+2066-2069) and the line and paragraph separators.
 * Names are shown to operators in terminals and lists; these would let a device rewrite the
 * screen, forge a line, or make one name look like another (a bidi override).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const UNPRINTABLE_IN_NAME = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

/** Validates an optional device name: 1–100 characters, no control or bidirectional-control characters. */
export function parseDeviceName(name: unknown, fallback: string): string {
  if (name === undefined || name === null) return fallback;
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_DEVICE_NAME || UNPRINTABLE_IN_NAME.test(name)) {
    throw new AuthError(
      'invalid_request',
      `name must be 1 to ${MAX_DEVICE_NAME} printable characters, without control or bidirectional-control characters`,
    );
  }
  return name;
}

/**
 * Enrolls a management device with the one-time bootstrap token: the token is used up and the
 * device created in one transaction, with a `device.enrolled` event.
 *
 * @example
 * const device = await enrollWithBootstrapToken(deps, { bootstrapToken, publicKey, name: 'laptop' });
 */
export async function enrollWithBootstrapToken(
  deps: AuthDeps,
  input: { readonly bootstrapToken: unknown; readonly publicKey: unknown; readonly name?: unknown },
): Promise<DeviceRecord> {
  const publicKey = parsePublicKeyHex(input.publicKey);
  const name = parseDeviceName(input.name, 'admin');
  if (!isTokenOfKind(input.bootstrapToken, 'bootstrap')) {
    throw new AuthError('invalid_bootstrap_token', 'the bootstrap token is not one this service issued');
  }
  const now = deps.clock.now();
  const device: DeviceRecord = {
    id: newId('device', deps.clock, deps.random),
    publicKey,
    realm: 'management',
    subject: newId('subject', deps.clock, deps.random),
    name,
    createdAt: now,
    removedAt: null,
  };
  const outcome = await deps.store.consumeBootstrapToken(
    { digest: digestToken(input.bootstrapToken), now, device },
    auditDraft(deps, 'device.enrolled', {
      realm: 'management',
      subject: device.subject,
      deviceId: device.id,
      at: now,
      data: { via: 'bootstrap', public_key: publicKey, name },
    }),
  );
  switch (outcome.kind) {
    case 'enrolled':
      deps.log.info({ event: 'device.enrolled', device_id: device.id, realm: 'management' }, 'device enrolled');
      return outcome.device;
    case 'unknown':
      throw new AuthError('invalid_bootstrap_token', 'unknown or superseded bootstrap token');
    case 'used':
      throw new AuthError('bootstrap_token_used', 'the bootstrap token was already used; run `svc auth init --recover` for a new one');
    case 'expired':
      throw new AuthError(
        'bootstrap_token_expired',
        `the bootstrap token is older than ${formatLimit(deps.settings.bootstrapTokenTtlSeconds, 'seconds')}; run \`svc auth init\` again for a new one`,
      );
    case 'already_enrolled':
      throw new AuthError('already_enrolled', 'that public key is already enrolled');
  }
}

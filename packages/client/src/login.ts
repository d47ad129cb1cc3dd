import type { TokenPairJson } from '@svc/core';
import type { DeviceKey } from './device-key.js';
import type { ManagementClient } from './management-client.js';

/**
 * Signs a device in: asks for a challenge for its public key, signs the challenge's exact
 * UTF-8 string with the device key, and exchanges the signature for a token pair.
 *
 * @example
 * const pair = await login(createManagementClient({ baseUrl }), loadDeviceKey('device.pem'));
 */
export async function login(client: ManagementClient, key: DeviceKey): Promise<TokenPairJson> {
  const challenge = await client.createChallenge(key.publicKeyHex);
  return client.createSession({ challenge_id: challenge.challenge_id, signature: key.sign(challenge.challenge) });
}

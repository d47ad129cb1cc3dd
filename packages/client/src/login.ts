import type { TokenPairJson } from '@svc/core';
import type { DeviceKey } from './device-key.js';
import type { SignInClient } from './management-client.js';

/**
 * Signs a device in: asks for a challenge for its public key, signs the challenge's exact
 * UTF-8 string with the device key, and exchanges the signature for a token pair. The same
 * for both realms: the client says which routes (management API or application gateway).
 *
 * @example
 * const pair = await login(createManagementClient({ baseUrl }), loadDeviceKey('device.pem'));
 * const appPair = await login(createApplicationClient({ baseUrl: 'https://app.example' }), key);
 */
export async function login(client: SignInClient, key: DeviceKey): Promise<TokenPairJson> {
  const challenge = await client.createChallenge(key.publicKeyHex);
  return client.createSession({ challenge_id: challenge.challenge_id, signature: key.sign(challenge.challenge) });
}

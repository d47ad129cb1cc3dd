import type { TokenPairJson } from '@svc/core';
import { assertMayCarryBearer } from './bearer-transport.js';
import type { DeviceKey } from './device-key.js';
import type { SignInClient } from './management-client.js';

/**
 * Signs a device in: asks for a challenge for its public key, signs the challenge's exact
 * UTF-8 string with the device key, and exchanges the signature for a token pair. The same
 * for both realms: the client says which routes (management API or application gateway).
 * Nothing is sent when the token pair would come back over clear text from another machine
 * (a non-loopback `http://` URL): `InsecureBearerUrlError`.
 *
 * @example
 * const pair = await login(createManagementClient({ baseUrl }), loadDeviceKey('device.pem'));
 * const appPair = await login(createApplicationClient({ baseUrl: 'https://app.example' }), key);
 */
export async function login(client: SignInClient, key: DeviceKey): Promise<TokenPairJson> {
  assertMayCarryBearer(client.baseUrl);
  const challenge = await client.createChallenge(key.publicKeyHex);
  return client.createSession({ challenge_id: challenge.challenge_id, signature: key.sign(challenge.challenge) });
}

import type { AuthDeps } from '../deps.js';
import { parsePublicKeyHex } from '../ed25519.js';
import { newId } from '../ids.js';
import type { Realm } from '../realm.js';
import type { ChallengeRecord } from '../store.js';

/** The domain-separation tag that starts every challenge string. */
export const CHALLENGE_DOMAIN = 'svc-auth-v1 challenge';

/**
 * The exact string a device signs: purpose, project, realm, challenge id, a 128-bit nonce and
 * the expiry, space-separated, printable ASCII.
 *
 * @example
 * challengeString({ projectId, realm: 'management', id, nonce, expiresAt });
 * // "svc-auth-v1 challenge prj_... management chl_... 9f3c... 1795000000"
 */
export function challengeString(c: {
  readonly projectId: string;
  readonly realm: Realm;
  readonly id: string;
  readonly nonce: string;
  readonly expiresAt: number;
}): string {
  return `${CHALLENGE_DOMAIN} ${c.projectId} ${c.realm} ${c.id} ${c.nonce} ${Math.floor(c.expiresAt / 1000)}`;
}

/**
 * Creates a random, expiring, single-use challenge for a public key in a realm. An unknown key
 * gets a challenge too (no key enumeration); it fails later with `invalid_signature`.
 *
 * @example
 * const chl = await createChallenge(deps, { publicKey: hex, realm: 'management' });
 */
export async function createChallenge(
  deps: AuthDeps,
  input: { readonly publicKey: unknown; readonly realm: Realm },
): Promise<ChallengeRecord> {
  const publicKey = parsePublicKeyHex(input.publicKey);
  const now = deps.clock.now();
  const id = newId('challenge', deps.clock, deps.random);
  const expiresAt = now + deps.settings.challengeTtlSeconds * 1000;
  const nonce = Buffer.from(deps.random(16)).toString('hex');
  const record: ChallengeRecord = {
    id,
    publicKey,
    realm: input.realm,
    challenge: challengeString({ projectId: deps.projectId, realm: input.realm, id, nonce, expiresAt }),
    createdAt: now,
    expiresAt,
  };
  await deps.store.createChallenge(record);
  return record;
}

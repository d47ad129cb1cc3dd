import type { AuthDeps } from '../deps.js';
import { AuthError } from '../errors.js';
import { makePrincipal, type Principal } from '../principal.js';
import type { Realm } from '../realm.js';
import type { SessionRecord } from '../store.js';
import { isAccessValid } from '../store-rules.js';
import { rfc3339 } from '../time.js';
import { parseSessionToken } from '../tokens.js';

/**
 * Turns a bearer access token into the immutable principal of its session, for one realm.
 * Refused (`invalid_token`) when the token is malformed, unknown, retired by a rotation,
 * expired, revoked, its session has ended, or it is bound to another realm. One store lookup
 * by the session's primary key and a constant-time digest comparison: the hot path of every
 * authenticated request.
 *
 * @example
 * const principal = await authenticate(deps, { token, realm: 'management' });
 */
export async function authenticate(
  deps: Pick<AuthDeps, 'store' | 'clock'>,
  input: { readonly token: string | undefined; readonly realm: Realm },
): Promise<Principal> {
  const { token, realm } = input;
  if (token === undefined || token === '') {
    throw new AuthError('invalid_token', 'a bearer access token is required', { realm });
  }
  const presented = parseSessionToken(token, 'access');
  if (presented === null) {
    throw new AuthError('invalid_token', 'the bearer token is not an access token', { realm });
  }
  const session = await deps.store.findSessionByAccessDigest(presented.sessionId, presented.digest);
  const now = deps.clock.now();
  if (session === null || !isAccessValid(session, now)) {
    throw new AuthError('invalid_token', 'the access token is expired or revoked', { realm });
  }
  if (session.realm !== realm) {
    throw new AuthError('invalid_token', `the access token is bound to another realm, not ${realm}`, { realm });
  }
  return principalOf(session);
}

// A principal depends only on its (immutable, frozen) session record, so a store that hands
// out the same record again (a cache) gets the same principal back without rebuilding it.
const principals = new WeakMap<SessionRecord, Principal>();

function principalOf(session: SessionRecord): Principal {
  const known = principals.get(session);
  if (known !== undefined) return known;
  const principal = makePrincipal({
    subject: session.subject,
    realm: session.realm,
    session: session.id,
    device: session.deviceId,
    claims: { amr: session.amr, auth_time: rfc3339(session.createdAt), exp: rfc3339(session.accessExpiresAt) },
  });
  if (Object.isFrozen(session)) principals.set(session, principal);
  return principal;
}

import type { AuthDeps } from '../deps.js';
import { AuthError } from '../errors.js';
import { silentLogger } from '../ports.js';
import { makePrincipal, type Principal } from '../principal.js';
import type { Realm } from '../realm.js';
import type { SessionRecord } from '../store.js';
import { isAccessValid } from '../store-rules.js';
import { rfc3339 } from '../time.js';
import { parseSessionToken } from '../tokens.js';
import { identityAttributesOf } from '../users.js';
import { checkDpopProof, type DpopRequest } from './check-dpop-proof.js';

/**
 * Turns a bearer access token into the immutable principal of its session, for one realm.
 * Refused (`invalid_token`) when the token is malformed, unknown, retired by a rotation,
 * expired, revoked, its session has ended, or it is bound to another realm. One store lookup
 * by the session's primary key and a constant-time digest comparison: the hot path of every
 * authenticated request.
 *
 * Sender constraint (DPoP, RFC 9449): `dpop` is given when the token came as
 * `Authorization: DPoP <token>`; the session must then be bound to a key (`jkt`) and the proof
 * must verify for this request with `ath` of this token (see `checkDpopProof`). A bound session
 * of a realm under `:auth/sender-constraint :required` is only accepted that way: as a bearer,
 * or without a valid proof, it is `invalid_token` with `WWW-Authenticate: DPoP ...`.
 *
 * @example
 * const principal = await authenticate(deps, { token, realm: 'management' });
 */
export async function authenticate(
  deps: Pick<AuthDeps, 'store' | 'clock'> & Partial<Pick<AuthDeps, 'settings' | 'log'>>,
  input: { readonly token: string | undefined; readonly realm: Realm; readonly dpop?: DpopRequest },
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
  const jkt = typeof session.jkt === 'string' ? session.jkt : null;
  if (input.dpop !== undefined) {
    if (jkt === null) throw dpopTokenRefused(realm, 'the access token is not bound to a key: send it as a Bearer token');
    try {
      await checkDpopProof({ store: deps.store, clock: deps.clock, log: deps.log ?? silentLogger }, input.dpop, {
        jkt,
        accessToken: token,
        sessionId: session.id,
      });
    } catch (err) {
      if (err instanceof AuthError && err.code === 'use_dpop_nonce') throw err;
      throw dpopTokenRefused(realm, err instanceof AuthError ? err.detail : 'the DPoP proof does not verify');
    }
  } else if (jkt !== null && deps.settings?.senderConstraint[realm] === 'required') {
    throw dpopTokenRefused(realm, 'the access token is bound to a key: send it as `Authorization: DPoP` with a DPoP proof');
  }
  return principalOf(session);
}

/** `invalid_token` for a bound token used without its proof, with the DPoP challenge (RFC 9449 §7.1). */
function dpopTokenRefused(realm: Realm, detail: string): AuthError {
  return new AuthError('invalid_token', detail, {
    realm,
    headers: { 'www-authenticate': `DPoP realm="${realm}", error="invalid_token", algs="EdDSA"` },
  });
}

/**
 * The key thumbprint (`jkt`) the session of `principal` is bound to, or null for a bearer
 * session: what the gateway passes on as `cnf` when the request proved possession of it.
 *
 * @example
 * const jkt = principalKeyBinding(principal);
 */
export function principalKeyBinding(principal: Principal): string | null {
  return bindings.get(principal) ?? null;
}

const bindings = new WeakMap<Principal, string>();

/** The most principals {@link principalOf} keeps for reuse (by session id, oldest dropped first). */
const PRINCIPALS_MAX = 10_000;

// A principal depends only on some fields of its session record (see `samePrincipalFields`). A
// store that hands out the same frozen record again (a cache) gets the same principal back, and so
// does one that reads the same unchanged row again as a new record (PostgreSQL, on every check):
// the principal is not rebuilt, its two timestamps not formatted again. A record that differs in
// any of those fields (another user attribute, a rotation's expiry) gets a new principal.
const principals = new Map<string, { readonly session: SessionRecord; readonly principal: Principal }>();

function principalOf(session: SessionRecord): Principal {
  const known = principals.get(session.id);
  if (known !== undefined && (known.session === session || samePrincipalFields(known.session, session))) return known.principal;
  const principal = makePrincipal({
    subject: session.subject,
    realm: session.realm,
    session: session.id,
    device: session.deviceId,
    claims: {
      amr: session.amr,
      auth_time: rfc3339(session.createdAt),
      exp: rfc3339(session.accessExpiresAt),
      ...(session.user === undefined || session.user === null ? {} : identityAttributesOf(session.user)),
    },
  });
  if (typeof session.jkt === 'string') bindings.set(principal, session.jkt);
  // Only an immutable record (its arrays and user too) is kept to compare later ones with.
  if (immutable(session)) {
    if (known === undefined && principals.size >= PRINCIPALS_MAX) principals.delete(principals.keys().next().value as string);
    principals.set(session.id, { session, principal });
  }
  return principal;
}

/**
 * Whether two records of one session give the same principal: every field {@link principalOf}
 * reads is equal (the user's attributes included, and the key binding).
 */
function samePrincipalFields(a: SessionRecord, b: SessionRecord): boolean {
  if (
    a.subject !== b.subject ||
    a.realm !== b.realm ||
    a.deviceId !== b.deviceId ||
    a.createdAt !== b.createdAt ||
    a.accessExpiresAt !== b.accessExpiresAt ||
    (a.jkt ?? null) !== (b.jkt ?? null) ||
    !sameStrings(a.amr, b.amr)
  ) {
    return false;
  }
  const u = a.user ?? null;
  const v = b.user ?? null;
  if (u === null || v === null) return u === v;
  return u.name === v.name && u.email === v.email && u.emailVerified === v.emailVerified && sameStrings(u.groups, v.groups);
}

function immutable(session: SessionRecord): boolean {
  const user = session.user ?? null;
  return (
    Object.isFrozen(session) && Object.isFrozen(session.amr) && (user === null || (Object.isFrozen(user) && Object.isFrozen(user.groups)))
  );
}

function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

import type { Realm } from './realm.js';

/** The claims a principal carries: facts about how and when it signed in. */
export interface PrincipalClaims {
  readonly amr: readonly string[];
  readonly auth_time: string;
  readonly exp: string;
}

/** A verified caller. Immutable: deep-frozen when made. */
export interface Principal {
  readonly subject: string;
  readonly realm: Realm;
  readonly session: string;
  readonly device: string;
  readonly claims: PrincipalClaims;
}

/**
 * Makes a deep-frozen principal. Only the core's use cases call this; providers and
 * application modules receive principals, they never make them.
 *
 * @example
 * const p = makePrincipal({ subject, realm: 'management', session, device, claims });
 */
export function makePrincipal(p: Principal): Principal {
  return Object.freeze({
    subject: p.subject,
    realm: p.realm,
    session: p.session,
    device: p.device,
    claims: Object.freeze({ amr: Object.freeze([...p.claims.amr]), auth_time: p.claims.auth_time, exp: p.claims.exp }),
  });
}

import type { Realm } from './realm.js';

/**
 * The claims a principal carries: how and when it signed in, and who the user is when known
 * (`email`, `email_verified`, `name`, `groups`: absent when unknown, never empty; see
 * `identityAttributesOf`).
 */
export interface PrincipalClaims {
  readonly amr: readonly string[];
  readonly auth_time: string;
  readonly exp: string;
  readonly email?: string;
  readonly email_verified?: boolean;
  readonly name?: string;
  readonly groups?: readonly string[];
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
    claims: Object.freeze({
      amr: Object.freeze([...p.claims.amr]),
      auth_time: p.claims.auth_time,
      exp: p.claims.exp,
      ...(p.claims.email === undefined ? {} : { email: p.claims.email, email_verified: p.claims.email_verified === true }),
      ...(p.claims.name === undefined ? {} : { name: p.claims.name }),
      ...(p.claims.groups === undefined ? {} : { groups: Object.freeze([...p.claims.groups]) }),
    }),
  });
}

import type { AuthDeps } from '../deps.js';
import { AuthError } from '../errors.js';
import { isIdOfKind } from '../ids.js';
import type { Principal } from '../principal.js';
import type { LinkRecord } from '../store.js';
import { checkDisplayName } from '../users.js';
import { auditDraft } from './event.js';

// A person's own account (the gateway's account page): the decisions about their own
// credentials, each audited as self-service (`via: 'self'`, who and from which session).

/** The facts every self-service event carries: it was the person themself, from this session. */
export function selfServiceData(principal: Principal): { via: 'self'; by_subject: string; by_session: string } {
  return { via: 'self', by_subject: principal.subject, by_session: principal.session };
}

/**
 * How a session was signed in, in words for its owner, from its RFC 8176 `amr`: `"a passkey"`,
 * `"your company sign-in"` (with the provider's label when known: `"your company sign-in (Acme SSO)"`),
 * `"a device key"`; `"another method"` for anything else.
 *
 * @example
 * signInMethodWords(['hwk', 'user']); // 'a passkey'
 * signInMethodWords(['fed'], 'Acme SSO'); // 'your company sign-in (Acme SSO)'
 */
export function signInMethodWords(amr: readonly string[], providerLabel?: string): string {
  if (amr.includes('fed')) return providerLabel === undefined ? 'your company sign-in' : `your company sign-in (${providerLabel})`;
  if (amr.includes('hwk') || amr.includes('swk')) return 'a passkey';
  if (amr.includes('ed25519')) return 'a device key';
  return 'another method';
}

/** The caller's own live link `linkId`: another's, a removed one or an unknown one is `not_found`, as if it did not exist. */
async function ownLink(deps: Pick<AuthDeps, 'store'>, principal: Principal, linkId: unknown): Promise<LinkRecord & { id: string }> {
  if (!isIdOfKind(linkId, 'link')) throw new AuthError('invalid_request', 'link_id must be a link id (lnk_...)');
  const link = await deps.store.getLink(linkId);
  if (link === null || link.removedAt !== null || link.realm !== principal.realm || link.subject !== principal.subject) {
    throw new AuthError('not_found', 'no such credential');
  }
  return link;
}

/**
 * Removes one of the caller's own credentials (a link: a passkey, a company sign-in), with a
 * `link.removed` event marked self-service; its sessions are revoked (this one too, when it
 * signed this session in). Never the last way in: when the subject would keep no other live
 * link and no active device key, `409 last_credential` and nothing is written (add another
 * first, or ask an administrator for a recovery code), decided by the store in the removal's
 * own transaction (`keepAnotherWayIn`), so two removals at once cannot both pass.
 *
 * @example
 * await removeOwnLink(deps, { principal, linkId: 'lnk_...' }); // { link_id, removed: true, revoked_sessions: 1 }
 */
export async function removeOwnLink(
  deps: AuthDeps,
  input: { readonly principal: Principal; readonly linkId: unknown },
): Promise<{ readonly link_id: string; readonly removed: true; readonly revoked_sessions: number; readonly signed_out: boolean }> {
  const { principal } = input;
  const link = await ownLink(deps, principal, input.linkId);
  const now = deps.clock.now();
  // The store decides "not the last way in" in the same transaction as the removal.
  const result = await deps.store.removeLink(
    { linkId: link.id, now, keepAnotherWayIn: true },
    auditDraft(deps, 'link.removed', {
      realm: link.realm,
      subject: link.subject,
      deviceId: link.id,
      sessionId: principal.session,
      at: now,
      data: { provider: link.provider, issuer: link.issuer, ...selfServiceData(principal) },
    }),
  );
  if (result.lastWayIn === true) {
    throw new AuthError('last_credential', 'this is your only way to sign in: add another passkey before removing this one');
  }
  if (!result.removed) throw new AuthError('not_found', 'no such credential');
  deps.log.info({ event: 'link.removed', link_id: link.id, revoked_sessions: result.revokedSessions, via: 'self' }, 'link removed');
  return { link_id: link.id, removed: true, revoked_sessions: result.revokedSessions, signed_out: principal.device === link.id };
}

/**
 * Renames one of the caller's own credentials (the name they know it by: "Work laptop"), with
 * a `link.renamed` event marked self-service. The name follows the display-name rules (1 to
 * 128 characters, no control or bidirectional-override characters).
 *
 * @example
 * await renameOwnLink(deps, { principal, linkId: 'lnk_...', name: 'Phone' }); // { link_id, name: 'Phone' }
 */
export async function renameOwnLink(
  deps: AuthDeps,
  input: { readonly principal: Principal; readonly linkId: unknown; readonly name: unknown },
): Promise<{ readonly link_id: string; readonly name: string }> {
  const { principal } = input;
  const checked = checkDisplayName(input.name);
  if ('problem' in checked) throw new AuthError('invalid_request', checked.problem);
  const link = await ownLink(deps, principal, input.linkId);
  const renamed = await deps.store.renameLink(
    { linkId: link.id, name: checked.name },
    auditDraft(deps, 'link.renamed', {
      realm: link.realm,
      subject: link.subject,
      deviceId: link.id,
      sessionId: principal.session,
      data: { provider: link.provider, name: checked.name, previous_name: link.name, ...selfServiceData(principal) },
    }),
  );
  if (!renamed) throw new AuthError('not_found', 'no such credential');
  deps.log.info({ event: 'link.renamed', link_id: link.id, via: 'self' }, 'link renamed');
  return { link_id: link.id, name: checked.name };
}

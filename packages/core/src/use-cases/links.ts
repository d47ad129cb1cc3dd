import type { AuthDeps } from '../deps.js';
import { AuthError } from '../errors.js';
import { isIdOfKind } from '../ids.js';
import type { Principal } from '../principal.js';
import { isRealm, type Realm } from '../realm.js';
import type { LinkRecord } from '../store.js';
import { rfc3339 } from '../time.js';
import type { LinkJson, LinkRemovedJson } from '../wire/links.js';
import { auditDraft } from './event.js';

/**
 * The wire form of a link (the credential's own data stays in the store).
 *
 * @example
 * const json = linkToJson(link); // { id: 'lnk_...', provider: 'passkey', issuer: 'webauthn:example.com', ... }
 */
export function linkToJson(link: LinkRecord): LinkJson {
  return {
    id: link.id,
    realm: link.realm,
    subject: link.subject,
    provider: link.provider,
    issuer: link.issuer,
    external_subject: link.externalSubject,
    name: link.name,
    created_at: rfc3339(link.createdAt),
    last_used_at: link.lastUsedAt === null ? null : rfc3339(link.lastUsedAt),
  };
}

/**
 * Live links, oldest first. The operator (no principal: the CLI on the control directory) and
 * a management principal see every link, narrowed by `realm` and `subject`; an application
 * principal sees only its own, whatever it asks for.
 *
 * @example
 * const links = await listLinks(deps, { principal: null, realm: 'application' });
 */
export async function listLinks(
  deps: Pick<AuthDeps, 'store'>,
  input: { readonly principal: Principal | null; readonly realm?: unknown; readonly subject?: unknown },
): Promise<readonly LinkJson[]> {
  if (input.realm !== undefined && !isRealm(input.realm))
    throw new AuthError('invalid_request', 'realm must be "management" or "application"');
  if (input.subject !== undefined && !isIdOfKind(input.subject, 'subject')) {
    throw new AuthError('invalid_request', 'subject must be a subject id (sub_...)');
  }
  const own = input.principal !== null && input.principal.realm !== 'management';
  const filter: { realm?: Realm; subject?: string } = own
    ? { realm: input.principal.realm, subject: input.principal.subject }
    : {
        ...(input.realm === undefined ? {} : { realm: input.realm }),
        ...(input.subject === undefined ? {} : { subject: input.subject }),
      };
  return (await deps.store.listLinks(filter)).map(linkToJson);
}

/**
 * Removes a link and revokes every session it signed in, with a `link.removed` event, in one
 * transaction. The operator (no principal) and a management principal may remove any link; an
 * application principal only its own (another's is `not_found`, as if it did not exist).
 *
 * @example
 * await unlinkIdentity(deps, { principal: null, linkId: 'lnk_...' }); // { link_id, removed: true, revoked_sessions: 1 }
 */
export async function unlinkIdentity(
  deps: AuthDeps,
  input: { readonly principal: Principal | null; readonly linkId: unknown },
): Promise<LinkRemovedJson> {
  const { linkId, principal } = input;
  if (!isIdOfKind(linkId, 'link')) throw new AuthError('invalid_request', 'link_id must be a link id (lnk_...)');
  const link = await deps.store.getLink(linkId);
  const visible =
    link !== null &&
    link.removedAt === null &&
    (principal === null || principal.realm === 'management' || (principal.realm === link.realm && principal.subject === link.subject));
  if (!visible) throw new AuthError('not_found', 'no such link');
  const now = deps.clock.now();
  const result = await deps.store.removeLink(
    { linkId, now },
    auditDraft(deps, 'link.removed', {
      realm: link.realm,
      subject: link.subject,
      deviceId: link.id,
      at: now,
      data: {
        provider: link.provider,
        issuer: link.issuer,
        by_subject: principal?.subject ?? 'operator-cli',
      },
    }),
  );
  if (!result.removed) throw new AuthError('not_found', 'no such link');
  deps.log.info({ event: 'link.removed', link_id: linkId, revoked_sessions: result.revokedSessions }, 'link removed');
  return { link_id: linkId, removed: true, revoked_sessions: result.revokedSessions };
}

import type { AuthDeps } from '../deps.js';
import { AuthError } from '../errors.js';
import { isIdOfKind, newId } from '../ids.js';
import type { ScimTokenRecord } from '../store.js';
import { rfc3339 } from '../time.js';
import { digestToken, isTokenOfKind, mintToken } from '../tokens.js';
import { checkDisplayName, DISPLAY_NAME_MAX_CHARS } from '../users.js';
import type { ScimTokenCreatedJson, ScimTokenJson, ScimTokenRevokedJson } from '../wire/scim-tokens.js';
import { auditDraft } from './event.js';

/** Who manages SCIM tokens: a management principal, or a local operator command (`subject` null). */
export interface ScimTokenActor {
  readonly via: 'management_api' | 'cli';
  readonly subject: string | null;
  readonly session: string | null;
}

/** The longest SCIM token name, in characters. */
export const SCIM_TOKEN_NAME_MAX_CHARS = DISPLAY_NAME_MAX_CHARS;

/**
 * Mints a SCIM bearer token (`svcs_` and 256 bits of CSPRNG output) for a company directory,
 * stores only its digest, and returns it: the one time it is ever shown. Audited as
 * `scim_token.created` (id and name, never the token).
 *
 * @example
 * const { token } = await createScimToken(deps, { name: 'entra', actor: { via: 'cli', subject: null, session: null } });
 */
export async function createScimToken(
  deps: AuthDeps,
  input: { readonly name: unknown; readonly actor: ScimTokenActor },
): Promise<ScimTokenCreatedJson> {
  // The rules of a display name: 1-128 characters, no control or bidi-override characters.
  const checked = checkDisplayName(input.name);
  if ('problem' in checked) throw new AuthError('invalid_request', `name (the directory the token is for): ${checked.problem}`);
  const name = checked.name;
  const now = deps.clock.now();
  const token = mintToken('scim', deps.random);
  const record: ScimTokenRecord = {
    id: newId('scimToken', deps.clock, deps.random),
    digest: digestToken(token),
    name,
    createdAt: now,
    createdBy: input.actor.subject,
    lastUsedAt: null,
    revokedAt: null,
  };
  await deps.store.createScimToken(
    record,
    auditDraft(deps, 'scim_token.created', {
      at: now,
      subject: input.actor.subject,
      sessionId: input.actor.session,
      data: { via: input.actor.via, token_id: record.id, name },
    }),
  );
  deps.log.info({ event: 'scim_token.created', token_id: record.id }, 'SCIM token created');
  return { id: record.id, name, token, created_at: rfc3339(now) };
}

/** A SCIM token as listings show it: never the token or its digest. */
export function scimTokenToJson(t: ScimTokenRecord): ScimTokenJson {
  return {
    id: t.id,
    name: t.name,
    created_at: rfc3339(t.createdAt),
    last_used_at: t.lastUsedAt === null ? null : rfc3339(t.lastUsedAt),
    revoked_at: t.revokedAt === null ? null : rfc3339(t.revokedAt),
  };
}

/**
 * Every SCIM token, revoked ones included, oldest first.
 *
 * @example
 * const tokens = await listScimTokens(deps);
 */
export async function listScimTokens(deps: Pick<AuthDeps, 'store'>): Promise<ScimTokenJson[]> {
  return (await deps.store.listScimTokens()).map(scimTokenToJson);
}

/**
 * Revokes a SCIM token: the directory's next request with it is refused. Audited as
 * `scim_token.revoked`. `404 not_found` when unknown or already revoked.
 *
 * @example
 * await revokeScimToken(deps, { id: 'sct_...', actor });
 */
export async function revokeScimToken(
  deps: AuthDeps,
  input: { readonly id: unknown; readonly actor: ScimTokenActor },
): Promise<ScimTokenRevokedJson> {
  if (!isIdOfKind(input.id, 'scimToken')) throw new AuthError('invalid_request', 'id must be a SCIM token id (sct_...)');
  const id = input.id;
  const now = deps.clock.now();
  const revoked = await deps.store.revokeScimToken(
    { id, now },
    auditDraft(deps, 'scim_token.revoked', {
      at: now,
      subject: input.actor.subject,
      sessionId: input.actor.session,
      data: { via: input.actor.via, token_id: id },
    }),
  );
  if (!revoked) throw new AuthError('not_found', 'no such live SCIM token');
  deps.log.info({ event: 'scim_token.revoked', token_id: id }, 'SCIM token revoked');
  return { id, revoked: true };
}

/**
 * The live SCIM token an `Authorization` header carries (`Bearer svcs_...`), its last use
 * recorded (at most once a minute: the store's `useScimToken`); anything else (no header,
 * another scheme, another kind of token, unknown, revoked) is `401 invalid_scim_token`. A token
 * of the wrong shape is refused without touching the store, a well-formed refused one with a
 * read only.
 *
 * @example
 * const token = await authenticateScimToken(deps, req.headers.authorization);
 */
export async function authenticateScimToken(deps: Pick<AuthDeps, 'store' | 'clock'>, authorization: unknown): Promise<ScimTokenRecord> {
  const refuse = (): AuthError =>
    new AuthError('invalid_scim_token', 'a live SCIM bearer token (Authorization: Bearer svcs_...) is required');
  if (typeof authorization !== 'string') throw refuse();
  const match = /^Bearer +(\S+) *$/i.exec(authorization);
  const token = match?.[1];
  if (!isTokenOfKind(token, 'scim')) throw refuse();
  const record = await deps.store.useScimToken({ digest: digestToken(token), now: deps.clock.now() });
  if (record === null) throw refuse();
  return record;
}

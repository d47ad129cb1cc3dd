import type { AuthDeps } from '../deps.js';
import { ConfigError } from '../errors.js';
import { newId } from '../ids.js';
import { digestToken, mintToken } from '../tokens.js';
import { auditDraft } from './event.js';

/** Why a bootstrap token was issued. */
export type BootstrapReason = 'init' | 'reissue' | 'recovery';

/** A freshly issued bootstrap token. The token itself exists only here, never in the store. */
export interface IssuedBootstrapToken {
  readonly token: string;
  readonly expiresAt: number;
  readonly reason: BootstrapReason;
}

/**
 * Issues a one-time bootstrap token valid for 15 minutes; any earlier unused one is superseded.
 * While a management device exists this is refused unless `recovery` is set, so re-running
 * `svc auth init` never silently hands out a way past an enrolled admin. Always audited.
 *
 * @example
 * const { token, expiresAt } = await issueBootstrapToken(deps, { recovery: false });
 */
export async function issueBootstrapToken(deps: AuthDeps, input: { readonly recovery: boolean }): Promise<IssuedBootstrapToken> {
  const admins = await deps.store.countDevices('management');
  if (admins > 0 && !input.recovery) {
    throw new ConfigError([
      {
        file: 'control database',
        key: 'management devices',
        message: `${admins} management device(s) already enrolled; a new bootstrap token is issued only with --recover (audited)`,
      },
    ]);
  }
  const reason: BootstrapReason = admins > 0 ? 'recovery' : input.recovery ? 'recovery' : 'init';
  const now = deps.clock.now();
  const token = mintToken('bootstrap', deps.random);
  const expiresAt = now + deps.settings.bootstrapTokenTtlSeconds * 1000;
  const id = newId('bootstrap', deps.clock, deps.random);
  await deps.store.issueBootstrapToken(
    { id, digest: digestToken(token), createdAt: now, expiresAt },
    auditDraft(deps, 'bootstrap.issued', {
      realm: 'management',
      at: now,
      data: { bootstrap_id: id, reason, management_devices: admins, expires_at: new Date(expiresAt).toISOString() },
    }),
  );
  deps.log.info({ event: 'bootstrap.issued', bootstrap_id: id, reason }, 'bootstrap token issued');
  return { token, expiresAt, reason };
}

import { isIdOfKind, revokeScimToken, type ScimTokenRevokedJson } from '@svc/core';
import { withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { explainFailure } from '../errors-map.js';
import { checkMode, SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc auth scim token revoke',
  summary: "Revoke a SCIM token: the directory's next request with it is refused (audited).",
  usage: 'svc auth scim token revoke <ID> [<PROJECT>] [--json]',
  help: [
    '<ID>                  the sct_... id (see `svc auth scim token list`)',
    '<PROJECT>             the project directory (offline); without it, the management API with the saved session',
    '--json                print {"id","revoked"}',
    PROJECT_HELP,
    ...SESSION_HELP,
  ],
  options: { ...SESSION_OPTIONS, ...PROJECT_OPTIONS },
  positionals: ['ID', 'PROJECT'],
  optionalPositionals: 1,
} as const;

const HINTS = { not_found: 'check the id with `svc auth scim token list` (a revoked token cannot be revoked again)' } as const;

/**
 * `svc auth scim token revoke <ID> [<PROJECT>]`: core `revokeScimToken` as the operator, or
 * `DELETE /v1/auth/scim-tokens/:id` as the signed-in management device.
 *
 * @example
 * await authScimTokenRevoke.run(['sct_01J...', './demo']);
 */
export const authScimTokenRevoke: Command = {
  path: ['auth', 'scim', 'token', 'revoke'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [id, dir] = args.positionals as [string, string | undefined];
    checkMode(spec.name, dir, args.values);
    if (!isIdOfKind(id, 'scimToken')) throw new UsageError(`${spec.name}: <ID> must be a SCIM token id (sct_...)`);
    const what = 'revoking the SCIM token failed';
    const result: ScimTokenRevokedJson =
      dir === undefined
        ? await viaApi(args.values, what, (api, token) => api.revokeScimToken(token, id), { hints: HINTS })
        : await withProject(dir, args.values.profile, async ({ deps }) => {
            try {
              return await revokeScimToken(deps, { id, actor: { via: 'cli', subject: null, session: null } });
            } catch (error) {
              throw explainFailure(what, error, { hints: HINTS });
            }
          });
    if (args.values.json === true) printJson(result);
    else printText(`revoked SCIM token ${result.id}`);
    return 0;
  },
};

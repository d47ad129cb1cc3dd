import { isIdOfKind, unlinkIdentity } from '@svc/core';
import { withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { explainFailure } from '../errors-map.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc auth links remove',
  summary: 'Remove a link and revoke all the sessions it signed in (audited).',
  usage: 'svc auth links remove <LINK_ID> <PROJECT> [--json]',
  help: [
    '<LINK_ID>             the lnk_... id (see `svc auth links`)',
    '<PROJECT>             the project directory',
    '--json                print {"link_id","removed","revoked_sessions"}',
    PROJECT_HELP,
  ],
  options: { json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['LINK_ID', 'PROJECT'],
} as const;

/**
 * `svc auth links remove <LINK_ID> <PROJECT>`: core `unlinkIdentity` as the operator: the link is
 * removed and its sessions revoked in one transaction, with a `link.removed` event.
 *
 * @example
 * await authLinksRemove.run(['lnk_01J...', './demo']);
 */
export const authLinksRemove: Command = {
  path: ['auth', 'links', 'remove'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [linkId, dir] = args.positionals as [string, string];
    // Checked here, so that an invalid_request from unlinkIdentity is its refusal (exit 1).
    if (!isIdOfKind(linkId, 'link')) throw new UsageError(`${spec.name}: <LINK_ID> must be a link id (lnk_...)`);
    const result = await withProject(dir, args.values.profile, async ({ deps }) => {
      try {
        return await unlinkIdentity(deps, { principal: null, linkId });
      } catch (error) {
        throw explainFailure('link removal refused', error, { invalidRequest: 'refusal' });
      }
    });
    if (args.values.json === true) printJson(result);
    else printText(`removed link ${result.link_id}; revoked ${result.revoked_sessions} session(s)`);
    return 0;
  },
};

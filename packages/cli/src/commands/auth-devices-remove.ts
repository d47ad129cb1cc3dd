import { removeDevice } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { explainFailure } from '../errors-map.js';
import { printJson, printLine } from '../output.js';
import { withProject } from '../session.js';

const spec = {
  name: 'svc auth devices remove',
  summary: 'Remove an enrolled device and revoke all its sessions (audited; refuses the last management device).',
  usage: 'svc auth devices remove <DEVICE_ID> <PROJECT> [--json]',
  help: [
    '<DEVICE_ID>           the dev_... id (see `svc auth devices`)',
    '<PROJECT>             the project directory',
    '--json                print the result',
    PROJECT_HELP,
  ],
  options: { json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['DEVICE_ID', 'PROJECT'],
} as const;

/**
 * `svc auth devices remove <DEVICE_ID> <PROJECT>`: core `removeDevice` as the operator.
 *
 * @example
 * await authDevicesRemove.run(['dev_01J...', './demo']);
 */
export const authDevicesRemove: Command = {
  path: ['auth', 'devices', 'remove'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [deviceId, dir] = args.positionals as [string, string];
    return withProject(dir, args.values.profile, async ({ deps }) => {
      let result: Awaited<ReturnType<typeof removeDevice>>;
      try {
        result = await removeDevice(deps, { principal: null, deviceId });
      } catch (error) {
        throw explainFailure('device removal refused', error);
      }
      if (args.values.json === true) printJson(result);
      else printLine(`removed device ${result.device_id}; revoked ${result.revoked_sessions} session(s)`);
      return 0;
    });
  },
};

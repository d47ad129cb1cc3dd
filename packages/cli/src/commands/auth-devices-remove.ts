import { isIdOfKind, removeDevice } from '@svc/core';
import { withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { explainFailure } from '../errors-map.js';
import { checkMode, SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc auth devices remove',
  summary: 'Remove an enrolled device and revoke all its sessions (audited; refuses the last management device).',
  usage: 'svc auth devices remove <DEVICE_ID> [<PROJECT>] [--json]',
  help: [
    '<DEVICE_ID>           the dev_... id (see `svc auth devices`)',
    '<PROJECT>             the project directory (offline); without it, the management API with the saved session',
    '--json                print {"device_id","removed","revoked_sessions"}',
    PROJECT_HELP,
    ...SESSION_HELP,
  ],
  options: { ...SESSION_OPTIONS, ...PROJECT_OPTIONS },
  positionals: ['DEVICE_ID', 'PROJECT'],
  optionalPositionals: 1,
} as const;

/**
 * `svc auth devices remove <DEVICE_ID> [<PROJECT>]`: core `removeDevice` as the operator, or
 * `DELETE /v1/auth/devices/:id` as the signed-in management device.
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
    const [deviceId, dir] = args.positionals as [string, string | undefined];
    checkMode(spec.name, dir, args.values);
    // Checked here, so that an invalid_request from removeDevice is its refusal (exit 1).
    if (!isIdOfKind(deviceId, 'device')) throw new UsageError(`${spec.name}: <DEVICE_ID> must be a device id (dev_...)`);
    const what = 'device removal refused';
    const result =
      dir === undefined
        ? ((await viaApi(args.values, what, (api, token) => api.removeDevice(token, deviceId), { invalidRequest: 'refusal' })) as Awaited<
            ReturnType<typeof removeDevice>
          >)
        : await withProject(dir, args.values.profile, async ({ deps }) => {
            try {
              return await removeDevice(deps, { principal: null, deviceId });
            } catch (error) {
              throw explainFailure(what, error, { invalidRequest: 'refusal' });
            }
          });
    if (args.values.json === true) printJson(result);
    else printText(`removed device ${result.device_id}; revoked ${result.revoked_sessions} session(s)`);
    return 0;
  },
};

import { type DeviceJson, deviceToJson, isRealm } from '@svc/core';
import { withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { checkMode, SESSION_HELP, SESSION_OPTIONS, viaApi, viaOwnSession } from '../operator-api.js';
import { printDevices } from '../operator-output.js';

const spec = {
  name: 'svc auth devices',
  summary: 'List the enrolled devices: offline on a project, or over the management API with the saved session.',
  usage: 'svc auth devices [<PROJECT>] [--realm management|application] [--mine] [--json]',
  help: [
    '<PROJECT>             the project directory (offline); without it, the management API with the saved session',
    '--realm REALM         only devices of that realm',
    "--mine                only your own (the signed-in subject's), over the API of the saved sign-in's realm",
    '                      (the management API, or the application gateway after an application login)',
    '--json                print {"devices": [Device]}',
    PROJECT_HELP,
    ...SESSION_HELP,
  ],
  options: { realm: { type: 'string' }, mine: { type: 'boolean' }, ...SESSION_OPTIONS, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
  optionalPositionals: 1,
} as const;

/**
 * `svc auth devices [<PROJECT>]`: the active devices, oldest first, from the project's store or
 * from `GET /v1/auth/devices`; the same table (or JSON) either way.
 *
 * @example
 * await authDevices.run(['./demo', '--json']);
 */
export const authDevices: Command = {
  path: ['auth', 'devices'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const realm = args.values.realm;
    if (realm !== undefined && !isRealm(realm)) throw new UsageError(`${spec.name}: --realm must be management or application`);
    const [dir] = args.positionals as [string | undefined];
    checkMode(spec.name, dir, args.values);
    const mine = args.values.mine === true;
    if (mine && dir !== undefined)
      throw new UsageError(`${spec.name}: --mine lists the signed-in subject's devices over the management API; drop <PROJECT>`);
    let devices: readonly DeviceJson[];
    if (dir !== undefined) {
      devices = await withProject(dir, args.values.profile, async ({ store }) =>
        (await store.listDevices(realm === undefined ? {} : { realm })).map(deviceToJson),
      );
    } else {
      // --mine is self-service: the signed-in subject of the saved session, in either realm.
      const listed = mine
        ? await viaOwnSession(args.values, 'listing your devices failed', (api, token) => api.ownDevices(token))
        : await viaApi(args.values, 'listing devices failed', (api, token) => api.devices(token));
      devices = listed.devices.filter((d) => realm === undefined || d.realm === realm);
    }
    printDevices(devices, args.values.json === true);
    return 0;
  },
};

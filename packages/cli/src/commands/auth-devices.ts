import { deviceToJson, isRealm } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printLine } from '../output.js';
import { withProject } from '../session.js';

const spec = {
  name: 'svc auth devices',
  summary: 'List the enrolled devices (offline, on the project).',
  usage: 'svc auth devices <PROJECT> [--realm management|application] [--json]',
  help: [
    '<PROJECT>             the project directory',
    '--realm REALM         only devices of that realm',
    '--json                print {"devices": [Device]}',
    PROJECT_HELP,
  ],
  options: { realm: { type: 'string' }, json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc auth devices <PROJECT>`: the active devices, oldest first.
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
    const [dir] = args.positionals as [string];
    return withProject(dir, args.values.profile, async ({ store }) => {
      const devices = (await store.listDevices(realm === undefined ? {} : { realm })).map(deviceToJson);
      if (args.values.json === true) printJson({ devices });
      else if (devices.length === 0) printLine('no devices enrolled');
      else for (const d of devices) printLine(`${d.id}  ${d.realm.padEnd(11)}  ${d.public_key}  ${d.created_at}  ${d.name}`);
      return 0;
    });
  },
};

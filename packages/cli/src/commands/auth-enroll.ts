import { deviceToJson, enrollWithBootstrapToken } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { explainFailure } from '../errors-map.js';
import { printJson, printLine } from '../output.js';
import { withProject } from '../session.js';

const spec = {
  name: 'svc auth enroll',
  summary: 'Enroll the first management device with the one-time bootstrap token (offline, on the project).',
  usage: 'svc auth enroll <BOOTSTRAP_TOKEN> <ED25519_PUBLIC_KEY_HEX> <PROJECT> [--name NAME] [--json]',
  help: [
    '<BOOTSTRAP_TOKEN>     the svcb_... token printed by `svc auth init`',
    '<ED25519_PUBLIC_KEY_HEX>  the device public key, 64 hex digits (`svc auth keygen` or `svc auth pubkey --key FILE`)',
    '<PROJECT>             the project directory',
    '--name NAME           a name for the device (default: admin)',
    '--json                print {"device": Device}',
    PROJECT_HELP,
  ],
  options: { name: { type: 'string' }, json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['BOOTSTRAP_TOKEN', 'ED25519_PUBLIC_KEY_HEX', 'PROJECT'],
} as const;

/**
 * `svc auth enroll <BOOTSTRAP_TOKEN> <PUBHEX> <PROJECT>`: uses up the bootstrap token and
 * enrolls the device key in the management realm, through core's use case.
 *
 * @example
 * await authEnroll.run([token, publicKeyHex, './demo', '--json']);
 */
export const authEnroll: Command = {
  path: ['auth', 'enroll'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [bootstrapToken, publicKey, dir] = args.positionals as [string, string, string];
    return withProject(dir, args.values.profile, async ({ deps }) => {
      let device: Awaited<ReturnType<typeof enrollWithBootstrapToken>>;
      try {
        device = await enrollWithBootstrapToken(deps, { bootstrapToken, publicKey, name: args.values.name });
      } catch (error) {
        throw explainFailure('enrollment refused', error);
      }
      if (args.values.json === true) printJson({ device: deviceToJson(device) });
      else {
        printLine(`enrolled device ${device.id} ("${device.name}") in the ${device.realm} realm as ${device.subject}`);
        printLine(`next: \`svc auth serve ${dir}\`, then \`svc auth login --key <KEY_FILE>\``);
      }
      return 0;
    });
  },
};

import { defaultDeviceKeyPath } from '@svc/client';
import { deviceToJson, enrollWithBootstrapToken } from '@svc/core';
import { withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { readDeviceKey } from '../device-key-file.js';
import { explainFailure } from '../errors-map.js';
import { printJson, printLine, shellQuote } from '../output.js';
import { readSecret } from '../secret-input.js';

const spec = {
  name: 'svc auth enroll',
  summary: 'Enroll the first management device with the one-time bootstrap token (offline, on the project).',
  usage: 'svc auth enroll - [<ED25519_PUBLIC_KEY_HEX>] <PROJECT> [--key FILE] [--name NAME] [--json]',
  help: [
    '-                     read the svcb_... bootstrap token printed by `svc auth init` from standard input',
    '                      (on a terminal: a prompt that does not echo; the same when it is left out).',
    '                      The token itself may stand here too, but then any local user can read it (ps).',
    '<ED25519_PUBLIC_KEY_HEX>  the device public key, 64 hex digits (`svc auth keygen` or `svc auth pubkey --key FILE`)',
    "<ED25519_PUBLIC_KEY_HEX>  left out: the public key of --key FILE, else of this user's device key",
    '                      ($SVC_DEVICE_KEY, else ~/.config/svc/device.pem, made by `svc auth keygen`)',
    '<PROJECT>             the project directory',
    '--key FILE            the device key whose public key to enroll (instead of the hex)',
    '--name NAME           a name for the device (default: admin)',
    '--json                print {"device": Device}',
    PROJECT_HELP,
  ],
  options: { key: { type: 'string' }, name: { type: 'string' }, json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['BOOTSTRAP_TOKEN', 'ED25519_PUBLIC_KEY_HEX', 'PROJECT'],
  optionalPositionals: 2,
} as const;

const HEX_KEY = /^[0-9a-fA-F]{64}$/;

/**
 * Which of token, public key and project the positional arguments are: all three (the spec's
 * form), or the project alone, or two of them told apart by the public key's shape.
 */
function enrollArguments(positionals: readonly string[]): [string | undefined, string | undefined, string] {
  const [a, b, c] = positionals as [string, string?, string?];
  if (c !== undefined && b !== undefined) return [a, b, c];
  if (b === undefined) return [undefined, undefined, a];
  return HEX_KEY.test(a) ? [undefined, a, b] : [a, undefined, b];
}

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
    const [tokenArg, keyArg, dir] = enrollArguments(args.positionals);
    if (keyArg !== undefined && args.values.key !== undefined) {
      throw new UsageError(`${spec.name}: give the public key either as <ED25519_PUBLIC_KEY_HEX> or as --key FILE, not both`);
    }
    const publicKey = keyArg ?? readDeviceKey(args.values.key ?? defaultDeviceKeyPath(process.env)).publicKeyHex;
    const bootstrapToken = await readSecret(tokenArg, {
      what: 'bootstrap token',
      command: spec.name,
      dashForm: '`-` in place of <BOOTSTRAP_TOKEN>',
    });
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
        printLine(`next: \`svc serve ${shellQuote(dir)}\`, then \`svc auth login\` with this device's key`);
      }
      return 0;
    });
  },
};

import { resolve } from 'node:path';
import { defaultDeviceKeyPath } from '@svc/client';
import { parseCommandArgs } from '../args.js';
import type { Command } from '../command.js';
import { readDeviceKey } from '../device-key-file.js';
import { printJson, printLine } from '../output.js';

const spec = {
  name: 'svc auth pubkey',
  summary: 'Print the public key hex of an Ed25519 device key file.',
  usage: 'svc auth pubkey [--key FILE] [--json]',
  help: [
    '--key FILE            an Ed25519 private key (PKCS#8 PEM, e.g. from `openssl genpkey -algorithm ed25519`;',
    '                      default: $SVC_DEVICE_KEY, else ~/.config/svc/device.pem)',
    '--json                print {"key_file","public_key"}',
  ],
  options: { key: { type: 'string' }, json: { type: 'boolean' } },
  positionals: [],
} as const;

/**
 * `svc auth pubkey --key FILE`: the 64-hex-digit public key to enroll.
 *
 * @example
 * await authPubkey.run(['--key', 'device.pem']);
 */
export const authPubkey: Command = {
  path: ['auth', 'pubkey'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const keyFile = args.values.key ?? defaultDeviceKeyPath(process.env);
    const publicKey = readDeviceKey(keyFile).publicKeyHex;
    if (args.values.json === true) printJson({ key_file: resolve(keyFile), public_key: publicKey });
    else printLine(publicKey);
    return 0;
  },
};

import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { defaultDeviceKeyPath, generateDeviceKey } from '@svc/client';
import { mkdirOwnerOnly, writeSecretFile } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { CliError } from '../cli-error.js';
import type { Command } from '../command.js';
import { printJson, printLine } from '../output.js';

const spec = {
  name: 'svc auth keygen',
  summary: 'Generate an Ed25519 device key (PKCS#8 PEM, owner-only) and print its public key hex.',
  usage: 'svc auth keygen [--out FILE] [--force] [--json]',
  help: [
    '--out FILE            where to write the private key (default: $SVC_DEVICE_KEY, else',
    '                      ~/.config/svc/device.pem; its folder is made owner-only)',
    '--force               replace an existing file',
    '--json                print {"key_file","public_key"}',
  ],
  options: { out: { type: 'string' }, force: { type: 'boolean' }, json: { type: 'boolean' } },
  positionals: [],
} as const;

/**
 * `svc auth keygen`: a new device key, written owner-only; refuses to overwrite without --force.
 *
 * @example
 * await authKeygen.run(['--out', 'admin.pem']);
 */
export const authKeygen: Command = {
  path: ['auth', 'keygen'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const out = resolve(args.values.out ?? defaultDeviceKeyPath(process.env));
    if (args.values.out === undefined) mkdirOwnerOnly(dirname(out));
    if (existsSync(out) && args.values.force !== true) {
      throw new CliError(`${out} already exists; pass --force to replace it (the old key is lost) or choose another --out`);
    }
    const { pem, key } = generateDeviceKey();
    writeSecretFile(out, pem, { overwrite: args.values.force === true });
    if (args.values.json === true) printJson({ key_file: out, public_key: key.publicKeyHex });
    else {
      printLine(key.publicKeyHex);
      process.stderr.write(`wrote the private key to ${out} (owner-only)\n`);
    }
    return 0;
  },
};

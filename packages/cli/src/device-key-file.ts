import { type DeviceKey, defaultDeviceKeyPath, loadDeviceKey } from '@svc/client';
import { CliError } from './cli-error.js';
import { shellQuote } from './output.js';

/**
 * Loads a device key file given with `--key`, as one clear error when it is missing or not an
 * Ed25519 PKCS#8 PEM.
 *
 * @example
 * const key = readDeviceKey(args.values.key);
 */
export function readDeviceKey(path: string): DeviceKey {
  try {
    return loadDeviceKey(path);
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    if (e.code === 'ENOENT') {
      const make = path === defaultDeviceKeyPath(process.env) ? 'svc auth keygen' : `svc auth keygen --out ${shellQuote(path)}`;
      throw new CliError(`no key file at ${path}; create one with \`${make}\``);
    }
    throw new CliError(
      `cannot use ${path} as a device key: ${e.message}; expected an Ed25519 PKCS#8 PEM (svc auth keygen, openssl genpkey -algorithm ed25519)`,
    );
  }
}

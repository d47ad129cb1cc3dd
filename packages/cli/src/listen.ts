import { resolveManagementListen } from '@svc/server';
import { CliError, UsageError } from './cli-error.js';

/**
 * The management listen address: `--listen` beats `SVC_MANAGEMENT_LISTEN`, which beats
 * `127.0.0.1:9090`; `'off'` when disabled. A refused address (wildcard, non-loopback, a host
 * name other than localhost) is an error before anything binds: exit 2 when it came from the
 * flag, 1 when from the environment.
 *
 * @example
 * const listen = managementListen(args.values.listen, 'svc auth serve');
 */
export function managementListen(flag: string | undefined, command: string): { host: string; port: number } | 'off' {
  try {
    return resolveManagementListen({ flag, env: process.env.SVC_MANAGEMENT_LISTEN });
  } catch (error) {
    if ((error as Error).name !== 'ListenAddressError') throw error;
    const message = `${command}: refusing to listen: ${(error as Error).message}`;
    if (flag !== undefined) throw new UsageError(message);
    throw new CliError(`${message} (from SVC_MANAGEMENT_LISTEN)`);
  }
}

import { errorCodeOf } from '@svc/core';
import { resolveManagementListen } from '@svc/server';
import { CliError, UsageError } from './cli-error.js';

/**
 * The CLI's error for a listen address the server refused (`listen_address_refused`): a usage
 * error (exit 2) when the address came from the flag, else a failure (exit 1) whose message
 * ends with `fromElsewhere`. Any other error is returned as is.
 *
 * @example
 * catch (error) { throw listenRefusal(error, 'svc node serve', flag !== undefined); }
 */
export function listenRefusal(error: unknown, command: string, fromFlag: boolean, fromElsewhere = ''): unknown {
  if (errorCodeOf(error) !== 'listen_address_refused') return error;
  const message = `${command}: refusing to listen: ${(error as Error).message}`;
  return fromFlag ? new UsageError(message) : new CliError(`${message}${fromElsewhere}`, { code: 'listen_address_refused', exitCode: 1 });
}

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
    throw listenRefusal(error, command, flag !== undefined, ' (from SVC_MANAGEMENT_LISTEN)');
  }
}

import { ListenRefusedError } from '@svc/runtime/errors';
import { CliError, UsageError } from './cli-error.js';

/**
 * The CLI's error for a listen address the runtime refused (`listen_address_refused`): a usage
 * error (exit 2) when the address came from the command's flag, else a failure (exit 1) naming
 * where it came from. Any other error is returned as is.
 *
 * @example
 * catch (error) { throw listenRefusal(error, 'svc node serve'); }
 */
export function listenRefusal(error: unknown, command: string): unknown {
  if (!(error instanceof ListenRefusedError)) return error;
  const message = `${command}: refusing to listen: ${error.message}`;
  if (error.given) return new UsageError(message);
  // The management API has no project.edn key: an address that was not the flag's came from the variable.
  const from = error.listener === 'management' ? ' (from SVC_MANAGEMENT_LISTEN)' : '';
  return new CliError(`${message}${from}`, { code: 'listen_address_refused', exitCode: 1 });
}

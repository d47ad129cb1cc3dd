import { isIdOfKind } from '@svc/core';
import { UsageError } from './cli-error.js';

/**
 * The `<SUBJECT>` of a user command: a subject id, or a usage error (exit 2), so that an
 * `invalid_request` the API answers later is about the request, not the argument.
 *
 * @example
 * const subject = subjectArgument(spec.name, args.positionals[0]);
 */
export function subjectArgument(command: string, value: string | undefined): string {
  if (value === undefined || !isIdOfKind(value, 'subject')) {
    throw new UsageError(`${command}: <SUBJECT> must be a subject id (sub_..., see \`svc auth users\`)`);
  }
  return value;
}

/**
 * The groups of `--groups a,b`: comma-separated names, blanks around them ignored; an empty
 * value is no group at all (the API checks each name).
 *
 * @example
 * groupsOption('ops, dev'); // ['ops', 'dev']
 */
export function groupsOption(value: string): string[] {
  return value
    .split(',')
    .map((g) => g.trim())
    .filter((g) => g !== '');
}

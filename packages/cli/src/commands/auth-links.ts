import { isIdOfKind, isRealm, listLinks } from '@svc/core';
import { withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printLinks } from '../operator-output.js';

const spec = {
  name: 'svc auth links',
  summary: 'List the live links (passkeys, OIDC logins) of the subjects, offline on a project.',
  usage: 'svc auth links <PROJECT> [--realm management|application] [--subject SUBJECT] [--json]',
  help: [
    '<PROJECT>             the project directory',
    '--realm REALM         only links of that realm',
    '--subject SUBJECT     only links of that subject (sub_...)',
    '--json                print {"links": [Link]}',
    PROJECT_HELP,
  ],
  options: { realm: { type: 'string' }, subject: { type: 'string' }, json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc auth links <PROJECT>`: the live links, oldest first, from the project's store, as the
 * operator (core `listLinks` with no principal). The credential's own data is never listed.
 *
 * @example
 * await authLinks.run(['./demo', '--realm', 'application', '--json']);
 */
export const authLinks: Command = {
  path: ['auth', 'links'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const { realm, subject } = args.values;
    if (realm !== undefined && !isRealm(realm)) throw new UsageError(`${spec.name}: --realm must be management or application`);
    if (subject !== undefined && !isIdOfKind(subject, 'subject'))
      throw new UsageError(`${spec.name}: --subject must be a subject id (sub_...)`);
    const [dir] = args.positionals as [string];
    const links = await withProject(dir, args.values.profile, ({ deps }) => listLinks(deps, { principal: null, realm, subject }));
    printLinks(links, args.values.json === true);
    return 0;
  },
};

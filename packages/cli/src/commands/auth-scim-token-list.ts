import { listScimTokens, type ScimTokenJson } from '@svc/core';
import { withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { checkMode, SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printJson, printLine, printTable } from '../output.js';

const spec = {
  name: 'svc auth scim token list',
  summary: 'List the SCIM tokens (never the tokens themselves), revoked ones included.',
  usage: 'svc auth scim token list [<PROJECT>] [--json]',
  help: [
    '<PROJECT>             the project directory (offline); without it, the management API with the saved session',
    '--json                print {"tokens": [{"id","name","created_at","last_used_at","revoked_at"}]}',
    PROJECT_HELP,
    ...SESSION_HELP,
  ],
  options: { ...SESSION_OPTIONS, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
  optionalPositionals: 1,
} as const;

/**
 * `svc auth scim token list [<PROJECT>]`: the SCIM tokens, oldest first, from the project's
 * store or from `GET /v1/auth/scim-tokens`.
 *
 * @example
 * await authScimTokenList.run(['./demo', '--json']);
 */
export const authScimTokenList: Command = {
  path: ['auth', 'scim', 'token', 'list'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir] = args.positionals as [string | undefined];
    checkMode(spec.name, dir, args.values);
    const tokens: readonly ScimTokenJson[] =
      dir === undefined
        ? (await viaApi(args.values, 'listing SCIM tokens failed', (api, token) => api.scimTokens(token))).tokens
        : await withProject(dir, args.values.profile, ({ deps }) => listScimTokens(deps));
    if (args.values.json === true) printJson({ tokens });
    else if (tokens.length === 0) printLine('no SCIM tokens; create one with `svc auth scim token create --name NAME`');
    else
      printTable(
        ['ID', 'NAME', 'CREATED', 'LAST USED', 'REVOKED'],
        tokens.map((t) => [t.id, t.name, t.created_at, t.last_used_at ?? '-', t.revoked_at ?? '-']),
      );
    return 0;
  },
};

import { createScimToken, type ScimTokenCreatedJson } from '@svc/core';
import { withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { explainFailure } from '../errors-map.js';
import { checkMode, SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printJson, printLine, printText } from '../output.js';

const spec = {
  name: 'svc auth scim token create',
  summary: "Create a SCIM token for a company directory's provisioning (printed once; only its digest is kept).",
  usage: 'svc auth scim token create --name NAME [<PROJECT>] [--json]',
  help: [
    '--name NAME           what the token is for (e.g. the directory: entra, okta)',
    '<PROJECT>             the project directory (offline); without it, the management API with the saved session',
    '--json                print {"id","name","token","created_at"}',
    PROJECT_HELP,
    ...SESSION_HELP,
  ],
  options: { name: { type: 'string' }, ...SESSION_OPTIONS, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
  optionalPositionals: 1,
} as const;

/**
 * `svc auth scim token create --name NAME [<PROJECT>]`: core `createScimToken` as the operator,
 * or `POST /v1/auth/scim-tokens` as the signed-in management device. The token is printed this
 * once, on stdout; the directory's admin pastes it with the base URL `https://<gateway>/.svc/scim/v2`.
 *
 * @example
 * await authScimTokenCreate.run(['--name', 'entra', './demo']);
 */
export const authScimTokenCreate: Command = {
  path: ['auth', 'scim', 'token', 'create'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const name = args.values.name;
    if (name === undefined) throw new UsageError(`${spec.name}: --name NAME is required (what the token is for, e.g. entra)`);
    const [dir] = args.positionals as [string | undefined];
    checkMode(spec.name, dir, args.values);
    const what = 'creating the SCIM token failed';
    const created: ScimTokenCreatedJson =
      dir === undefined
        ? await viaApi(args.values, what, (api, token) => api.createScimToken(token, name))
        : await withProject(dir, args.values.profile, async ({ deps }) => {
            try {
              return await createScimToken(deps, { name, actor: { via: 'cli', subject: null, session: null } });
            } catch (error) {
              throw explainFailure(what, error);
            }
          });
    if (args.values.json === true) printJson(created);
    else {
      printText(`created SCIM token ${created.id} (${created.name}); it is shown this once:`);
      printLine(created.token);
      printText('give it to the directory as its bearer token, with the base URL https://<gateway>/.svc/scim/v2');
    }
    return 0;
  },
};

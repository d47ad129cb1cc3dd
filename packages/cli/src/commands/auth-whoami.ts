import { parseCommandArgs } from '../args.js';
import type { Command } from '../command.js';
import { CREDENTIALS_HELP, CREDENTIALS_OPTIONS, savedSession } from '../credentials.js';
import { explainFailure } from '../errors-map.js';
import { printJson, printLine } from '../output.js';

const spec = {
  name: 'svc auth whoami',
  summary: 'Show the principal of the saved session (refreshing the token pair when needed).',
  usage: 'svc auth whoami [--credentials FILE] [--json]',
  help: [...CREDENTIALS_HELP],
  options: { ...CREDENTIALS_OPTIONS },
  positionals: [],
} as const;

/**
 * `svc auth whoami`: `GET /v1/auth/me` with the saved access token; when it is expired or
 * refused, refreshes once, saves the new pair and retries once.
 *
 * @example
 * await authWhoami.run(['--json']);
 */
export const authWhoami: Command = {
  path: ['auth', 'whoami'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const session = savedSession(args.values.credentials);
    let me: Awaited<ReturnType<typeof session.client.me>>;
    try {
      me = await session.withAccessToken((token) => session.client.me(token));
    } catch (error) {
      throw explainFailure('whoami failed', error);
    }
    if (args.values.json === true) printJson(me);
    else {
      printLine(`subject: ${me.subject}`);
      printLine(`realm:   ${me.realm}`);
      printLine(`session: ${me.session}`);
      printLine(`device:  ${me.device}`);
      printLine(`claims:  amr=${me.claims.amr.join(',')} auth_time=${me.claims.auth_time} exp=${me.claims.exp}`);
    }
    return 0;
  },
};

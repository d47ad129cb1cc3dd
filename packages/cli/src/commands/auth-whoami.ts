import { parseCommandArgs } from '../args.js';
import type { Command } from '../command.js';
import { explainFailure } from '../errors-map.js';
import { DEVICE_SESSION_HELP, openSavedDeviceSession, SESSION_OPTIONS } from '../operator-api.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc auth whoami',
  summary: 'Show the principal of the saved session (refreshing the token pair when needed).',
  usage: 'svc auth whoami [--context NAME] [--credentials FILE] [--url URL] [--json]',
  help: [...DEVICE_SESSION_HELP, '--json                print the principal as JSON'],
  options: { ...SESSION_OPTIONS },
  positionals: [],
} as const;

/**
 * `svc auth whoami`: `GET /v1/auth/me` (management) or `GET /.svc/auth/v1/me` (application
 * gateway), by the saved session's realm, with the saved access token; when it is expired or
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
    const session = openSavedDeviceSession(args.values);
    let me: Awaited<ReturnType<typeof session.client.me>>;
    try {
      me = await session.withAccessToken((token) => session.client.me(token));
    } catch (error) {
      throw explainFailure('whoami failed', error);
    }
    if (args.values.json === true) printJson(me);
    else {
      printText(`subject: ${me.subject}`);
      printText(`realm:   ${me.realm}`);
      printText(`session: ${me.session}`);
      printText(`device:  ${me.device}`);
      printText(`claims:  amr=${me.claims.amr.join(',')} auth_time=${me.claims.auth_time} exp=${me.claims.exp}`);
    }
    return 0;
  },
};

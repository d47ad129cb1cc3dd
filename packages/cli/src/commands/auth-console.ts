import { parseCommandArgs } from '../args.js';
import type { Command } from '../command.js';
import { SESSION_HELP, SESSION_OPTIONS, viaApi } from '../operator-api.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc auth console',
  summary: 'Print a one-time URL (single use, 60 s, loopback) that signs a browser on this machine in to the management console.',
  usage: 'svc auth console [PROJECT] [--context NAME] [--credentials FILE] [--url URL] [--json]',
  help: [
    '[PROJECT]             accepted for the documented form; the link comes from the management API of the saved',
    '                      session (`svc auth login`), chosen with --context or --url',
    '--json                print {"url", "expires_at", "expires_in"}',
    ...SESSION_HELP,
  ],
  options: { ...SESSION_OPTIONS },
  positionals: ['PROJECT'],
  optionalPositionals: 1,
} as const;

/**
 * `svc auth console`: `POST /v1/auth/console-links` with the saved management session, then
 * prints the one-time URL. The URL signs in whoever opens it first, within 60 s: it goes to
 * stdout (never to a log), for the operator to open on this machine.
 *
 * @example
 * await authConsole.run(['--json']);
 */
export const authConsole: Command = {
  path: ['auth', 'console'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const link = await viaApi(args.values, 'minting a console link failed', (api, token) => api.consoleLink(token));
    if (args.values.json === true) printJson(link);
    else {
      printText(`Open this URL in a browser on this machine (it works once, within ${link.expires_in} s):`);
      printText(link.url);
    }
    return 0;
  },
};

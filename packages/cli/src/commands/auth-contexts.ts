import { parseCommandArgs } from '../args.js';
import { CliError } from '../cli-error.js';
import type { Command } from '../command.js';
import { credentialStore } from '../credentials.js';
import { printJson, printTable, printText } from '../output.js';

const spec = {
  name: 'svc auth contexts',
  summary: 'List the saved sign-ins (one context per service URL and realm) and which one is current.',
  usage: 'svc auth contexts [--credentials FILE] [--json]',
  help: [
    '--credentials FILE    the credentials file (default: $SVC_CREDENTIALS, else ~/.config/svc/credentials.json)',
    '--json                print {"credentials","contexts":[{"name","current","realm","url","session_id","refresh_expires_at"}]}',
    '',
    '`svc auth login` saves each sign-in as a context (`--context NAME`, else <realm>@<host:port>) and makes it',
    'current; `svc auth contexts use NAME` switches; any command that uses a saved session takes --context NAME.',
  ],
  options: { credentials: { type: 'string' }, json: { type: 'boolean' } },
  positionals: [],
} as const;

/**
 * `svc auth contexts`: the contexts of the credentials file, the current one marked. Never
 * prints a token.
 *
 * @example
 * await authContexts.run(['--json']);
 */
export const authContexts: Command = {
  path: ['auth', 'contexts'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    // The listing is of the whole file: SVC_CONTEXT chooses nothing here.
    const store = credentialStore(args.values.credentials, undefined);
    let contexts: ReturnType<typeof store.contexts>;
    try {
      contexts = store.contexts();
    } catch (error) {
      throw new CliError((error as Error).message, { cause: error });
    }
    if (args.values.json === true) {
      printJson({
        credentials: store.path,
        contexts: contexts.map((c) => ({
          name: c.name,
          current: c.current,
          realm: c.credentials.realm,
          url: c.credentials.url,
          session_id: c.credentials.session_id,
          refresh_expires_at: c.credentials.refresh_expires_at,
        })),
      });
      return 0;
    }
    if (contexts.length === 0) {
      printText(`no saved sign-ins in ${store.path}; run \`svc auth login --key FILE\``);
      return 0;
    }
    printTable(
      ['CURRENT', 'NAME', 'REALM', 'URL', 'SESSION'],
      contexts.map((c) => [c.current ? '*' : '', c.name, c.credentials.realm, c.credentials.url, c.credentials.session_id]),
    );
    return 0;
  },
};

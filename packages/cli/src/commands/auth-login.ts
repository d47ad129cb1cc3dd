import { createManagementClient, credentialsFromTokenPair, defaultDeviceKeyPath, login } from '@svc/client';
import { parseCommandArgs } from '../args.js';
import type { Command } from '../command.js';
import { CREDENTIALS_HELP, CREDENTIALS_OPTIONS, credentialStore, defaultManagementUrl } from '../credentials.js';
import { readDeviceKey } from '../device-key-file.js';
import { explainFailure } from '../errors-map.js';
import { printJson, printLine } from '../output.js';
import { CLI_USER_AGENT } from '../version.js';

const spec = {
  name: 'svc auth login',
  summary: 'Sign in with an enrolled device key (challenge, signature, session) and save the credentials.',
  usage: 'svc auth login [--key FILE] [--url URL] [--credentials FILE] [--json]',
  help: [
    '--key FILE            the enrolled Ed25519 device key (PKCS#8 PEM; default: $SVC_DEVICE_KEY,',
    '                      else ~/.config/svc/device.pem)',
    '--url URL             the management API (default: $SVC_MANAGEMENT_URL, else http://127.0.0.1:9090)',
    ...CREDENTIALS_HELP,
  ],
  options: { key: { type: 'string' }, url: { type: 'string' }, ...CREDENTIALS_OPTIONS },
  positionals: [],
} as const;

/**
 * `svc auth login --key FILE`: signs the device in and saves url, tokens, expiries and session
 * id (file 0600, written atomically). Tokens are never printed.
 *
 * @example
 * await authLogin.run(['--key', 'device.pem', '--url', 'http://127.0.0.1:9090']);
 */
export const authLogin: Command = {
  path: ['auth', 'login'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const key = readDeviceKey(args.values.key ?? defaultDeviceKeyPath(process.env));
    const client = createManagementClient({ baseUrl: args.values.url ?? defaultManagementUrl(), userAgent: CLI_USER_AGENT });
    const store = credentialStore(args.values.credentials);
    let pair: Awaited<ReturnType<typeof login>>;
    try {
      pair = await login(client, key);
    } catch (error) {
      throw explainFailure('sign-in refused', error);
    }
    const creds = credentialsFromTokenPair(client.baseUrl, pair, Date.now(), key.publicKeyHex);
    store.save(creds);
    if (args.values.json === true) {
      printJson({
        session_id: creds.session_id,
        realm: creds.realm,
        access_expires_at: creds.access_expires_at,
        refresh_expires_at: creds.refresh_expires_at,
        credentials: store.path,
      });
    } else {
      printLine(`signed in to ${client.baseUrl}: session ${creds.session_id} (${creds.realm} realm)`);
      printLine(`credentials saved to ${store.path}`);
    }
    return 0;
  },
};

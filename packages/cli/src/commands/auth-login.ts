import { resolve } from 'node:path';
import { contextNameFor, createSignInClient, credentialsFromTokenPair, defaultDeviceKeyPath, login } from '@svc/client';
import { isRealm } from '@svc/core';
import { parseCommandArgs } from '../args.js';
import { CliError, UsageError } from '../cli-error.js';
import type { Command } from '../command.js';
import { CREDENTIALS_HELP, CREDENTIALS_OPTIONS, credentialStore, defaultApplicationUrl, defaultManagementUrl } from '../credentials.js';
import { readDeviceKey } from '../device-key-file.js';
import { explainFailure } from '../errors-map.js';
import { printJson, printLine, printText } from '../output.js';
import { CLI_USER_AGENT } from '../version.js';

const spec = {
  name: 'svc auth login',
  summary: 'Sign in with an enrolled device key (challenge, signature, session) and save the credentials.',
  usage: 'svc auth login [--key FILE] [--realm management|application] [--url URL] [--context NAME] [--credentials FILE] [--json]',
  help: [
    '--key FILE            the enrolled Ed25519 device key (PKCS#8 PEM; default: $SVC_DEVICE_KEY,',
    '                      else ~/.config/svc/device.pem)',
    '--realm REALM         management (default: the management API) or application (an application gateway)',
    '--url URL             the management API (default: $SVC_MANAGEMENT_URL, else http://127.0.0.1:9090), or with',
    '                      --realm application the gateway (default: $SVC_APP_URL, else http://127.0.0.1:8080);',
    '                      tokens only cross https://, or http:// to a loopback address',
    '--context NAME        the name to save this sign-in as (default: <realm>@<host:port>, e.g. management@127.0.0.1:9090);',
    '                      it becomes the current context, and the other saved sign-ins stay as they are',
    ...CREDENTIALS_HELP.filter((line) => !line.startsWith('--context')),
  ],
  options: { key: { type: 'string' }, realm: { type: 'string' }, url: { type: 'string' }, ...CREDENTIALS_OPTIONS },
  positionals: [],
} as const;

/**
 * `svc auth login --key FILE`: signs the device in and saves url, realm, tokens, expiries and
 * session id (file 0600, written atomically). Tokens are never printed. With
 * `--realm application` it signs in on an application gateway (`/.svc/auth/v1/...`), with the
 * same client calls under the application prefix.
 *
 * @example
 * await authLogin.run(['--key', 'device.pem', '--url', 'http://127.0.0.1:9090']);
 * await authLogin.run(['--realm', 'application', '--url', 'https://app.example', '--key', 'device.pem']);
 */
export const authLogin: Command = {
  path: ['auth', 'login'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const realm = args.values.realm ?? 'management';
    if (!isRealm(realm)) throw new UsageError(`${spec.name}: --realm must be management or application`);
    const keyPath = resolve(args.values.key ?? defaultDeviceKeyPath(process.env));
    const key = readDeviceKey(keyPath);
    const baseUrl = args.values.url ?? (realm === 'management' ? defaultManagementUrl() : defaultApplicationUrl());
    const client = createSignInClient({ baseUrl, realm, userAgent: CLI_USER_AGENT });
    // Validated before signing in: a bad --context must not cost a session.
    const file = credentialStore(args.values.credentials, args.values.context);
    let pair: Awaited<ReturnType<typeof login>>;
    try {
      pair = await login(client, key);
    } catch (error) {
      throw explainFailure('sign-in refused', error);
    }
    if (pair.realm !== realm) {
      throw new CliError(
        `sign-in refused: ${client.baseUrl} answered with a ${pair.realm}-realm session where ${realm} was asked for; nothing was saved`,
      );
    }
    // The key's file (never the key) is saved too: a session bound to the key (DPoP) signs each refresh with it.
    const creds = credentialsFromTokenPair(client.baseUrl, pair, Date.now(), key.publicKeyHex, keyPath);
    // One context per service and realm: signing in to an application keeps the admin's sign-in.
    const context = file.context ?? contextNameFor(creds);
    const store = file.select(context);
    store.save(creds);
    store.use(context);
    if (args.values.json === true) {
      printJson({
        session_id: creds.session_id,
        realm: creds.realm,
        access_expires_at: creds.access_expires_at,
        refresh_expires_at: creds.refresh_expires_at,
        credentials: store.path,
        context,
      });
    } else {
      printLine(`signed in to ${client.baseUrl}: session ${creds.session_id} (${creds.realm} realm)`);
      printText(`credentials saved to ${store.path} as context ${context} (now current)`);
    }
    return 0;
  },
};

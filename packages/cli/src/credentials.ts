import {
  type CredentialStore,
  createCredentialStore,
  defaultCredentialsPath,
  type ManagementSession,
  openManagementSession,
} from '@svc/client';
import { CliError } from './cli-error.js';

/** Options of the device-side commands that use saved credentials. */
export const CREDENTIALS_OPTIONS = { credentials: { type: 'string' }, json: { type: 'boolean' } } as const;

/** Help lines of {@link CREDENTIALS_OPTIONS}. */
export const CREDENTIALS_HELP = [
  '--credentials FILE    the credentials file (default: $SVC_CREDENTIALS, else ~/.config/svc/credentials.json)',
  '--json                print JSON',
];

/** The default management URL: `$SVC_MANAGEMENT_URL`, else `http://127.0.0.1:9090`. */
export function defaultManagementUrl(): string {
  const fromEnv = process.env.SVC_MANAGEMENT_URL;
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv : 'http://127.0.0.1:9090';
}

/** The default application gateway URL of `svc auth login --realm application`: `$SVC_APP_URL`, else `http://127.0.0.1:8080`. */
export function defaultApplicationUrl(): string {
  const fromEnv = process.env.SVC_APP_URL;
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv : 'http://127.0.0.1:8080';
}

/**
 * The credentials file chosen by `--credentials`, `$SVC_CREDENTIALS` or the default.
 *
 * @example
 * const store = credentialStore(args.values.credentials);
 */
export function credentialStore(flag: string | undefined): CredentialStore {
  return createCredentialStore(flag !== undefined && flag !== '' ? flag : defaultCredentialsPath(process.env));
}

/**
 * The saved session, as one clear error when nobody is signed in or the file is damaged.
 *
 * @example
 * const session = savedSession(args.values.credentials);
 */
export function savedSession(flag: string | undefined): ManagementSession {
  try {
    return openManagementSession({ store: credentialStore(flag) });
  } catch (error) {
    throw new CliError((error as Error).message, { cause: error });
  }
}

import {
  type CredentialStore,
  createCredentialStore,
  defaultCredentialsPath,
  isContextName,
  type ManagementSession,
  openManagementSession,
} from '@svc/client';
import { CliError, UsageError } from './cli-error.js';

/** Options of the device-side commands that use saved credentials. */
export const CREDENTIALS_OPTIONS = { credentials: { type: 'string' }, context: { type: 'string' }, json: { type: 'boolean' } } as const;

/** The help line of `--context`. */
export const CONTEXT_HELP =
  '--context NAME        which saved sign-in of the credentials file (default: $SVC_CONTEXT, else the current one; `svc auth contexts`)';

/** Help lines of {@link CREDENTIALS_OPTIONS}. */
export const CREDENTIALS_HELP = [
  '--credentials FILE    the credentials file (default: $SVC_CREDENTIALS, else ~/.config/svc/credentials.json)',
  CONTEXT_HELP,
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
export function credentialStore(flag: string | undefined, contextFlag?: string): CredentialStore {
  const path = flag !== undefined && flag !== '' ? flag : defaultCredentialsPath(process.env);
  const fromEnv = process.env.SVC_CONTEXT;
  const context = contextFlag !== undefined && contextFlag !== '' ? contextFlag : fromEnv !== undefined && fromEnv !== '' ? fromEnv : null;
  if (context !== null && !isContextName(context)) {
    throw new UsageError(
      `${JSON.stringify(context)} is not a context name (letters, digits and . _ @ : + -, starting with a letter or digit); \`svc auth contexts\` lists them`,
    );
  }
  return createCredentialStore(path, { context });
}

/**
 * The saved session, as one clear error when nobody is signed in or the file is damaged.
 *
 * @example
 * const session = savedSession(args.values.credentials);
 */
export function savedSession(flag: string | undefined, contextFlag?: string): ManagementSession {
  const store = credentialStore(flag, contextFlag);
  try {
    return openManagementSession({ store });
  } catch (error) {
    throw new CliError((error as Error).message, { cause: error });
  }
}

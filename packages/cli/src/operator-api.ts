import {
  ApiUnreachableError,
  type DeviceSession,
  type ManagementClient,
  type ManagementSession,
  openManagementSession,
  openSession,
  type SignInClient,
} from '@svc/client';
import { CliError, EXIT, UsageError } from './cli-error.js';
import { CONTEXT_HELP, credentialStore } from './credentials.js';
import { explainFailure } from './errors-map.js';

/** Options of the commands that use the saved session: which credentials, which API, JSON. */
export const SESSION_OPTIONS = {
  credentials: { type: 'string' },
  context: { type: 'string' },
  url: { type: 'string' },
  json: { type: 'boolean' },
} as const;

/** Help lines of {@link SESSION_OPTIONS} (without `--json`, which each command describes). */
export const SESSION_HELP = [
  '--credentials FILE    the credentials file (default: $SVC_CREDENTIALS, else ~/.config/svc/credentials.json)',
  CONTEXT_HELP,
  '--url URL             the management API (default: the URL saved by `svc auth login`)',
];

/** Help lines of the commands that work in either realm (whoami, refresh, logout): `--url` is the saved session's API. */
export const DEVICE_SESSION_HELP = [
  '--credentials FILE    the credentials file (default: $SVC_CREDENTIALS, else ~/.config/svc/credentials.json)',
  CONTEXT_HELP,
  '--url URL             the management API or application gateway of the saved session (default: the URL saved by',
  '                      `svc auth login`); the routes are those of the realm it signed in to',
];

/**
 * The saved session in whichever realm it signed in to (management API or application
 * gateway), talking to `--url` when given, else to the URL saved at login. Nobody signed in,
 * or a damaged file, is one clear line (exit 1).
 *
 * @example
 * const session = openSavedDeviceSession(args.values);
 * const me = await session.withAccessToken((t) => session.client.me(t));
 */
export function openSavedDeviceSession(values: {
  readonly credentials?: string;
  readonly context?: string;
  readonly url?: string;
}): DeviceSession {
  const store = credentialStore(values.credentials, values.context);
  try {
    return openSession({ store, ...(values.url === undefined || values.url === '' ? {} : { baseUrl: values.url }) });
  } catch (error) {
    throw new CliError((error as Error).message, { cause: error });
  }
}

/**
 * The saved management session, talking to `--url` when given, else to the URL saved at login. Nobody
 * signed in, or a damaged file, is one clear line (exit 1); `hint` says what else to do.
 *
 * @example
 * const session = openSavedSession(args.values);
 */
export function openSavedSession(
  values: { readonly credentials?: string; readonly context?: string; readonly url?: string },
  hint = '',
): ManagementSession {
  const store = credentialStore(values.credentials, values.context);
  try {
    return openManagementSession({ store, ...(values.url === undefined || values.url === '' ? {} : { baseUrl: values.url }) });
  } catch (error) {
    throw new CliError(`${(error as Error).message}${hint}`, { cause: error });
  }
}

/** What a listing command says when it has neither a `<PROJECT>` nor a saved session. */
const NO_TARGET_HINT = '; or give the <PROJECT> directory to work offline on the project';

/**
 * Runs `fn` against the management API with the saved session's access token (refreshed once
 * when expired or refused), turning any refusal into one clear line that starts with `what`.
 *
 * @example
 * const { devices } = await viaApi(args.values, 'listing devices failed', (api, token) => api.devices(token));
 */
export async function viaApi<T>(
  values: { readonly credentials?: string; readonly context?: string; readonly url?: string },
  what: string,
  fn: (api: ManagementClient, accessToken: string) => Promise<T>,
  options: Parameters<typeof explainFailure>[2] = {},
): Promise<T> {
  const session = openSavedSession(values, NO_TARGET_HINT);
  try {
    return await session.withAccessToken((token) => fn(session.client, token));
  } catch (error) {
    const explained = explainFailure(what, error, options);
    if (error instanceof ApiUnreachableError && explained instanceof CliError && explained.exitCode === EXIT.failure) {
      throw new CliError(`${explained.message}${NO_TARGET_HINT}`, { cause: error });
    }
    throw explained;
  }
}

/**
 * Runs `fn` as the signed-in subject of the saved session in whichever realm it signed in to
 * (the management API, or the application gateway for an application sign-in): the
 * self-service calls (own sessions, own devices, sign out everywhere else), with the access
 * token refreshed once when expired or refused; any refusal is one clear line starting with `what`.
 *
 * @example
 * const { sessions } = await viaOwnSession(args.values, 'listing your sessions failed', (api, token) => api.ownSessions(token));
 */
export async function viaOwnSession<T>(
  values: { readonly credentials?: string; readonly context?: string; readonly url?: string },
  what: string,
  fn: (api: SignInClient, accessToken: string) => Promise<T>,
): Promise<T> {
  const session = openSavedDeviceSession(values);
  try {
    return await session.withAccessToken((token) => fn(session.client, token));
  } catch (error) {
    throw explainFailure(what, error);
  }
}

/**
 * Refuses options of the other mode: `--profile` needs a `<PROJECT>`; `--url` and
 * `--credentials` are for the API mode, without one.
 *
 * @example
 * checkMode('svc auth devices', dir, args.values);
 */
export function checkMode(
  command: string,
  dir: string | undefined,
  values: { readonly profile?: string; readonly credentials?: string; readonly context?: string; readonly url?: string },
): void {
  if (dir === undefined && values.profile !== undefined) {
    throw new UsageError(`${command}: --profile applies to a <PROJECT>; see \`${command} --help\``);
  }
  if (dir !== undefined && (values.url !== undefined || values.credentials !== undefined || values.context !== undefined)) {
    throw new UsageError(
      `${command}: --url, --credentials and --context are for the management API, without a <PROJECT>; see \`${command} --help\``,
    );
  }
}

import { isRealm, type RevokedJson } from '@svc/core';
import { ApiError } from './api-error.js';
import { type CredentialStore, type Credentials, credentialsFromTokenPair, defaultDeviceKeyPath } from './credential-store.js';
import { type DeviceKey, loadDeviceKey } from './device-key.js';
import {
  createApplicationClient,
  createManagementClient,
  type ManagementClient,
  type ManagementClientOptions,
  type SignInClient,
} from './management-client.js';

/**
 * A signed-in device's session, in the realm its credentials were saved with: calls with its
 * access token and keeps the saved credentials current.
 */
export interface DeviceSession<C extends SignInClient = SignInClient> {
  readonly client: C;
  /** The credentials as they are now (after any refresh). */
  credentials(): Credentials;
  /** Rotates the token pair with the refresh token and saves the new pair. */
  refresh(): Promise<Credentials>;
  /**
   * Runs `fn` with the access token. When the token is expired (by the saved expiry) or
   * refused with `invalid_token`, refreshes once and retries once.
   */
  withAccessToken<T>(fn: (accessToken: string) => Promise<T>): Promise<T>;
  /** Revokes this session on the server and deletes the saved credentials. */
  logout(): Promise<RevokedJson>;
  /**
   * How this session's access token is sent to other surfaces (the node client): its device key
   * and whether the token is bound to it (DPoP). Spread into `createNodeClient`'s options.
   */
  readonly dpop: Pick<ManagementClientOptions, 'dpopKey' | 'isBoundToken'>;
}

/** A signed-in management device's session: its client also has the operator's calls. */
export type ManagementSession = DeviceSession<ManagementClient>;

/** Options of {@link openManagementSession}. */
export interface ManagementSessionOptions {
  readonly store: CredentialStore;
  /** Overrides the URL saved with the credentials. */
  readonly baseUrl?: string;
  readonly fetch?: typeof fetch;
  /** Milliseconds since the epoch; defaults to `Date.now`. */
  readonly now?: () => number;
  /**
   * The device key that signs DPoP proofs for a session bound to it. Default: the key file saved
   * at login (`key_path`), else `$SVC_DEVICE_KEY` or `~/.config/svc/device.pem`, whichever holds
   * the key the session signed in with; none found, refreshes carry no proof (enough for a
   * bearer session).
   */
  readonly key?: DeviceKey;
}

/**
 * The device key of saved credentials, as {@link ManagementSessionOptions.key} says; null when
 * no readable key file holds the key they signed in with.
 */
function savedDeviceKey(creds: Credentials): DeviceKey | null {
  for (const file of [creds.key_path, defaultDeviceKeyPath()]) {
    if (file === undefined) continue;
    let key: DeviceKey;
    try {
      key = loadDeviceKey(file);
    } catch {
      continue;
    }
    if (creds.public_key === null || key.publicKeyHex === creds.public_key) return key;
  }
  return null;
}

/** Seconds before the saved expiry at which a token counts as expired (clock skew, latency). */
const EXPIRY_MARGIN_MS = 5_000;

/**
 * Opens the saved session of a signed-in device, in the realm it signed in to: the management
 * API's routes for a management session, the application gateway's (`/.svc/auth/v1`) for an
 * application one. Throws a `TypeError` when nobody is signed in or the realm is unknown.
 *
 * @example
 * const session = openSession({ store: createCredentialStore(defaultCredentialsPath()) });
 * const me = await session.withAccessToken((t) => session.client.me(t));
 */
export function openSession(options: ManagementSessionOptions): DeviceSession {
  const loaded = loadCredentials(options.store);
  if (loaded.realm === 'management') return openManagementSession(options);
  return openWith(options, loaded, (baseUrl, dpop) => createApplicationClient({ baseUrl, ...fetchOption(options), ...dpop }));
}

/**
 * Opens the saved session of a signed-in management device. Throws a `TypeError` when nobody
 * is signed in, or when the saved session is of the application realm (its token opens no
 * management route).
 *
 * @example
 * const session = openManagementSession({ store: createCredentialStore(defaultCredentialsPath()) });
 * const me = await session.withAccessToken((t) => session.client.me(t));
 */
export function openManagementSession(options: ManagementSessionOptions): ManagementSession {
  let store = options.store;
  let loaded = loadCredentials(store);
  if (loaded.realm !== 'management' && store.context === null) {
    // The current context is an application sign-in: a management command uses the file's
    // management context when there is exactly one, instead of failing.
    const management = store.contexts().filter((c) => c.credentials.realm === 'management');
    if (management.length === 1) {
      store = store.select((management[0] as { name: string }).name);
      loaded = loadCredentials(store);
    }
  }
  if (loaded.realm !== 'management') {
    throw new TypeError(
      `the credentials at ${store.path}${store.context === null ? '' : ` (context ${store.context})`} are of the ${loaded.realm} realm (${loaded.url}), not a management session; run \`svc auth login --key FILE\` against the management API, or choose a management context with --context NAME (\`svc auth contexts\` lists them)`,
    );
  }
  return openWith({ ...options, store }, loaded, (baseUrl, dpop) => createManagementClient({ baseUrl, ...fetchOption(options), ...dpop }));
}

function fetchOption(options: ManagementSessionOptions): { fetch?: typeof fetch } {
  return options.fetch === undefined ? {} : { fetch: options.fetch };
}

function loadCredentials(store: CredentialStore): Credentials {
  const loaded = store.load();
  if (loaded === null && store.context !== null) {
    throw new TypeError(`no context ${JSON.stringify(store.context)} in ${store.path}; \`svc auth contexts\` lists them`);
  }
  if (loaded === null && store.contexts().length > 1) {
    throw new TypeError(
      `${store.path} holds several contexts and none is current; choose one with --context NAME or \`svc auth contexts use NAME\``,
    );
  }
  if (loaded === null) throw new TypeError(`not signed in (no credentials at ${store.path}); run \`svc auth login --key FILE\``);
  if (!isRealm(loaded.realm))
    throw new TypeError(`${store.path} names an unknown realm ${JSON.stringify(loaded.realm)}; delete it and sign in again`);
  return loaded;
}

function openWith<C extends SignInClient>(
  options: ManagementSessionOptions,
  loaded: Credentials,
  makeClient: (baseUrl: string, dpop: Pick<ManagementClientOptions, 'dpopKey' | 'isBoundToken'>) => C,
): DeviceSession<C> {
  const now = options.now ?? Date.now;
  let current: Credentials = loaded;
  let key: DeviceKey | null | undefined = options.key;
  const deviceKey = (): DeviceKey | null => {
    if (key === undefined) key = savedDeviceKey(current);
    return key;
  };
  // A saved access token bound to the key (token_type DPoP) is sent with a proof by it.
  const dpop = Object.freeze({
    dpopKey: deviceKey,
    isBoundToken: (token: string) => current.token_type === 'DPoP' && token === current.access_token,
  });
  const client = makeClient(options.baseUrl ?? loaded.url, dpop);
  async function refresh(): Promise<Credentials> {
    deviceKey();
    const pair = await client.refresh(current.refresh_token, key ?? undefined);
    current = credentialsFromTokenPair(client.baseUrl, pair, now(), current.public_key, current.key_path);
    options.store.save(current);
    return current;
  }

  async function withAccessToken<T>(fn: (accessToken: string) => Promise<T>): Promise<T> {
    if (Date.parse(current.access_expires_at) - EXPIRY_MARGIN_MS <= now()) await refresh();
    try {
      return await fn(current.access_token);
    } catch (error) {
      if (!(error instanceof ApiError) || error.code !== 'invalid_token') throw error;
      await refresh();
      return fn(current.access_token);
    }
  }

  return Object.freeze({
    client,
    dpop,
    credentials: () => current,
    refresh,
    withAccessToken,
    async logout() {
      const result = await withAccessToken((token) => client.revoke(token));
      options.store.remove();
      return result;
    },
  });
}

import { isRealm, type RevokedJson } from '@svc/core';
import { ApiError } from './api-error.js';
import { type CredentialStore, type Credentials, credentialsFromTokenPair } from './credential-store.js';
import { createApplicationClient, createManagementClient, type ManagementClient, type SignInClient } from './management-client.js';

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
  return openWith(options, loaded, (baseUrl) => createApplicationClient({ baseUrl, ...fetchOption(options) }));
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
  return openWith({ ...options, store }, loaded, (baseUrl) => createManagementClient({ baseUrl, ...fetchOption(options) }));
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
  makeClient: (baseUrl: string) => C,
): DeviceSession<C> {
  const now = options.now ?? Date.now;
  let current: Credentials = loaded;
  const client = makeClient(options.baseUrl ?? loaded.url);
  async function refresh(): Promise<Credentials> {
    const pair = await client.refresh(current.refresh_token);
    current = credentialsFromTokenPair(client.baseUrl, pair, now(), current.public_key);
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

import type { RevokedJson } from '@svc/core';
import { ApiError } from './api-error.js';
import { type CredentialStore, type Credentials, credentialsFromTokenPair } from './credential-store.js';
import { createManagementClient, type ManagementClient } from './management-client.js';

/** A signed-in device's session: calls with its access token and keeps the saved credentials current. */
export interface ManagementSession {
  readonly client: ManagementClient;
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
 * Opens the saved session of a signed-in device. Throws a `TypeError` when nobody is signed in.
 *
 * @example
 * const session = openManagementSession({ store: createCredentialStore(defaultCredentialsPath()) });
 * const me = await session.withAccessToken((t) => session.client.me(t));
 */
export function openManagementSession(options: ManagementSessionOptions): ManagementSession {
  const loaded = options.store.load();
  if (loaded === null) throw new TypeError(`not signed in (no credentials at ${options.store.path}); run \`svc auth login --key FILE\``);
  const now = options.now ?? Date.now;
  let current: Credentials = loaded;
  const client = createManagementClient({
    baseUrl: options.baseUrl ?? loaded.url,
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  });

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

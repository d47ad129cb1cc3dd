import { createHash } from 'node:crypto';
import * as oidc from 'openid-client';
import { isLoopbackHost, type OidcConfig } from './config.js';
import { OidcRefusal } from './errors.js';

/** The discovered issuers of this process, and the client configurations built on them. */
export interface DiscoveryCache {
  /** The client configuration for `config`, discovering its issuer when not cached (or stale). */
  configurationFor(config: OidcConfig): Promise<oidc.Configuration>;
  /**
   * Discovers `config`'s issuer now (the health check), with the same checks, without
   * touching the cache: a health check every few seconds must not cost each login a JWKS fetch.
   */
  probe(config: OidcConfig): Promise<void>;
}

interface CachedIssuer {
  readonly at: number;
  readonly metadata: Promise<oidc.ServerMetadata>;
}

// The endpoints a login uses; for a plain-http loopback issuer each must stay on this machine.
const ENDPOINTS = ['authorization_endpoint', 'token_endpoint', 'jwks_uri', 'userinfo_endpoint'] as const;

/**
 * Creates the cache. One discovery per issuer per `ttlMs` (not per login: the IdP's
 * discovery document rarely changes, and openid-client refetches the JWKS itself when a
 * token names an unknown key). A failed discovery is not cached, so the next call retries.
 *
 * @example
 * const cache = createDiscoveryCache({ ttlMs: 3_600_000, timeoutSeconds: 10 });
 * const client = await cache.configurationFor(config);
 */
export function createDiscoveryCache(options: { readonly ttlMs: number; readonly timeoutSeconds: number }): DiscoveryCache {
  const issuers = new Map<string, CachedIssuer>();
  // Keyed by the metadata promise and the client, so the JWKS openid-client caches in a
  // Configuration survives between logins of the same client.
  const clients = new WeakMap<Promise<oidc.ServerMetadata>, Map<string, oidc.Configuration>>();

  function fetchMetadata(config: OidcConfig): Promise<oidc.ServerMetadata> {
    const execute = config.insecureLoopback ? [oidc.allowInsecureRequests] : [];
    // openid-client's discovery checks the document's `issuer` equals the configured URL exactly.
    return oidc
      .discovery(new URL(config.issuer), config.clientId, undefined, undefined, { execute, timeout: options.timeoutSeconds })
      .then((c) => {
        const server = c.serverMetadata();
        if (config.insecureLoopback) {
          for (const key of ENDPOINTS) {
            const value = server[key];
            if (typeof value === 'string' && new URL(value).protocol === 'http:' && !isLoopbackHost(new URL(value).hostname)) {
              throw new Error(`${key} ${value} leaves this machine over plain http`);
            }
          }
        }
        return server;
      })
      .catch((error: unknown) => {
        // openid-client says what failed, its cause which check (an issuer mismatch, a refused connection).
        const line = (e: unknown) => (e instanceof Error ? e.message : String(e)).split('\n')[0];
        const cause = error instanceof Error && error.cause instanceof Error ? `: ${line(error.cause)}` : '';
        const message = `${line(error)}${cause}`;
        throw new OidcRefusal('discovery_failed', `discovery of ${config.issuer} failed: ${message}`, { cause: error });
      });
  }

  function discover(config: OidcConfig): Promise<oidc.ServerMetadata> {
    const metadata = fetchMetadata(config);
    // A failed discovery is forgotten, so the next login tries again.
    metadata.catch(() => {
      if (issuers.get(config.issuer)?.metadata === metadata) issuers.delete(config.issuer);
    });
    issuers.set(config.issuer, { at: Date.now(), metadata });
    return metadata;
  }

  async function clientFor(config: OidcConfig, metadataPromise: Promise<oidc.ServerMetadata>): Promise<oidc.Configuration> {
    const metadata = await metadataPromise;
    // The secret is hashed into the key so a rotated secret gets a new configuration, and the key holds no secret.
    const key = [config.clientId, config.tokenEndpointAuth, createHash('sha256').update(config.clientSecret).digest('hex')].join('\n');
    let byClient = clients.get(metadataPromise);
    if (byClient === undefined) {
      byClient = new Map();
      clients.set(metadataPromise, byClient);
    }
    const cached = byClient.get(key);
    if (cached !== undefined) return cached;
    const auth =
      config.tokenEndpointAuth === 'client_secret_post'
        ? oidc.ClientSecretPost(config.clientSecret)
        : oidc.ClientSecretBasic(config.clientSecret);
    const client = new oidc.Configuration(metadata, config.clientId, undefined, auth);
    client.timeout = options.timeoutSeconds;
    if (config.insecureLoopback) oidc.allowInsecureRequests(client);
    // openid-client trusts an ID token from the token endpoint on TLS alone unless told
    // otherwise (OIDC Core 3.1.3.7 allows it); we verify its signature against the issuer's
    // JWKS too, so a token that did not come from the issuer's keys is refused even where TLS
    // is absent (a loopback issuer) or terminated by something else.
    oidc.enableNonRepudiationChecks(client);
    byClient.set(key, client);
    return client;
  }

  return {
    configurationFor(config) {
      const cached = issuers.get(config.issuer);
      const fresh = cached !== undefined && Date.now() - cached.at < options.ttlMs;
      return clientFor(config, fresh ? cached.metadata : discover(config));
    },
    async probe(config) {
      await fetchMetadata(config);
    },
  };
}

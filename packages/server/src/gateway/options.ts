import type { AuthDeps, AuthError, Principal, ProviderHandle } from '@svc/core';
import type { AppPathRequirement, AppRoute } from '@svc/core/config';
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify';
import type { ChallengeBudget } from '../http/challenge-budget.js';
import type { ConnectionLimits } from '../http/connection-limits.js';
import type { FailureLimiter } from '../http/failure-limiter.js';
import type { ServiceMetrics } from '../metrics/metrics.js';
import type { PageBrand } from '../pages/layout.js';
import type { SsoOptions } from './sso-routes.js';

/**
 * What serves the application once identity is settled: a plugin registered in its own
 * encapsulated context AFTER the gateway's strip and authenticate hooks, so everything it adds
 * runs with `request.principal` already set (the frozen principal, or null on a public path).
 * Upstream mode ({@link UpstreamAttachOptions}) and module mode (the same proxy to the confined
 * module process) are the two kinds.
 */
export type GatewayAttach = (app: FastifyInstance) => Promise<void>;

/** The route policy of the gateway (from `:svc/app-public`, `:svc/app-identity-headers`, `:svc/app-require`, `:svc/app-routes`). */
export interface GatewayPolicy {
  readonly publicPaths: readonly string[];
  readonly identityHeaders: readonly string[];
  readonly requirements: readonly AppPathRequirement[];
  /**
   * `:svc/app-routes`: when given and non-empty, the gateway serves only these origins (and
   * paths): a request no route matches is `404 not_found` on every path, `/.svc/` included, and
   * reaches nothing; a matched request is judged by its route's `:public` and `:require` (then
   * `publicPaths` and `requirements` above must be empty). Absent or empty: any `Host`, one policy.
   */
  readonly routes?: readonly AppRoute[];
  /** What every non-public path asks of the principal when no entry of `requirements` applies (a route's `:require`); absent: nothing. */
  readonly requirement?: AppPathRequirement | null;
}

/** Options of `buildGatewayApp`. */
export interface GatewayAppOptions {
  /** Store, clock, randomness, log, project id and settings of the auth module. */
  readonly deps: AuthDeps;
  readonly logger?: FastifyBaseLogger | false;
  readonly metrics?: ServiceMetrics;
  readonly policy: GatewayPolicy;
  /** Addresses and CIDRs whose `X-Forwarded-For` / `X-Forwarded-Proto` are believed (Fastify's `trustProxy`); empty: none. */
  readonly trustedProxies: readonly string[];
  /** Built-in TLS (PEM contents); absent: plain HTTP. The surface reloads it with `app.server.setSecureContext`. */
  readonly https?: { readonly cert: string | Buffer; readonly key: string | Buffer };
  /** The JWK Set served at `GET /.svc/jwks.json` (the public keys that sign `Svc-Assertion`); absent: `{"keys":[]}`. */
  readonly jwks?: () => { readonly keys: readonly object[] };
  /** What serves the application after identity; absent: every non-reserved path answers 404 once authenticated. */
  readonly attach?: GatewayAttach;
  /** The budget of failed sign-in proofs. Default: 30 failures per address unit (or per session, for refresh) per 60 s. */
  readonly limiter?: FailureLimiter;
  /** The budget of refused SCIM tokens at `/.svc/scim/v2`. Default: 30 per address unit per 60 s (scope `scim`). */
  readonly scimLimiter?: FailureLimiter;
  /** The budget of unanswered challenges. Default: 100 per source (address unit; on loopback, local account) per 60 s, never per public key. */
  readonly challenges?: ChallengeBudget;
  /**
   * How often (ms) the session of every relayed websocket is re-checked against the store: a
   * websocket whose session ended (logout, revocation on any node, device removal, refresh
   * reuse) or whose access token expired is closed (1008) within this bound plus one store
   * read. Default `WEBSOCKET_SESSION_CHECK_SECONDS` (5 s).
   */
  readonly websocketSessionCheckMs?: number;
  /** Connection caps of this listener. Default {@link APPLICATION_CONNECTION_LIMITS}. */
  readonly connectionLimits?: ConnectionLimits;
  /**
   * The installed provider packages (passkeys, OIDC login), each behind its confined process:
   * their ceremonies are served under `/.svc/auth/v1/providers/<name>/`, and browsers get the
   * resulting session in cookies (docs/providers.md). Absent or empty: no provider routes.
   */
  readonly providers?: readonly ProviderHandle[];
  /**
   * The gateway's public origin as browsers see it (`https://app.example.com`): what the CSRF
   * rule compares `Origin` with, and what providers are told. Absent: each request's scheme
   * and `Host` (a trusted proxy's `X-Forwarded-Proto` / `X-Forwarded-Host`).
   */
  readonly publicOrigin?: string;
  /**
   * One sign-in across route hosts (`:svc/app-auth-origin`): browsers sign in at `authOrigin`
   * only, and each route origin in `origins` gets its own session through a one-time code
   * (see `ssoRoutes`). Absent: each host signs in on its own, as before.
   */
  readonly sso?: SsoOptions;
  /** How the gateway's pages present the company (`:svc/app-brand`). Default: `DEFAULT_BRAND`, named by `siteName` when given. */
  readonly brand?: PageBrand;
  /** The site's name as the passkey provider tells authenticators (`:webauthn/rp-name`): the pages' name when no brand is set. */
  readonly siteName?: string | null;
}

/** What the upstream attach adds to each proxied request, computed once identity is settled. */
export type UpstreamIdentityHeaders = (req: FastifyRequest, principal: Principal | null) => Record<string, string>;

/** Options of the upstream attach (`:svc/app-upstream`, or every route of `:svc/app-routes`). */
export interface UpstreamAttachOptions {
  /**
   * The upstream's origin, e.g. `http://127.0.0.1:3000`; or `'routes'`: each request goes to
   * its route's `:to` (the route the gateway's identity step matched), one connection pool per
   * upstream origin, each of at most `maxConnections`.
   */
  readonly upstream: URL | 'routes';
  /** The `Svc-*` headers (and `Svc-Assertion`) to set on the proxied request; they replace anything of the same name. */
  readonly identityHeaders: UpstreamIdentityHeaders;
  /**
   * A unix socket to connect to instead of the upstream's host and port (module mode: the
   * confined module process's private socket). `upstream` then only names the scheme.
   */
  readonly socketPath?: string;
  /** Told of each request the upstream failed (`502`/`504`), after the caller got its answer (module mode checks its child is alive). */
  readonly onFailure?: (err: AuthError) => void;
  /**
   * Connections to the upstream kept at most (idle ones included); further requests wait for
   * one. Default 128; the service sizes it to the descriptor limit with the gateway's own cap
   * (`planConnectionLimits`).
   */
  readonly maxConnections?: number;
  /**
   * The largest body the upstream accepts, where the gateway knows it (module mode: the module
   * process's limit). A request whose `Content-Length` announces more is refused here, `413
   * payload_too_large` with `Connection: close`, before a byte of it is relayed; one sent without
   * it (chunked) is counted as it is relayed and refused the same way at the byte past the limit,
   * which is never sent. An upstream that refused it first and closed could reset the connection
   * while the gateway still sent, and the caller got `502` instead of the `413`.
   */
  readonly bodyLimit?: number;
}

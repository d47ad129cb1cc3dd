/**
 * The application gateway's configuration, as `project.edn` gives it (`:svc/app-*` keys; see
 * the contract's "Application gateway"). Types only here: `config.ts` reads and validates the
 * keys into this shape, the gateway applies it.
 */

/** A per-path requirement of `:svc/app-require`: what a principal must show, beyond being signed in, to reach the path. */
export interface AppPathRequirement {
  /** An exact path, or a prefix ending in `/*` (the same patterns as `:svc/app-public`). */
  readonly path: string;
  /** When not null, the principal's subject must be one of these. */
  readonly subjects: readonly string[] | null;
  /** When not null, the principal must be in at least one of these groups (its `groups` claim). */
  readonly groups: readonly string[] | null;
  /**
   * When not null, the principal's email must be VERIFIED and at one of these domains (lowercase,
   * A-label form, as emails are kept): an unverified email never satisfies it.
   */
  readonly emailDomains: readonly string[] | null;
  /** When not null, the principal's `amr` claim must hold at least one of these methods. */
  readonly amr: readonly string[] | null;
  /** When not null, the principal must have signed in at most this many seconds ago (`auth_time`). */
  readonly maxAuthAgeSeconds: number | null;
}

/** Built-in TLS of the application listener: PEM files, read at start and again on SIGHUP. */
export interface AppTlsConfig {
  /** Certificate chain (PEM); a relative path is from the project directory. */
  readonly cert: string;
  /** Private key (PEM); a relative path is from the project directory. */
  readonly key: string;
}

/** `:svc/app-brand`: how the gateway's pages present the company. */
export interface AppBrandConfig {
  /** 1 to 64 characters. */
  readonly name: string;
  /** `#rrggbb`, dark enough for white text (WCAG AA, 4.5:1); null: the pages' default. */
  readonly accent: string | null;
  /** The logo file as a `data:image/png;base64,...` or `data:image/svg+xml;base64,...` URI (read at load), or null. */
  readonly logo: string | null;
}

/** The `:svc/app-*` keys of `project.edn`, validated. */
export interface AppGatewayConfig {
  /** `:svc/app-listen`: `"host:port"`, `"off"`, or null (the default `127.0.0.1:8080` unless a flag or `SVC_APP_LISTEN` says). */
  readonly listen: string | null;
  /** `:svc/app-upstream`: the origin (`http://` or `https://`) authenticated requests are proxied to; null in module mode or with neither. */
  readonly upstream: string | null;
  /** `:svc/app-audience`: the `aud` of `Svc-Assertion`; null means the upstream's origin. */
  readonly audience: string | null;
  /**
   * `:svc/app-public-origin`: the origin browsers reach the gateway at (`https://app.example.com`,
   * canonical spelling), which browser sign-in and the CSRF rule use; null derives it from each
   * request's `Host` (or a trusted proxy's `X-Forwarded-Host`/`-Proto`).
   */
  readonly publicOrigin: string | null;
  /**
   * `:svc/app-auth-origin`: where browsers sign in once for every route host (canonical
   * spelling); null: each host signs in on its own.
   */
  readonly authOrigin: string | null;
  /** `:svc/app-public`: exact paths and prefixes ending in `/*` that need no principal. */
  readonly publicPaths: readonly string[];
  /** `:svc/app-identity-headers`: further inbound header names to strip (lower-cased), beyond the contract's list. */
  readonly identityHeaders: readonly string[];
  /** `:svc/app-require`: per-path requirements, most specific match applies. */
  readonly requirements: readonly AppPathRequirement[];
  /** `:svc/app-tls`: built-in TLS, or null for plain HTTP. */
  readonly tls: AppTlsConfig | null;
  /** `:svc/app-trusted-proxies`: addresses and CIDRs whose `X-Forwarded-For`/`-Proto` are believed. Empty: none. */
  readonly trustedProxies: readonly string[];
  /** `:svc/app-brand`, or null when not set. */
  readonly brand: AppBrandConfig | null;
  /**
   * `:svc/app-routes`: many applications behind the one gateway, each with its own origin (and
   * path prefix), upstream, public paths, requirement and audience. Absent (the key is not
   * set): the one-route shorthand (`upstream` and the keys beside it) or module mode.
   */
  readonly routes?: readonly AppRoute[];
}

/** One route of `:svc/app-routes`, validated (matched by core's `appRouteTable`). */
export interface AppRoute {
  /** Its position in `:svc/app-routes` (0-based): how config errors and `svc app routes` name it. */
  readonly index: number;
  /** `:from` in canonical spelling: the origin, plus `/<prefix>/*` when the route has a path. */
  readonly from: string;
  /** The origin of `:from` (`https://tools.example.com`): the route's public origin (`htu`, CSRF). */
  readonly origin: string;
  /** The path prefix of `:from` as written (`/wiki/*`), or null for an origin-only route. */
  readonly prefix: string | null;
  /** `:to`: the upstream's origin. */
  readonly to: string;
  /** `:public`: exact paths and prefixes ending in `/*` that need no principal (full paths, within the route). */
  readonly publicPaths: readonly string[];
  /**
   * `:require`: what every non-public path of the route asks of the principal, or null (signed
   * in is enough). Its `path` is the route's path pattern (`/*` for an origin-only route).
   */
  readonly requirement: AppPathRequirement | null;
  /** `:audience`: the `aud` of `Svc-Assertion` (default: the `:to` origin). */
  readonly audience: string;
}

/** The configuration with no `:svc/app-*` key set. */
export const DEFAULT_APP_GATEWAY_CONFIG: AppGatewayConfig = Object.freeze({
  listen: null,
  upstream: null,
  audience: null,
  publicOrigin: null,
  authOrigin: null,
  publicPaths: Object.freeze([]),
  identityHeaders: Object.freeze([]),
  requirements: Object.freeze([]),
  tls: null,
  trustedProxies: Object.freeze([]),
  brand: null,
});

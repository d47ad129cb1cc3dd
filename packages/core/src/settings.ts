/**
 * The one configuration table of svc auth: every key `project.edn` understands, every
 * capability a module may activate and every fixed limit, each with its type, default,
 * bounds, unit and meaning. Validation (`config.ts`), the defaults the use cases receive, the
 * generated docs (`docs/configuration.md`) and every message that quotes a limit read it from
 * here, so a number is written exactly once.
 */
import type { SenderConstraints } from './sender-constraint.js';

/** Settings of the auth module: timings in seconds (retention in days), and the DPoP policy per realm. */
export interface AuthSettings {
  readonly accessTokenTtlSeconds: number;
  readonly refreshTokenTtlSeconds: number;
  readonly refreshReuseGraceSeconds: number;
  readonly challengeTtlSeconds: number;
  readonly sessionMaxLifetimeSeconds: number;
  readonly bootstrapTokenTtlSeconds: number;
  readonly pairingMaxTtlSeconds: number;
  /** How long ended sessions and expired pairing intents are kept before retention deletes them. */
  readonly retentionDays: number;
  /** `:auth/sender-constraint` of each realm: how the sessions its device keys sign in are bound (DPoP). */
  readonly senderConstraint: SenderConstraints;
}

/** The unit a numeric setting or limit is measured in. */
export type SettingUnit = 'seconds' | 'days' | 'bytes' | 'failures';

/** One `:auth/...` number of the `:svc/auth` module's `:config`. */
export interface AuthSettingSpec {
  readonly key: string;
  readonly field: Exclude<keyof AuthSettings, 'senderConstraint'>;
  readonly unit: 'seconds' | 'days';
  readonly default: number;
  readonly min: number;
  readonly max: number;
  readonly meaning: string;
}

/**
 * Every `:auth/...` setting with its default, bounds, unit and meaning. Bounds keep a
 * profile from weakening the service (e.g. day-long access tokens).
 */
export const AUTH_SETTINGS: readonly AuthSettingSpec[] = [
  {
    key: ':auth/access-token-ttl-seconds',
    field: 'accessTokenTtlSeconds',
    unit: 'seconds',
    default: 900,
    min: 30,
    max: 86_400,
    meaning: 'lifetime of an access token',
  },
  {
    key: ':auth/refresh-token-ttl-seconds',
    field: 'refreshTokenTtlSeconds',
    unit: 'seconds',
    default: 2_592_000,
    min: 60,
    max: 31_536_000,
    meaning: 'lifetime of a refresh token (each rotation issues a fresh one)',
  },
  {
    key: ':auth/refresh-reuse-grace-seconds',
    field: 'refreshReuseGraceSeconds',
    unit: 'seconds',
    default: 10,
    min: 0,
    max: 300,
    meaning:
      'how long after a rotation the immediately previous refresh token is still answered, with the same pair its rotation issued (lost responses, concurrent tabs); outside it, reuse revokes the session',
  },
  {
    key: ':auth/challenge-ttl-seconds',
    field: 'challengeTtlSeconds',
    unit: 'seconds',
    default: 60,
    min: 10,
    max: 600,
    meaning: 'how long a sign-in challenge can be answered',
  },
  {
    key: ':auth/session-max-lifetime-seconds',
    field: 'sessionMaxLifetimeSeconds',
    unit: 'seconds',
    default: 7_776_000,
    min: 300,
    max: 31_536_000,
    meaning: 'absolute lifetime of a session: no rotation extends it',
  },
  {
    key: ':auth/pairing-max-ttl-seconds',
    field: 'pairingMaxTtlSeconds',
    unit: 'seconds',
    default: 900,
    min: 60,
    max: 900,
    meaning: 'the longest lifetime an enrolment intent may be given',
  },
  {
    key: ':auth/retention-days',
    field: 'retentionDays',
    unit: 'days',
    default: 30,
    min: 1,
    max: 3650,
    meaning:
      'how long after they ended sessions (expired or revoked) and pairing intents (expired) are kept before the running service deletes them; the audit trail keeps their events regardless',
  },
];

/** How old a DPoP proof's `iat` may be: a proof is accepted for at most this long after it was made. */
export const DPOP_MAX_AGE_SECONDS = 60;

/** How far in the future a DPoP proof's `iat` may lie (the client's clock ahead of ours). */
export const DPOP_MAX_FUTURE_SKEW_SECONDS = 5;

/** The key of the per-realm DPoP policy in the auth module's `:config`. */
export const SENDER_CONSTRAINT_KEY = ':auth/sender-constraint';

/** What {@link SENDER_CONSTRAINT_KEY} means, for the generated docs. */
export const SENDER_CONSTRAINT_MEANING = `sender-constrained sessions (DPoP, RFC 9449) for sessions a device key signs in: \`:refresh\` binds the refresh token to the device key (a refresh needs a DPoP proof by it; the access token stays a bearer token), \`:required\` binds the access token too (\`Authorization: DPoP\` and a proof with \`ath\` on every use), \`:off\` keeps plain bearer tokens. One keyword for both realms, or a map per realm, e.g. \`{:management :required :application :refresh}\` (a realm left out keeps \`:refresh\`). A proof is accepted from ${DPOP_MAX_AGE_SECONDS} s before to ${DPOP_MAX_FUTURE_SKEW_SECONDS} s after its \`iat\`, and each \`jti\` once. Sessions made before the binding, or under \`:off\`, stay bearer sessions until they end`;

/** How long a bootstrap token is valid (the spec fixes 15 minutes; not configurable). */
export const BOOTSTRAP_TOKEN_TTL_SECONDS = 900;

/** Wrong codes an enrolment intent survives: the failure that reaches this number burns it. */
export const PAIRING_MAX_FAILURES = 5;

/** The shortest lifetime an enrolment intent may be given: long enough to read a code out. */
export const PAIRING_MIN_TTL_SECONDS = 30;

/** The largest request body any surface accepts, in bytes (the spec's 64 KiB); larger ones get 413 before parsing. */
export const MAX_REQUEST_BODY_BYTES = 65_536;

/** How long a `Svc-Assertion` the gateway attaches is valid (`exp` - `iat`): one proxied request, plus clock skew. */
export const ASSERTION_TTL_SECONDS = 30;

/** The longest `exp` - `iat` an assertion may have (the contract's bound); verifiers refuse longer ones. */
export const ASSERTION_MAX_TTL_SECONDS = 60;

/**
 * How long a rotated-in assertion key is published in the JWK Set before it signs anything: at
 * least the longest JWK Set cache of common verifiers (jose's `createRemoteJWKSet` 10 min,
 * PyJWT's `PyJWKClient` 5 min), so one that cached the set before the rotation already knows it.
 */
export const ASSERTION_KEY_PREPUBLISH_SECONDS = 600;

/**
 * How long a rotated-out assertion key stays published after it stopped signing: what it signed
 * last still verifies (at most {@link ASSERTION_MAX_TTL_SECONDS} old) with ample clock skew.
 */
export const ASSERTION_KEY_OVERLAP_SECONDS = 300;

/** A limit the spec fixes: documented beside the settings, never configurable. */
export interface FixedLimit {
  readonly name: string;
  readonly value: number;
  readonly unit: SettingUnit;
  readonly meaning: string;
}

/** Every fixed limit, for the docs. */
export const FIXED_LIMITS: readonly FixedLimit[] = [
  {
    name: 'DPoP proof age',
    value: DPOP_MAX_AGE_SECONDS,
    unit: 'seconds',
    meaning: 'how long after its `iat` a DPoP proof is accepted (and its `jti` remembered, across nodes sharing the store)',
  },
  {
    name: 'DPoP proof clock skew',
    value: DPOP_MAX_FUTURE_SKEW_SECONDS,
    unit: 'seconds',
    meaning: "how far in the future a DPoP proof's `iat` may lie (a client clock ahead of the server's)",
  },
  {
    name: 'bootstrap token lifetime',
    value: BOOTSTRAP_TOKEN_TTL_SECONDS,
    unit: 'seconds',
    meaning: 'a bootstrap token is used once and expires this long after `svc auth init` printed it',
  },
  {
    name: 'pairing code attempts',
    value: PAIRING_MAX_FAILURES,
    unit: 'failures',
    meaning: 'wrong pairing codes after which an enrolment intent is burned',
  },
  {
    name: 'shortest enrolment intent',
    value: PAIRING_MIN_TTL_SECONDS,
    unit: 'seconds',
    meaning: 'the least `ttl_seconds` an enrolment intent may be prepared with; the most is `:auth/pairing-max-ttl-seconds`',
  },
  {
    name: 'request body size',
    value: MAX_REQUEST_BODY_BYTES,
    unit: 'bytes',
    meaning: 'the largest request body any listener accepts; larger ones get `413 payload_too_large` before they are parsed',
  },
  {
    name: 'gateway assertion lifetime',
    value: ASSERTION_TTL_SECONDS,
    unit: 'seconds',
    meaning: 'how long a `Svc-Assertion` is valid after the gateway signed it (`@svc/assertion` refuses any longer than 60 s)',
  },
  {
    name: 'assertion key pre-publication',
    value: ASSERTION_KEY_PREPUBLISH_SECONDS,
    unit: 'seconds',
    meaning: 'after `svc app rotate-key`, the new key is in `/.svc/jwks.json` this long before it signs',
  },
  {
    name: 'assertion key overlap',
    value: ASSERTION_KEY_OVERLAP_SECONDS,
    unit: 'seconds',
    meaning: 'after the switch, the previous key stays in `/.svc/jwks.json` this long (none after `--immediate`)',
  },
];

/** The defaults of {@link AuthSettings}, from {@link AUTH_SETTINGS} and the fixed bootstrap lifetime. */
export const DEFAULT_AUTH_SETTINGS: AuthSettings = Object.freeze({
  ...(Object.fromEntries(AUTH_SETTINGS.map((s) => [s.field, s.default])) as Omit<
    AuthSettings,
    'bootstrapTokenTtlSeconds' | 'senderConstraint'
  >),
  bootstrapTokenTtlSeconds: BOOTSTRAP_TOKEN_TTL_SECONDS,
  senderConstraint: Object.freeze({ management: 'refresh', application: 'refresh' } as const),
});

/** How a top-level `project.edn` value is read. */
export type ProjectKeyType =
  | 'project-name'
  | 'path'
  | 'listen'
  | 'packages'
  | 'modules'
  | 'profiles'
  | 'audit-sinks'
  | 'app-listen'
  | 'app-upstream'
  | 'app-routes'
  | 'app-audience'
  | 'app-origin'
  | 'app-paths'
  | 'app-header-names'
  | 'app-require'
  | 'app-tls'
  | 'app-addresses'
  | 'app-brand'
  | 'trusted-publishers'
  | 'secret';

/** One `:svc/...` key of `project.edn`. */
export interface ProjectKeySpec {
  readonly key: string;
  readonly type: ProjectKeyType;
  /** What a message says was expected. */
  readonly expected: string;
  /** The default as the docs show it, or null for a required key. */
  readonly default: string | null;
  /** Whether a profile may override it. */
  readonly inProfile: boolean;
  readonly meaning: string;
}

/** Where the control state lives when neither `SVC_CONTROL_DIR` nor `:svc/control-dir` says, relative to the project directory. */
export const DEFAULT_CONTROL_DIR = '.svc/control';

/** The node HTTP surface's address when neither a flag, `SVC_NODE_LISTEN` nor `:svc/node-listen` says. */
export const DEFAULT_NODE_LISTEN = '127.0.0.1:9091';

/** The application gateway's address when neither `--app-listen`, `SVC_APP_LISTEN` nor `:svc/app-listen` says. */
export const DEFAULT_APP_LISTEN = '127.0.0.1:8080';

/** The longest `:max-auth-age-seconds` a `:svc/app-require` entry may ask for (one year). */
export const MAX_AUTH_AGE_SECONDS_LIMIT = 31_536_000;

/**
 * Header names `:svc/app-identity-headers` may not name: stripping them would break HTTP
 * framing or authentication itself (the gateway removes our own `Authorization` after it
 * authenticated the request).
 */
export const UNSTRIPPABLE_HEADERS: readonly string[] = [
  'authorization',
  'connection',
  'content-length',
  'host',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
];

/** Every top-level key of `project.edn`. */
export const PROJECT_KEYS: readonly ProjectKeySpec[] = [
  {
    key: ':svc/project',
    type: 'project-name',
    expected: 'a project name string (lowercase letters, digits, - and _)',
    default: null,
    inProfile: false,
    meaning: 'the project name (lowercase letters, digits, `-`, `_`)',
  },
  {
    key: ':svc/packages',
    type: 'packages',
    expected: 'a map of package name to {:version :sha256}',
    default: '`{}`',
    inProfile: true,
    meaning: 'pinned packages: `{"name" {:version "x.y.z" :sha256 "<64 hex>"}}`',
  },
  {
    key: ':svc/modules',
    type: 'modules',
    expected: 'a map of module alias to module',
    default: null,
    inProfile: true,
    meaning: 'module alias → `{:package "name"}` or `{:module :svc/auth}`, with `:activate [capabilities]` and `:config {...}`',
  },
  {
    key: ':svc/control-dir',
    type: 'path',
    expected: 'a directory path string',
    default: `\`${DEFAULT_CONTROL_DIR}\``,
    inProfile: true,
    meaning: 'where the control state lives (relative to the project directory)',
  },
  {
    key: ':svc/node-listen',
    type: 'listen',
    expected: '"host:port"',
    default: `\`${DEFAULT_NODE_LISTEN}\``,
    inProfile: true,
    meaning: "the node HTTP surface's address",
  },
  {
    key: ':svc/metrics-listen',
    type: 'listen',
    expected: '"host:port"',
    default: 'off',
    inProfile: true,
    meaning:
      'the Prometheus metrics and probes listener (`/metrics`, `/livez`, `/readyz`). The only place a network address (e.g. `"0.0.0.0:9464"`) is accepted for it; see [deployment](deployment.md#metrics-and-probes)',
  },
  {
    key: ':svc/audit-sinks',
    type: 'audit-sinks',
    expected: 'a map such as {:file "audit.jsonl" :stdout true}',
    default: 'none',
    inProfile: true,
    meaning:
      'where a running service ships the audit trail and its signed checkpoints, at least once, from a saved cursor; see [Audit sinks](#audit-sinks)',
  },
  {
    key: ':svc/app-listen',
    type: 'app-listen',
    expected: '"host:port" or "off"',
    default: `\`${DEFAULT_APP_LISTEN}\``,
    inProfile: true,
    meaning:
      'the application gateway\'s address (`--app-listen` and `SVC_APP_LISTEN` beat it); `"off"` disables it. A network address is allowed; plain HTTP on one logs a loud warning unless `:svc/app-tls` is set or `:svc/app-trusted-proxies` names the proxy that terminates TLS',
  },
  {
    key: ':svc/app-upstream',
    type: 'app-upstream',
    expected: 'an http:// or https:// origin such as "http://127.0.0.1:3000" (no user, path, query or fragment)',
    default: 'none',
    inProfile: true,
    meaning:
      'upstream mode: authenticated requests are proxied to this origin with the `Svc-*` identity headers and a signed `Svc-Assertion`',
  },
  {
    key: ':svc/app-routes',
    type: 'app-routes',
    expected:
      'a non-empty vector of routes such as [{:from "https://grafana.example.com" :to "http://127.0.0.1:3000" :public ["/api/health"] :require {:groups ["ops"]}}]',
    default: 'none',
    inProfile: true,
    meaning:
      "many applications behind one gateway. Each route: `:from` (the origin browsers reach the application at, optionally with a path prefix ending in `/*`, e.g. `\"https://tools.example.com/wiki/*\"`), `:to` (the upstream origin), `:public` (paths that need no principal), `:require` (what every other path of the route asks: `:subjects`, `:groups`, `:email-domains`, `:amr`, `:max-auth-age-seconds`, as in `:svc/app-require`), `:audience` (the `aud` of `Svc-Assertion`, default the `:to` origin; `htu` is built from the `:from` origin). Matching: the request's origin (scheme, `Host` or a trusted proxy's `X-Forwarded-Host`/`-Proto`, port; host case-insensitive, a default port the same as none) must equal a route's `:from` origin exactly; among that origin's routes the longest path prefix covering the path wins (`/wiki/*` covers `/wiki` and below, never `/wiki-private`; compared case-insensitively on the decoded path), an origin-only route is the least specific. A request no route matches is `404 not_found` and never reaches any upstream; `/.svc/` is the gateway's own on every route origin. Excludes `:svc/app-upstream`, `:svc/app-public`, `:svc/app-require`, `:svc/app-audience`, `:svc/app-public-origin` and `:svc/app` modules (docs/gateway.md)",
  },
  {
    key: ':svc/app-audience',
    type: 'app-audience',
    expected: 'a non-empty string without control characters',
    default: "the upstream's origin",
    inProfile: true,
    meaning: 'the `aud` claim of `Svc-Assertion`, which the application checks',
  },
  {
    key: ':svc/app-public-origin',
    type: 'app-origin',
    expected: 'an http:// or https:// origin such as "https://app.example.com" (no user, path, query or fragment)',
    default: "each request's `Host` (or a trusted proxy's `X-Forwarded-Host` and `-Proto`)",
    inProfile: true,
    meaning:
      'the origin browsers reach the application gateway at: browser sign-in (the WebAuthn origin, the OIDC `redirect_uri`) and the CSRF rule use it, so no request can choose it by the `Host` it names. Set it in production behind a proxy or a load balancer',
  },
  {
    key: ':svc/app-auth-origin',
    type: 'app-origin',
    expected: 'an http:// or https:// origin such as "https://auth.example.com" (no user, path, query or fragment)',
    default: 'none: each host signs in on its own',
    inProfile: true,
    meaning:
      "one sign-in across every route host: the origin where browsers sign in (one of the gateway's own hosts). A browser without a session on another host is sent there and comes back with a one-time code (30 s, single use, bound to that host and browser) that its host redeems for a session of its own; one logout on any host ends the sign-in on all of them",
  },
  {
    key: ':svc/app-public',
    type: 'app-paths',
    expected: 'a vector of paths such as ["/healthz" "/public/*"] (exact paths, or prefixes ending in /*; never under /.svc/)',
    default: '`[]`',
    inProfile: true,
    meaning:
      'paths of the application that need no principal: exact paths, or prefixes ending in `/*`. Everything else is authenticated; identity headers are stripped on public paths too',
  },
  {
    key: ':svc/app-identity-headers',
    type: 'app-header-names',
    expected: 'a vector of header names such as ["x-tenant-user"]',
    default: '`[]`',
    inProfile: true,
    meaning:
      "further inbound headers the gateway strips before authentication, beyond the contract's list (stored and compared lower-cased, every character other than a letter or digit read as `-`)",
  },
  {
    key: ':svc/app-require',
    type: 'app-require',
    expected: 'a map of path pattern to {:subjects [...] :groups [...] :email-domains [...] :amr [...] :max-auth-age-seconds n}',
    default: '`{}`',
    inProfile: true,
    meaning:
      'per-path requirements beyond being signed in: `:subjects` (one of these `sub_...`), `:groups` (a member of one of these groups), `:email-domains` (a VERIFIED email at one of these domains; an unverified email never counts; an internationalised domain may be written either way), `:amr` (one of these methods), `:max-auth-age-seconds` (signed in at most this long ago); every key given must hold, and within a key any listed value suffices; the most specific pattern applies. Patterns are matched as the application reads the path: case-insensitively, a prefix `/admin/*` also covers the bare `/admin`, and both `/admin/*` and `/admin` cover `/admin/` and `/admin.json` (docs/gateway.md section 3)',
  },
  {
    key: ':svc/app-tls',
    type: 'app-tls',
    expected: '{:cert "cert.pem" :key "key.pem"}',
    default: 'none (plain HTTP)',
    inProfile: true,
    meaning:
      'built-in TLS of the application gateway: PEM certificate chain and private key (relative paths from the project directory), read at start and again on SIGHUP',
  },
  {
    key: ':svc/app-brand',
    type: 'app-brand',
    expected:
      '{:name "Acme" :logo "brand/logo.png" :accent "#0f766e"}: a name of 1 to 64 characters, an optional PNG or SVG logo of at most 64 KiB (a path from the project directory), an optional #rrggbb accent dark enough for white text (contrast at least 4.5:1)',
    default: 'the passkey provider\'s `:webauthn/rp-name` (else "svc"), no logo, accent `#1d4ed8`',
    inProfile: true,
    meaning:
      "how the gateway's pages (sign-in, refusals, step-up) present the company: the product name in the header and title, the logo (read at load; an SVG is shown as an image, never run), and the accent colour of the header bar and primary buttons",
  },
  {
    key: ':svc/app-trusted-proxies',
    type: 'app-addresses',
    expected: 'a vector of IP addresses, CIDR blocks or the names "loopback", "linklocal", "uniquelocal", such as ["10.0.0.0/8" "::1"]',
    default: '`[]`',
    inProfile: true,
    meaning:
      'the proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` the gateway believes (addresses, CIDR blocks, or `"loopback"`, `"linklocal"`, `"uniquelocal"`); from any other address they are ignored. Not `0.0.0.0/0` or `::/0`',
  },
  {
    key: ':svc/trusted-publishers',
    type: 'trusted-publishers',
    expected: 'a map of publisher name to its Ed25519 public key (64 hex digits), such as {"svc" "<64 hex>"}',
    default: '`{}`',
    inProfile: true,
    meaning:
      'the publishers whose signature a provider package must carry: `{"name" "<64 hex Ed25519 public key>"}`. `svc package install` and every load refuse a provider package signed by anyone else; see [providers](providers.md#1-signed-packages-svcaddons-svccore-config-svc-package)',
  },
  {
    key: ':svc/key-encryption-key',
    type: 'secret',
    expected: 'a secret reference: #svc/secret "env:NAME" or #svc/secret "file:/path"',
    default: 'none; required with `:svc/app-upstream` on a store other than `svc-store-sqlite`',
    inProfile: true,
    meaning:
      "the key-encryption key (32 random bytes as base64, `openssl rand -base64 32`, or 64 hex digits) the gateway's assertion signing keys are sealed under (AES-256-GCM) in the control store, which every node shares; every node of the cluster is given the same one. The store never holds it: a copy of the database reveals no private key. On the embedded store it is optional (the keys are then kept in the owner-only database file), and seals them when given. See [assertion keys at rest](assertion.md#keys-of-the-cluster)",
  },
  {
    key: ':svc/previous-key-encryption-key',
    type: 'secret',
    expected: 'a secret reference: #svc/secret "env:NAME" or #svc/secret "file:/path"',
    default: 'none',
    inProfile: true,
    meaning:
      'during a rotation of `:svc/key-encryption-key`: the key it replaces, still accepted to open the stored assertion keys; the first node that starts with both seals them again under the new one (`app.assertion_keys_resealed`), after which it can be removed',
  },
  {
    key: ':svc/profiles',
    type: 'profiles',
    expected: 'a map of profile keyword to overrides',
    default: '`{}`',
    inProfile: false,
    meaning: 'named overrides, see [profiles](#profiles); every profile is checked at load, chosen or not',
  },
];

/**
 * Keys that would weaken the management realm, anywhere in `project.edn` (top level, a
 * profile, the auth module's `:config`): refused with a message that says the realm is always
 * protected, rather than as merely unknown.
 */
export const WEAKENING_KEYS: readonly string[] = [
  ':auth/dev-mode',
  ':auth/insecure',
  ':auth/disable-auth',
  ':auth/management-protected',
  ':auth/realms',
  ':svc/dev-mode',
  ':svc/management-listen',
];

/** The one built-in module a project names with `:module`. */
export const AUTH_MODULE = 'svc/auth';

/** The `:auth/store` key of the auth module: which module holds the control state. */
export const AUTH_STORE_KEY = ':auth/store';

/** What {@link AUTH_STORE_KEY} means, for the docs. */
export const AUTH_STORE_MEANING =
  'the module alias whose `:svc/store` export holds the control state; that module must come from a pinned package and activate `:svc/store`';

/** A capability a module may list in `:activate`. */
export interface CapabilitySpec {
  readonly keyword: string;
  readonly meaning: string;
  /** Why this build refuses to activate it, or null when it may be activated. */
  readonly refusal: string | null;
}

/** Every capability of the contract, and whether this build can activate it. */
export const CAPABILITIES: readonly CapabilitySpec[] = [
  {
    keyword: 'svc/store',
    meaning: 'the control store of a pinned store package; `:auth/store` names the module',
    refusal: null,
  },
  {
    keyword: 'svc/app',
    meaning:
      "an application module (the package's Fastify plugin) served behind the application gateway, after identity, in a confined process of its own (no access to the control state, keys or environment); only from a package pinned by its archive's SHA-256, never from the control store's package",
    refusal: null,
  },
  {
    keyword: 'svc/auth-provider',
    meaning:
      'a provider module (WebAuthn, OIDC login): privileged, activated alone, only from a package pinned by its SHA-256, declaring `svc/auth-provider` and signed by a publisher of `:svc/trusted-publishers`; its `:config` takes the [provider policy keys](#provider-modules) beside its own',
    refusal: null,
  },
];

/** The one application capability: what `:svc/app` modules activate. */
export const APP_CAPABILITY = 'svc/app';

/** The provider capability: what a provider module activates, alone, from a signed package. */
export const PROVIDER_CAPABILITY = 'svc/auth-provider';

/** An export only svc itself (or a package it can verify as entitled) may provide. */
export interface PrivilegedExport {
  readonly keyword: string;
  /** Why a package module may not activate it. */
  readonly why: string;
}

/**
 * The exports a package may never activate on its own (spec rule 1: identity is established
 * before application modules run, and a package cannot replace it): refused at load with one
 * line naming the package and the export. `:svc/store` is privileged only for the package that
 * holds the control state, which no application module may come from (see `config.ts`).
 */
export const PRIVILEGED_EXPORTS: readonly PrivilegedExport[] = [
  {
    keyword: AUTH_MODULE,
    why: 'identity is the built-in {:module :svc/auth}; no package can provide or replace it',
  },
  {
    keyword: PROVIDER_CAPABILITY,
    why: 'provider packages must be signed and declare :svc/auth-provider, and a provider module activates it alone (never beside :svc/app or :svc/store)',
  },
];

const DURATION_UNITS: readonly (readonly [number, string])[] = [
  [86_400, 'day'],
  [3600, 'hour'],
  [60, 'minute'],
  [1, 'second'],
];

/**
 * A limit as a message says it: whole durations in their largest unit, bytes in KiB when
 * they are whole KiB.
 *
 * @example
 * formatLimit(BOOTSTRAP_TOKEN_TTL_SECONDS, 'seconds'); // "15 minutes"
 * formatLimit(MAX_REQUEST_BODY_BYTES, 'bytes'); // "64 KiB (65,536 bytes)"
 * formatLimit(PAIRING_MAX_FAILURES, 'failures'); // "5 failures"
 */
export function formatLimit(value: number, unit: SettingUnit): string {
  const plural = (n: number, word: string) => `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
  if (unit === 'seconds') {
    const [size, word] = DURATION_UNITS.find(([s]) => value % s === 0 && value >= s) ?? [1, 'second'];
    return plural(value / size, word);
  }
  if (unit === 'bytes') {
    const bytes = plural(value, 'byte');
    return value >= 1024 && value % 1024 === 0 ? `${value / 1024} KiB (${bytes})` : bytes;
  }
  return plural(value, unit === 'days' ? 'day' : 'failure');
}

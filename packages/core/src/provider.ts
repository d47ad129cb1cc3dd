import type { Realm } from './realm.js';
import type { UserStatus } from './users.js';

// The provider contract (spec: "optional provider packages may prove or link an external
// credential; they cannot create sessions or principals themselves"). A provider package's
// `svc/auth-provider` export is an `AuthProvider`; it runs confined in a child process (see
// docs/providers.md), and the service talks to it through a `ProviderHandle`, whose every
// answer is untrusted until core's provider policy has checked it. Everything that crosses
// the boundary is plain JSON: no functions, no store, no clock, no way to mint a token.

/** The version of this contract a provider package declares (`contractVersion`). */
export const PROVIDER_CONTRACT_VERSION = 1;

/** JSON, the only thing that crosses the provider boundary. */
export type ProviderJson = null | boolean | number | string | readonly ProviderJson[] | { readonly [key: string]: ProviderJson };

/** One claim's value: a string, a boolean, or an array of strings (a groups claim). */
export type ProviderClaim = string | boolean | readonly string[];

/** What a provider proved: an identity at an external issuer. Checked by core before use. */
export interface ExternalIdentity {
  /** Who vouches: an OIDC issuer URL (`https://login.example.com`), or `webauthn:<rp id>` for passkeys. */
  readonly issuer: string;
  /** The subject at that issuer: an OIDC `sub`, or a WebAuthn credential id (base64url). */
  readonly subject: string;
  /**
   * A few facts about it (`email`, `email_verified`, `name`, a groups claim): strings, booleans
   * and arrays of short strings only, small (core's `checkProviderIdentity` holds them to it).
   */
  readonly claims: Readonly<Record<string, ProviderClaim>>;
}

/**
 * Why a ceremony runs: `signin` with a linked credential; `link` a new credential to a subject
 * (a signed-in principal's, or a pairing intent's); `signup`, a new subject with a new
 * credential (just-in-time provisioning, only where the provider's policy allows it).
 */
export type ProviderIntent = 'signin' | 'link' | 'signup';

/**
 * A browser request as a provider sees it: the query and the parsed body, never a header,
 * a cookie or a token of ours.
 */
export interface ProviderRequest {
  readonly query: Readonly<Record<string, string>>;
  readonly body: ProviderJson;
}

/** What the service sends back to the browser for a provider. */
export type ProviderReply =
  | { readonly kind: 'json'; readonly body: ProviderJson }
  | { readonly kind: 'redirect'; readonly location: string };

/** The ceremony's context, set by the service (never by the browser). */
export interface ProviderContext {
  readonly realm: Realm;
  readonly intent: ProviderIntent;
  /** The gateway's public origin as the browser sees it, e.g. `https://app.example.com`. */
  readonly origin: string;
  /** Where a redirect-based provider sends the browser back: `<origin>/.svc/auth/v1/providers/<name>/callback`. */
  readonly callbackUrl: string;
  /** For `link`: the signed-in subject, and the credential ids it already has with this provider. */
  readonly subject: string | null;
  readonly existingCredentials: readonly string[];
}

/** A credential the service keeps for a provider (a passkey's public key and counter), inside a link. */
export interface StoredCredential {
  /** The credential id (WebAuthn: base64url), unique per provider. */
  readonly id: string;
  /** The provider's own data about it (public key, transports...): opaque to the service. */
  readonly data: ProviderJson;
  /** A signature counter the service keeps monotonic (WebAuthn), or null when the credential has none. */
  readonly counter: number | null;
}

/** `begin`'s answer: state the service keeps single-use (never sent to the browser), and the reply. */
export interface ProviderBeginResult {
  readonly state: ProviderJson;
  readonly reply: ProviderReply;
}

/** `finish`'s answer: the identity proved and, for a credential-holding provider, its credential. */
export interface ProviderFinishResult {
  readonly identity: ExternalIdentity;
  /**
   * Registration (`link`, or sign-in with provisioning): the new credential to store. Sign-in
   * with a stored credential: the same id with the counter the authenticator just reported.
   */
  readonly credential: StoredCredential | null;
}

/** A provider's own health check. */
export interface ProviderHealth {
  readonly status: 'ok' | 'degraded' | 'down';
  readonly detail?: string;
}

/**
 * The `svc/auth-provider` export of a provider package, as its author writes it. `config` is
 * the module's `:config` with secret references already resolved, as JSON (keyword keys
 * without the colon, e.g. `{"webauthn/rp-id": "example.com"}`). Runs confined: it can prove,
 * nothing else.
 */
export interface AuthProvider {
  readonly contractVersion: typeof PROVIDER_CONTRACT_VERSION;
  /** `webauthn`, `oidc`: tells the sign-in page how to drive the ceremony. */
  readonly kind: string;
  /** Checks the module's `:config`: every problem as one line naming the key; empty when fine. */
  validateConfig(config: ProviderJson): readonly string[];
  begin(ctx: ProviderContext, config: ProviderJson): Promise<ProviderBeginResult>;
  /** The stored credential a finishing request names (WebAuthn: the assertion's id), or null. */
  credentialIdOf(request: ProviderRequest): string | null;
  finish(
    ctx: ProviderContext,
    config: ProviderJson,
    input: { readonly state: ProviderJson; readonly request: ProviderRequest; readonly credential: StoredCredential | null },
  ): Promise<ProviderFinishResult>;
  health(config: ProviderJson): Promise<ProviderHealth>;
}

/** The service's policy for one provider module (from `project.edn`, see docs/providers.md). */
export interface ProviderPolicy {
  /** The module alias: the route segment (`/.svc/auth/v1/providers/<name>/...`) and the audit name. */
  readonly name: string;
  /** What pages call it (`:provider/label`, "Acme SSO"); absent or null: a generic wording. Never the alias. */
  readonly label?: string | null;
  /** The realms it may sign in to or link in. */
  readonly realms: readonly Realm[];
  /** Issuers whose identities it may return; anything else is refused. */
  readonly allowedIssuers: readonly string[];
  /**
   * Just-in-time provisioning of a new subject at first sign-in (application realm only): off
   * unless set. `groups`: the groups a new user starts in (`:provider/jit-groups`, kept as the
   * operator's); `status`: `disabled` makes a new user wait for an operator to enable them
   * (`:provider/jit-status`, sign-up by invitation). Absent: none, and `active`.
   */
  readonly jit: {
    readonly enabled: boolean;
    readonly emailDomains: readonly string[];
    readonly groups?: readonly string[];
    readonly status?: UserStatus;
  };
  /** The claim holding the user's groups (`:provider/groups-claim`); absent or null: groups do not come from this provider. */
  readonly groupsClaim?: string | null;
  /** With `groupsClaim`, only groups starting with this prefix are kept, the prefix removed (`:provider/group-prefix`). */
  readonly groupPrefix?: string | null;
  /**
   * An identity with no link whose VERIFIED email is exactly one existing user's email in the
   * realm is linked to that user (`:provider/link-by-verified-email`, application realm only). Absent: false.
   */
  readonly linkByVerifiedEmail?: boolean;
}

/**
 * The service's side of one installed provider: the confined process behind the same
 * methods. Every answer is untrusted (a hostile package can return anything): callers pass it
 * through core's provider policy before acting on it.
 */
export interface ProviderHandle {
  readonly policy: ProviderPolicy;
  /** `name@version` of the verified package, and who signed it. */
  readonly packageName: string;
  readonly packageVersion: string;
  readonly signer: string;
  /**
   * The Ed25519 public key (64 hex) that signed the verified package, or null when none was
   * verified: with `packageName`, what decides the `amr` of its sessions (`providerAmr`).
   */
  readonly signerKey: string | null;
  /** What the provider says it is, at run time: a label for pages and status, never trusted for a decision. */
  readonly kind: string;
  begin(ctx: ProviderContext): Promise<ProviderBeginResult>;
  credentialIdOf(request: ProviderRequest): Promise<string | null>;
  finish(
    ctx: ProviderContext,
    input: { readonly state: ProviderJson; readonly request: ProviderRequest; readonly credential: StoredCredential | null },
  ): Promise<ProviderFinishResult>;
  /**
   * The provider's own health check, run now (the OIDC provider fetches its issuer's discovery
   * document anew). Bounded like every call: the host gives up after its call timeout. Core asks
   * it after a refusal that may be an outage (`refusalMayBeOutage`).
   */
  health(): Promise<ProviderHealth>;
  close(): Promise<void>;
}

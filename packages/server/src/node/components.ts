import { type ModuleStatusJson, type ProviderHandle, type Realm, type StoreAddonStatusJson, verifyEd25519 } from '@svc/core';

/** What the composition root knows about the installed components, for `GET /edge/0-alpha/status`. */
export interface ComponentStatus {
  readonly service: { readonly name: string; readonly version: string };
  /** The control store's addon, or null when the composition root has no record of it. */
  readonly store_addon: StoreAddonStatusJson | null;
  readonly modules: readonly ModuleStatusJson[];
}

/** An authentication provider as the node surface reports it: health checks and status. */
export interface NodeProvider {
  /** E.g. `ed25519`. */
  readonly name: string;
  /** E.g. `device-key`, `webauthn`, `oidc`. */
  readonly kind: string;
  /** Built into the core (true) or loaded from a provider package. */
  readonly builtin: boolean;
  readonly version: string | null;
  /** Resolves when the provider can do its job; rejects (with a reason for the log) when not. */
  check(): Promise<void>;
  /** A provider package only: what status reports about it (see {@link providerPackageOf}). */
  readonly package?: { readonly name: string; readonly signer: string; readonly realms: readonly Realm[] };
}

/**
 * A provider package the service runs confined (a `ProviderHandle` of `@svc/provider-host`), as
 * the node surface reports it: its module alias, kind, package, version, signer and realms, and
 * its own `health()` as the check. A provider that answers `degraded` or `down`, fails or
 * does not answer in time fails the check; its status and detail go to the log only.
 *
 * @example
 * await buildNodeApp({ deps, identity, components, providerPackages: [passkeys] }); // uses this per handle
 */
export function providerPackageOf(handle: ProviderHandle): NodeProvider {
  return Object.freeze({
    name: handle.policy.name,
    // Read per request: the handle learns its kind from the package when it starts.
    get kind() {
      return handle.kind;
    },
    builtin: false,
    version: handle.packageVersion,
    package: Object.freeze({ name: handle.packageName, signer: handle.signer, realms: Object.freeze([...handle.policy.realms]) }),
    async check() {
      const health = await handle.health();
      if (health.status !== 'ok') {
        throw new Error(`the provider reports ${health.status}${health.detail === undefined ? '' : `: ${health.detail}`}`);
      }
    },
  });
}

// RFC 8032 §7.1, TEST 2: a known answer, so the check proves verification works, not only that it runs.
const KAT_PUBLIC_KEY = '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c';
const KAT_MESSAGE = Buffer.from('72', 'hex');
const KAT_SIGNATURE = Buffer.from(
  '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
  'hex',
);

/**
 * The built-in Ed25519 device-key provider. Its health check is a known-answer test: RFC 8032's
 * test 2 signature must verify and a one-bit change of it must not.
 *
 * @example
 * await buildNodeApp({ deps, identity, components, providers: [ed25519KeyProvider] });
 */
export const ed25519KeyProvider: NodeProvider = Object.freeze({
  name: 'ed25519',
  kind: 'device-key',
  builtin: true,
  version: null,
  async check() {
    const flipped = Buffer.from(KAT_SIGNATURE);
    flipped[0] = (flipped[0] ?? 0) ^ 1;
    if (!verifyEd25519(KAT_PUBLIC_KEY, KAT_MESSAGE, KAT_SIGNATURE) || verifyEd25519(KAT_PUBLIC_KEY, KAT_MESSAGE, flipped)) {
      throw new Error('the Ed25519 known-answer test failed');
    }
  },
});

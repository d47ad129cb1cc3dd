import { randomBytes } from 'node:crypto';
import {
  BUNDLED_PASSKEY_PACKAGE,
  type ProviderBeginResult,
  type ProviderClaim,
  type ProviderContext,
  type ProviderFinishResult,
  type ProviderHandle,
  type ProviderHealth,
  type ProviderJson,
  type ProviderPolicy,
  type ProviderRequest,
  type StoredCredential,
  SVC_PUBLISHER_KEY,
} from '@svc/core';

/** What a finishing request to a {@link TestProvider} says it proved (the browser's body). */
export interface TestProof {
  /** The nonce `begin` answered: a request without it is refused, as a real ceremony would be. */
  readonly nonce: string;
  readonly subject: string;
  /** Default: the provider's first allowed issuer. */
  readonly issuer?: string;
  readonly claims?: Readonly<Record<string, ProviderClaim>>;
  /** A passkey's signature counter: present, the answer carries a credential with it. */
  readonly counter?: number;
  /** The credential id the request names (`credentialIdOf`), as a passkey assertion does. */
  readonly credentialId?: string;
}

/** A provider handle for tests: see {@link createTestProvider}. */
export interface TestProvider extends ProviderHandle {
  /** Every context `begin` and `finish` received, and the stored credential `finish` was handed. */
  readonly calls: { readonly begin: ProviderContext[]; readonly finish: { ctx: ProviderContext; credential: StoredCredential | null }[] };
  /** Makes the body of a finishing request from `begin`'s reply. */
  proof(reply: ProviderBeginResult['reply'], proof: Omit<TestProof, 'nonce'>): ProviderRequest;
}

/**
 * An in-memory provider behind the `ProviderHandle` boundary, for tests of what the service does
 * with provider answers: `begin` answers a fresh nonce (kept as the flow's state), `finish`
 * refuses a request without that nonce and otherwise answers exactly the identity the request
 * claims: an honest provider when the test says true things, a hostile one when it does not.
 * `kind` is `oidc` unless given (`webauthn` makes it the bundled passkey package, so its sessions' `amr` is a passkey's).
 *
 * @example
 * const provider = createTestProvider({ name: 'corp', policy: { allowedIssuers: ['https://login.example.com'] } });
 * const { flowId, reply } = await startProviderFlow(deps, { provider, realm: 'application', intent: 'signin', principal: null, origin });
 * await finishProviderFlow(deps, { provider, flowId, request: provider.proof(reply, { subject: 'ann' }), origin, principal: null });
 */
export function createTestProvider(
  options: { readonly name?: string; readonly kind?: string; readonly policy?: Partial<Omit<ProviderPolicy, 'name'>> } = {},
): TestProvider {
  const name = options.name ?? 'corp';
  const policy: ProviderPolicy = {
    name,
    realms: ['application'],
    allowedIssuers: ['https://login.example.com'],
    jit: { enabled: false, emailDomains: [] },
    ...options.policy,
  };
  const calls: TestProvider['calls'] = { begin: [], finish: [] };
  return {
    policy,
    // A `webauthn` one stands for the bundled passkey package signed by the project key, the
    // only provider whose sessions say `hwk` (core's providerAmr); any other is a third party's.
    packageName: options.kind === 'webauthn' ? BUNDLED_PASSKEY_PACKAGE : `svc-provider-${name}`,
    packageVersion: '0.1.0',
    signer: 'test',
    signerKey: options.kind === 'webauthn' ? SVC_PUBLISHER_KEY : null,
    kind: options.kind ?? 'oidc',
    calls,
    async begin(ctx: ProviderContext): Promise<ProviderBeginResult> {
      calls.begin.push(ctx);
      const nonce = randomBytes(16).toString('hex');
      return { state: { nonce }, reply: { kind: 'json', body: { nonce } } };
    },
    async credentialIdOf(request: ProviderRequest): Promise<string | null> {
      const body = request.body as { credentialId?: unknown } | null;
      return typeof body?.credentialId === 'string' ? body.credentialId : null;
    },
    async finish(ctx, input): Promise<ProviderFinishResult> {
      calls.finish.push({ ctx, credential: input.credential });
      const state = input.state as { nonce?: unknown };
      const proof = input.request.body as unknown as TestProof;
      if (typeof state.nonce !== 'string' || proof?.nonce !== state.nonce) throw new Error('the request does not answer this ceremony');
      const issuer = proof.issuer ?? policy.allowedIssuers[0] ?? 'https://login.example.com';
      return {
        identity: { issuer, subject: proof.subject, claims: proof.claims ?? {} },
        credential:
          proof.counter === undefined ? null : { id: proof.subject, data: { publicKey: `pk-of-${proof.subject}` }, counter: proof.counter },
      };
    },
    async health(): Promise<ProviderHealth> {
      return { status: 'ok' };
    },
    async close(): Promise<void> {},
    proof(reply, proof) {
      if (reply.kind !== 'json') throw new TypeError('the test provider answers json');
      const nonce = (reply.body as { nonce: string }).nonce;
      return { query: {}, body: { ...proof, nonce } as unknown as ProviderJson };
    },
  };
}

// A provider for the gateway's browser tests, in-process: it implements the ProviderHandle
// contract (core's provider.ts) with a redirect ceremony, as an OIDC provider would, whose
// "identity provider" sends the browser straight back to the callback with a code bound to the
// flow's state. The real confined host and the real providers are other packages; at the
// gateway's boundary only the contract matters.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import {
  BUNDLED_PASSKEY_PACKAGE,
  type ProviderClaim,
  type ProviderContext,
  type ProviderHandle,
  type ProviderJson,
  type ProviderPolicy,
  SVC_PUBLISHER_KEY,
} from '@svc/core';

/** Options of {@link testRedirectProvider}. */
export interface TestProviderOptions {
  /** The module alias (route segment). Default `testidp`. */
  readonly name?: string;
  /** The external subject every ceremony proves. Default `alice`. */
  readonly subject?: string;
  readonly issuer?: string;
  readonly jit?: boolean;
  readonly kind?: string;
  /** The claims every ceremony proves. Default: alice@example.com, verified. */
  readonly claims?: Readonly<Record<string, ProviderClaim>>;
  /** Policy settings beyond the defaults (JIT users, a groups claim, linking by email). */
  readonly policy?: Partial<Omit<ProviderPolicy, 'name' | 'realms' | 'allowedIssuers'>>;
}

/** The test provider and what it was asked. */
export interface TestProvider extends ProviderHandle {
  /** Every context `begin` was given. */
  readonly begun: ProviderContext[];
  /** How many `finish` calls it answered with an identity. */
  readonly finished: () => number;
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * A redirect-kind provider: `begin` keeps a random code as its state and redirects to
 * `<callbackUrl>?code=<code>`; `finish` proves `subject` at `issuer` when the callback's code is
 * the state's, and refuses anything else.
 *
 * @example
 * const provider = testRedirectProvider({ subject: 'alice' });
 * await startGatewayHarness({ gateway: { providers: [provider] } });
 */
export function testRedirectProvider(opts: TestProviderOptions = {}): TestProvider {
  const issuer = opts.issuer ?? 'https://idp.test';
  const policy: ProviderPolicy = {
    name: opts.name ?? 'testidp',
    realms: ['application'],
    allowedIssuers: [issuer],
    jit: { enabled: opts.jit ?? true, emailDomains: [] },
    ...opts.policy,
  };
  const begun: ProviderContext[] = [];
  let finished = 0;
  return {
    policy,
    // A `webauthn` one stands for the bundled passkey package signed by the project key (core's providerAmr).
    packageName: opts.kind === 'webauthn' ? BUNDLED_PASSKEY_PACKAGE : 'svc-test-provider',
    packageVersion: '1.0.0',
    signer: 'test',
    signerKey: opts.kind === 'webauthn' ? SVC_PUBLISHER_KEY : null,
    kind: opts.kind ?? 'oidc',
    begun,
    finished: () => finished,
    async begin(ctx) {
      begun.push(ctx);
      const code = randomBytes(16).toString('base64url');
      return { state: { code }, reply: { kind: 'redirect', location: `${ctx.callbackUrl}?code=${code}` } };
    },
    async credentialIdOf() {
      return null;
    },
    async finish(_ctx, input) {
      const expected = (input.state as { code?: ProviderJson } | null)?.code;
      const presented = input.request.query.code;
      if (typeof expected !== 'string' || presented === undefined || !sameText(expected, presented)) {
        throw new Error('the code does not match the flow');
      }
      finished++;
      return {
        identity: { issuer, subject: opts.subject ?? 'alice', claims: opts.claims ?? { email: 'alice@example.com', email_verified: true } },
        credential: null,
      };
    },
    async health() {
      return { status: 'ok' };
    },
    async close() {},
  };
}

/**
 * A JSON-kind provider (a ceremony the page's script drives, as a passkey's): `begin` answers
 * `{"challenge"}` as JSON; `finish` proves `subject` when the request body echoes the challenge.
 *
 * @example
 * const provider = testJsonProvider({ name: 'testjson' });
 */
export function testJsonProvider(opts: TestProviderOptions = {}): TestProvider {
  const base = testRedirectProvider({ name: 'testjson', kind: 'test-json', ...opts });
  return {
    ...base,
    async begin(ctx) {
      base.begun.push(ctx);
      const challenge = randomBytes(16).toString('base64url');
      return { state: { code: challenge }, reply: { kind: 'json', body: { challenge } } };
    },
    async finish(ctx, input) {
      const body = input.request.body as { challenge?: unknown } | null;
      const code = typeof body?.challenge === 'string' ? body.challenge : '';
      return base.finish(ctx, { ...input, request: { query: { code }, body: null } });
    },
  };
}

/**
 * A `webauthn`-kind provider for the sign-in page's passkey script in a real Chromium with a
 * virtual authenticator: `begin` answers creation options (signup, link) or request options
 * (signin) as WebAuthn JSON for the RP id `localhost`; `finish` checks the client data (type,
 * challenge, origin) and proves the credential id. It does not verify the authenticator's
 * signature: that is the real WebAuthn provider's job (another package); what this proves is
 * the page's ceremony and the gateway's routes.
 *
 * @example
 * const provider = testWebauthnProvider();
 */
export function testWebauthnProvider(): TestProvider {
  const base = testRedirectProvider({ name: 'passkey', kind: 'webauthn', issuer: 'webauthn:localhost', jit: true });
  let finished = 0;
  return {
    ...base,
    finished: () => finished,
    async begin(ctx) {
      base.begun.push(ctx);
      const challenge = randomBytes(32).toString('base64url');
      const body =
        ctx.intent === 'signin'
          ? { challenge, rpId: 'localhost', userVerification: 'required', timeout: 60_000 }
          : {
              challenge,
              rp: { id: 'localhost', name: 'svc test' },
              user: { id: randomBytes(16).toString('base64url'), name: 'frank', displayName: 'Frank' },
              pubKeyCredParams: [
                { type: 'public-key', alg: -7 },
                { type: 'public-key', alg: -257 },
              ],
              authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
              timeout: 60_000,
            };
      return { state: { challenge, intent: ctx.intent }, reply: { kind: 'json', body } };
    },
    async credentialIdOf(request) {
      const id = (request.body as { id?: unknown } | null)?.id;
      return typeof id === 'string' ? id : null;
    },
    async finish(ctx, input) {
      const state = input.state as { challenge: string; intent: string };
      const body = input.request.body as { id?: unknown; response?: { clientDataJSON?: unknown } } | null;
      if (typeof body?.id !== 'string' || typeof body.response?.clientDataJSON !== 'string') throw new Error('not a credential');
      const client = JSON.parse(Buffer.from(body.response.clientDataJSON, 'base64url').toString('utf8')) as Record<string, unknown>;
      const type = state.intent === 'signin' ? 'webauthn.get' : 'webauthn.create';
      if (client.type !== type || client.challenge !== state.challenge || client.origin !== ctx.origin)
        throw new Error('client data mismatch');
      if (state.intent === 'signin' && input.credential?.id !== body.id) throw new Error('unknown credential');
      finished++;
      return {
        identity: { issuer: 'webauthn:localhost', subject: body.id, claims: {} },
        credential: { id: body.id, data: { test: true }, counter: null },
      };
    },
  };
}

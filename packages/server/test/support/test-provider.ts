// A provider for the gateway's browser tests, in-process: it implements the ProviderHandle
// contract (core's provider.ts) with a redirect ceremony, as an OIDC provider would, whose
// "identity provider" sends the browser straight back to the callback with a code bound to the
// flow's state. The real confined host and the real providers are other packages; at the
// gateway's boundary only the contract matters.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { ProviderContext, ProviderHandle, ProviderJson, ProviderPolicy } from '@svc/core';

/** Options of {@link testRedirectProvider}. */
export interface TestProviderOptions {
  /** The module alias (route segment). Default `testidp`. */
  readonly name?: string;
  /** The external subject every ceremony proves. Default `alice`. */
  readonly subject?: string;
  readonly issuer?: string;
  readonly jit?: boolean;
  readonly kind?: string;
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
  };
  const begun: ProviderContext[] = [];
  let finished = 0;
  return {
    policy,
    packageName: 'svc-test-provider',
    packageVersion: '1.0.0',
    signer: 'test',
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
        identity: { issuer, subject: opts.subject ?? 'alice', claims: { email: 'alice@example.com', email_verified: true } },
        credential: null,
      };
    },
    async health() {
      return { status: 'ok' };
    },
    async close() {},
  };
}

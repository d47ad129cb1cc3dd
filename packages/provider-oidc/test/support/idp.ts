// A real OpenID Provider for the tests: panva's oidc-provider (the certified reference
// implementation), on 127.0.0.1 port 0, configured as a company's external IdP would be: one
// registered confidential client, PKCE required, its own login and consent pages (the
// library's dev interactions), ID tokens signed with a key made for this instance.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

/** A running test IdP. */
export interface TestIdp {
  /** Its issuer identifier, e.g. `http://127.0.0.1:43123`. */
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** The port it listens on (equal to the issuer's unless it sits behind a proxy). */
  readonly port: number;
  /** How many times its discovery document was fetched. */
  discoveryRequests(): number;
  /** How many times its userinfo endpoint was called. */
  userinfoRequests(): number;
  close(): Promise<void>;
}

/** Who signs in: the login name typed into the IdP's form is the `sub`. */
export function claimsOf(sub: string): { email: string; email_verified: boolean; name: string } {
  return { email: `${sub}@corp.example`, email_verified: true, name: `User ${sub}` };
}

/**
 * Starts an oidc-provider instance. `host` lets a test put a second IdP on another loopback
 * name (`localhost`) so the two never share the browser's cookies, or state an issuer that
 * differs from the address it is reached at.
 *
 * @example
 * const idp = await startIdp({ redirectUris: [harness.callbackUrl] });
 * try { ... } finally { await idp.close(); }
 */
export async function startIdp(options: {
  readonly redirectUris: readonly string[];
  readonly host?: string;
  readonly tokenEndpointAuth?: 'client_secret_basic' | 'client_secret_post';
  readonly clientSecret?: string;
  /** The issuer identifier when the IdP is reached through a proxy (the proxy's origin). */
  readonly issuer?: string;
  /** Put email and name in the ID token itself, as many IdPs do, rather than only in userinfo (oidc-provider's default for the code flow). */
  readonly claimsInIdToken?: boolean;
  /** What the IdP says about `sub` at each sign-in (default {@link claimsOf}): a test may change it between sign-ins. */
  readonly claims?: (sub: string) => Record<string, unknown>;
}): Promise<TestIdp> {
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(503).end();
  const server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const issuer = options.issuer ?? `http://${options.host ?? '127.0.0.1'}:${port}`;
  const clientId = `svc-${randomBytes(4).toString('hex')}`;
  const clientSecret = options.clientSecret ?? randomBytes(24).toString('base64url');
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [...options.redirectUris],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: options.tokenEndpointAuth ?? 'client_secret_basic',
        id_token_signed_response_alg: 'ES256',
      },
    ],
    jwks: { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: `k-${port}`, alg: 'ES256', use: 'sig' }] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    pkce: { required: () => true },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    async findAccount(_ctx, sub) {
      return { accountId: sub, claims: async () => ({ sub, ...(options.claims ?? claimsOf)(sub) }) };
    },
    features: { devInteractions: { enabled: true } },
    conformIdTokenClaims: options.claimsInIdToken !== true,
  });
  let discoveries = 0;
  let userinfos = 0;
  const callback = provider.callback();
  handler = (req, res) => {
    if (req.url === '/.well-known/openid-configuration') discoveries += 1;
    if (req.url === '/me') userinfos += 1;
    callback(req, res);
  };
  return {
    issuer,
    clientId,
    clientSecret,
    port,
    discoveryRequests: () => discoveries,
    userinfoRequests: () => userinfos,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

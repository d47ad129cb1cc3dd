// An attacker's issuer for the mix-up tests: its discovery document names itself as the
// issuer but points every endpoint at another, real OpenID Provider, whose ID tokens then
// carry that provider's `iss`. It also stops advertising RFC 9207's `iss` callback parameter,
// so the only thing left to catch the mix-up is the ID token's own `iss` claim.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A running mix-up issuer. */
export interface MixUpIssuer {
  readonly issuer: string;
  close(): Promise<void>;
}

/**
 * Serves a rewritten copy of `realIssuer`'s discovery document on 127.0.0.1 port 0.
 *
 * @example
 * const fake = await startMixUpIssuer(idp.issuer);
 */
export async function startMixUpIssuer(realIssuer: string): Promise<MixUpIssuer> {
  const server = createServer((req, res) => {
    if (req.url !== '/.well-known/openid-configuration') return void res.writeHead(404).end();
    fetch(`${realIssuer}/.well-known/openid-configuration`)
      .then((r) => r.json() as Promise<Record<string, unknown>>)
      .then((doc) => {
        const { authorization_response_iss_parameter_supported: _dropped, ...rest } = doc;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...rest, issuer }));
      })
      .catch(() => res.writeHead(502).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

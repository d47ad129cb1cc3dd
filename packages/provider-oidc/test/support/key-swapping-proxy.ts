// An attacker between the service and a real OpenID Provider who answers the JWKS request with
// keys of its own (same `kid`, another public key): every ID token the real IdP signs then
// fails its signature check, as a forged one would. Everything else is forwarded unchanged.
import { generateKeyPairSync } from 'node:crypto';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A running proxy; `targetPort` is set once the IdP behind it listens. */
export interface KeySwappingProxy {
  readonly origin: string;
  targetPort: number;
  close(): Promise<void>;
}

/**
 * Starts the proxy on 127.0.0.1 port 0, swapping the keys of the JWKS served at `jwksPath`.
 *
 * @example
 * const proxy = await startKeySwappingProxy('/jwks');
 * const idp = await startIdp({ redirectUris, issuer: proxy.origin });
 * proxy.targetPort = idp.port;
 */
export async function startKeySwappingProxy(jwksPath: string): Promise<KeySwappingProxy> {
  const forged = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
  const server = createServer((req, res) => {
    const upstream = request(
      { host: '127.0.0.1', port: proxy.targetPort, method: req.method, path: req.url, headers: req.headers },
      (up) => {
        if (req.url !== jwksPath) {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
          return;
        }
        const chunks: Buffer[] = [];
        up.on('data', (c: Buffer) => chunks.push(c));
        up.on('end', () => {
          const jwks = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { keys: Record<string, unknown>[] };
          const keys = jwks.keys.map((k) => ({ ...k, x: forged.x, y: forged.y }));
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys }));
        });
      },
    );
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxy: KeySwappingProxy = {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    targetPort: 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return proxy;
}

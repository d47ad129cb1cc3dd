// The peers of bench/peers.ts, each run as its own process by it:
// `node bench/peer-servers.mjs oidc-provider|better-auth`. Plain JavaScript run by plain node, as
// svc's own server is (its built bin): under a TypeScript loader (tsx) every dynamic import
// better-auth makes per request would go through the loader's hooks and every stack trace
// through source maps, a cost no deployment of it pays. Each listens on 127.0.0.1 port 0 and
// prints `<name> listening on <origin>` when ready. The client ids and secrets, the user's email
// and password come from the environment (PEER_*), set by bench/peers.ts.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A node:http server on 127.0.0.1 port 0 whose handler is set once its origin is known. */
async function listen() {
  let handler = (_req, res) => res.writeHead(503).end();
  const server = createServer((req, res) => handler(req, res));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(0));
  return {
    origin,
    serve: (h) => {
      handler = h;
    },
  };
}

/**
 * panva's oidc-provider with its default in-memory adapter and two confidential clients
 * (client_secret_basic): one (PEER_APP_ID) gets opaque access tokens by the client credentials grant,
 * the other (PEER_RS_ID, a resource server) introspects them.
 */
async function serveOidcProvider() {
  const { default: Provider } = await import('oidc-provider');
  const { origin, serve } = await listen();
  // Its signing key (RS256, the default algorithm), though introspection signs nothing.
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const provider = new Provider(origin, {
    clients: [
      {
        client_id: process.env.PEER_APP_ID,
        client_secret: process.env.PEER_APP_SECRET,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_basic',
      },
      {
        client_id: process.env.PEER_RS_ID,
        client_secret: process.env.PEER_RS_SECRET,
        grant_types: [],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    jwks: { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: 'bench', alg: 'RS256', use: 'sig' }] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    features: { clientCredentials: { enabled: true }, introspection: { enabled: true }, devInteractions: { enabled: false } },
  });
  serve(provider.callback());
  return origin;
}

/**
 * better-auth on a fresh better-sqlite3 database (its migrations run programmatically), email
 * and password sign-in enabled, one user signed up; everything else its defaults. Served by
 * node:http through better-auth's own node handler.
 */
async function serveBetterAuth() {
  const [{ betterAuth }, { getMigrations }, { toNodeHandler }, { default: Database }] = await Promise.all([
    import('better-auth'),
    import('better-auth/db/migration'),
    import('better-auth/node'),
    import('better-sqlite3'),
  ]);
  const { origin, serve } = await listen();
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-better-auth-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const auth = betterAuth({
    baseURL: origin,
    secret: randomBytes(32).toString('hex'),
    database: new Database(join(dir, 'auth.db')),
    emailAndPassword: { enabled: true },
  });
  await (await getMigrations(auth.options)).runMigrations();
  await auth.api.signUpEmail({ body: { email: process.env.PEER_EMAIL, password: process.env.PEER_PASSWORD, name: 'Bench User' } });
  serve(toNodeHandler(auth));
  return origin;
}

const which = process.argv[2];
if (which === 'oidc-provider' || which === 'better-auth') {
  const origin = which === 'oidc-provider' ? await serveOidcProvider() : await serveBetterAuth();
  process.stdout.write(`${which} listening on ${origin}\n`);
} else if (which !== undefined) {
  throw new Error('usage: node bench/peer-servers.mjs oidc-provider|better-auth');
}

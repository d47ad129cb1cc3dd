// The gateway in upstream mode for the benchmark, in its own process like `svc serve` runs it:
// the real gateway app (strip, application-realm bearer checked against a real SQLite control
// store, attach) in front of `<upstream URL>`, on the project of bench/gateway-project.ts (its
// application-realm access token goes to `<token file>`).
//
//   node --import tsx bench/gateway-server.ts <upstream URL> <plain|signed|routes-N> <token file>
//
// `plain`: the identity headers are the principal's fields. `signed`: the gateway's own
// identity headers ({@link svcIdentityHeaders}: the fields plus `Svc-Assertion`, an EdDSA JWS
// signed per request by {@link createAssertionSigner} over a fresh key set), as `svc serve` sends.
// `routes-N`: `plain`, behind `:svc/app-routes` with N routes to the upstream (see
// {@link benchRoutes}); requests name `Host: tools.bench.test`.
import { generateKeyPairSync } from 'node:crypto';
import { type AppRoute, firstAssertionKeySet, type Principal } from '@svc/core';
import { buildGatewayApp, createAssertionSigner, svcIdentityHeaders, type UpstreamIdentityHeaders, upstreamAttach } from '@svc/server';
import { openGatewayProject } from './gateway-project.js';
import { serveUntilSignalled } from './serve.js';

const [upstream, mode, tokenFile] = process.argv.slice(2);
const routeCount = mode?.startsWith('routes-') ? Number(mode.slice('routes-'.length)) : null;
if (
  upstream === undefined ||
  (mode !== 'plain' && mode !== 'signed' && !(routeCount !== null && routeCount >= 1)) ||
  tokenFile === undefined
) {
  throw new Error('usage: gateway-server.ts <upstream URL> <plain|signed|routes-N> <token file>');
}
const project = await openGatewayProject(tokenFile);
const { deps } = project;

const fields = (p: Principal): Record<string, string> => ({
  'svc-subject': p.subject,
  'svc-realm': p.realm,
  'svc-session': p.session,
  'svc-device': p.device,
});

let identityHeaders: UpstreamIdentityHeaders;
if (mode !== 'signed') identityHeaders = (_req, p) => (p === null ? {} : fields(p));
else {
  const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  const keys = firstAssertionKeySet({ x: jwk.x as string, d: jwk.d as string }, deps.clock.now() - 1000);
  const signer = createAssertionSigner({
    keys: () => keys,
    issuer: project.nodeId,
    audience: new URL(upstream).origin,
    clock: deps.clock,
    random: deps.random,
  });
  identityHeaders = svcIdentityHeaders(signer);
}

/**
 * N routes to `to`: the last one `http://tools.bench.test` (origin only), the one the benchmark
 * requests (`GET /`, the bare route's path); of the others, half are path prefixes of that same
 * host (`http://tools.bench.test/app<i>/*`), half have hosts of their own (`http://app<i>.bench.test`).
 */
function benchRoutes(n: number, to: string): AppRoute[] {
  const out: AppRoute[] = [];
  for (let i = 0; i < n; i++) {
    const own = i !== n - 1 && i % 2 === 1;
    const origin = own ? `http://app${i}.bench.test` : 'http://tools.bench.test';
    const prefix = own || i === n - 1 ? null : `/app${i}/*`;
    out.push({ index: i, from: `${origin}${prefix ?? ''}`, origin, prefix, to, publicPaths: [], requirement: null, audience: to });
  }
  return out;
}

const app = await buildGatewayApp({
  deps,
  logger: false,
  policy: {
    publicPaths: [],
    identityHeaders: [],
    requirements: [],
    ...(routeCount === null ? {} : { routes: benchRoutes(routeCount, new URL(upstream).origin) }),
  },
  trustedProxies: [],
  attach: upstreamAttach({ upstream: routeCount === null ? new URL(upstream) : 'routes', identityHeaders }),
});
await serveUntilSignalled(app, project, `gateway (${mode})`);

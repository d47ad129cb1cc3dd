// The gateway in upstream mode for the benchmark, in its own process like `svc serve` runs it:
// the real gateway app (strip, application-realm bearer checked against a real SQLite control
// store, attach) in front of `<upstream URL>`, on the project of bench/gateway-project.ts (its
// application-realm access token goes to `<token file>`).
//
//   node --import tsx bench/gateway-server.ts <upstream URL> <plain|signed> <token file>
//
// `plain`: the identity headers are the principal's fields. `signed`: the gateway's own
// identity headers ({@link svcIdentityHeaders}: the fields plus `Svc-Assertion`, an EdDSA JWS
// signed per request by {@link createAssertionSigner} over a fresh key set), as `svc serve` sends.
import { generateKeyPairSync } from 'node:crypto';
import { firstAssertionKeySet, type Principal } from '@svc/core';
import { buildGatewayApp, createAssertionSigner, svcIdentityHeaders, type UpstreamIdentityHeaders, upstreamAttach } from '@svc/server';
import { openGatewayProject, serveUntilSignalled } from './gateway-project.js';

const [upstream, mode, tokenFile] = process.argv.slice(2);
if (upstream === undefined || (mode !== 'plain' && mode !== 'signed') || tokenFile === undefined) {
  throw new Error('usage: gateway-server.ts <upstream URL> <plain|signed> <token file>');
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
if (mode === 'plain') identityHeaders = (_req, p) => (p === null ? {} : fields(p));
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

const app = await buildGatewayApp({
  deps,
  logger: false,
  policy: { publicPaths: [], identityHeaders: [], requirements: [] },
  trustedProxies: [],
  attach: upstreamAttach({ upstream: new URL(upstream), identityHeaders }),
});
await serveUntilSignalled(app, project, `gateway (${mode})`);

// The gateway in upstream mode for the benchmark, in its own process like `svc serve` runs it:
// the real gateway app (strip, application-realm bearer checked against a real SQLite control
// store, attach) in front of `<upstream URL>`. It makes its own project in a temporary directory
// and one application-realm session, and writes that session's access token to `<token file>`
// (0600; never to its output).
//
//   node --import tsx bench/gateway-server.ts <upstream URL> <plain|signed> <token file>
//
// `plain`: the identity headers are the principal's fields. `signed`: plus `Svc-Assertion`, a
// compact EdDSA JWS over the contract's claims signed per request with node:crypto: a stand-in
// for the gateway's assertion signer (on the gw-assert branch, not on this one), doing the same
// work per request: the claims with a random `jti` and the request binding (`htm`, `htu`), JSON,
// base64url, one Ed25519 signature with a prepared KeyObject.
import { generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  type AuthDeps,
  authenticate,
  completePairing,
  createChallenge,
  createSession,
  DEFAULT_AUTH_SETTINGS,
  enrollWithBootstrapToken,
  issueBootstrapToken,
  type Principal,
  pairingProofString,
  preparePairing,
  publicKeyHexOf,
  silentLogger,
} from '@svc/core';
import { buildGatewayApp, type UpstreamIdentityHeaders, upstreamAttach } from '@svc/server';
import type { FastifyRequest } from 'fastify';
import { openSqliteStore } from 'svc-store-sqlite';

const [upstream, mode, tokenFile] = process.argv.slice(2);
if (upstream === undefined || (mode !== 'plain' && mode !== 'signed') || tokenFile === undefined) {
  throw new Error('usage: gateway-server.ts <upstream URL> <plain|signed> <token file>');
}

const dir = mkdtempSync(join(tmpdir(), 'svc-bench-gateway-'));
const store = await openSqliteStore({ file: join(dir, 'control.db') });
const deps: AuthDeps = {
  store,
  clock: { now: () => Date.now(), monotonic: () => performance.now() },
  random: (n) => randomBytes(n),
  log: silentLogger,
  projectId: 'prj_01KAQ0000000BENCHGATEWAY0',
  settings: Object.freeze({ ...DEFAULT_AUTH_SETTINGS }),
};
await store.initProject({ projectId: deps.projectId, createdAt: deps.clock.now() });

const signHex = (key: KeyObject, message: string) => sign(null, Buffer.from(message, 'utf8'), key).toString('hex');

/** Signs `key` in to `realm` through the core use cases; returns the access token. */
async function signIn(key: { publicKey: KeyObject; privateKey: KeyObject }, realm: 'management' | 'application'): Promise<string> {
  const publicKey = publicKeyHexOf(key.publicKey);
  const chl = await createChallenge(deps, { publicKey, realm });
  const pair = await createSession(deps, { challengeId: chl.id, signature: signHex(key.privateKey, chl.challenge), realm });
  return pair.access_token;
}

// An admin, who pairs one application device; that device signs in to the application realm.
const admin = generateKeyPairSync('ed25519');
const bootstrap = await issueBootstrapToken(deps, { recovery: false });
await enrollWithBootstrapToken(deps, { bootstrapToken: bootstrap.token, publicKey: publicKeyHexOf(admin.publicKey) });
const adminPrincipal = await authenticate(deps, { token: await signIn(admin, 'management'), realm: 'management' });
const appKey = generateKeyPairSync('ed25519');
const appPub = publicKeyHexOf(appKey.publicKey);
const intent = await preparePairing(deps, { principal: adminPrincipal, realm: 'application', publicKey: appPub });
const nodeId = 'bench-node';
await completePairing(deps, {
  nodeId,
  intentId: intent.intent_id,
  code: intent.code,
  publicKey: appPub,
  signature: signHex(appKey.privateKey, pairingProofString({ nodeId, intentId: intent.intent_id, publicKey: appPub })),
});
writeFileSync(tokenFile, await signIn(appKey, 'application'), { mode: 0o600 });

const fields = (p: Principal): Record<string, string> => ({
  'svc-subject': p.subject,
  'svc-realm': p.realm,
  'svc-session': p.session,
  'svc-device': p.device,
});

const assertionKey = generateKeyPairSync('ed25519').privateKey;
const b64url = (s: string | Buffer) => Buffer.from(s).toString('base64url');
const jwsHeader = b64url(JSON.stringify({ alg: 'EdDSA', typ: 'svc-assertion+jwt', kid: 'bench-key-1' }));
const audience = new URL(upstream).origin;

/** A compact JWS with the contract's claims, bound to the request, signed now. */
function assertion(p: Principal, req: FastifyRequest): string {
  const iat = Math.floor(Date.now() / 1000);
  const claims = {
    iss: nodeId,
    aud: audience,
    sub: p.subject,
    sid: p.session,
    dev: p.device,
    realm: p.realm,
    claims: p.claims,
    iat,
    exp: iat + 60,
    jti: randomBytes(16).toString('base64url'),
    htm: req.method,
    htu: `${req.protocol}://${req.host}${req.url.split('?')[0]}`,
  };
  const input = `${jwsHeader}.${b64url(JSON.stringify(claims))}`;
  return `${input}.${sign(null, Buffer.from(input), assertionKey).toString('base64url')}`;
}

const identityHeaders: UpstreamIdentityHeaders =
  mode === 'plain'
    ? (_req, p) => (p === null ? {} : fields(p))
    : (req, p) => (p === null ? {} : { ...fields(p), 'svc-assertion': assertion(p, req) });

const app = await buildGatewayApp({
  deps,
  logger: false,
  policy: { publicPaths: [], identityHeaders: [], requirements: [] },
  trustedProxies: [],
  attach: upstreamAttach({ upstream: new URL(upstream), identityHeaders }),
});
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`gateway (${mode}) listening on ${address}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(
    signal,
    () =>
      void app
        .close()
        .then(() => store.close())
        .finally(() => {
          rmSync(dir, { recursive: true, force: true });
          process.exit(0);
        }),
  );
}

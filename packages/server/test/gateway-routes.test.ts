// Many applications behind one gateway (`:svc/app-routes`, #28 part 1), fast tier: the gateway
// (memory store, on 127.0.0.1: the proxy needs a real socket) in front of two real echo upstreams on 127.0.0.1, routed by the Host
// each request names. Per route: its upstream, its :public, its :require, its assertion audience
// and htu; a request for no route is 404 and reaches neither upstream. The same through
// `svc serve` over real HTTP: cli/test/real/app-routes-serve.test.ts.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { verifySvcAssertion } from '@svc/assertion';
import { type AssertionKeySetJson, firstAssertionKeySet, updateUser } from '@svc/core';
import { type EdnValue, validateProjectConfig } from '@svc/core/config';
import { WebSocket } from 'ws';
import { type AssertionSigner, createAssertionSigner, svcIdentityHeaders, upstreamAttach } from '../src/index.js';
import {
  type GatewayHarness,
  type GatewayTarget,
  pairApplicationDevice,
  startGateway,
  startGatewayHarness,
} from './support/gateway-harness.js';
import type { Pair } from './support/harness.js';
import { hostRequest } from './support/host-request.js';
import { startEchoUpstream, type Upstream } from './support/upstream-harness.js';

const m = (entries: Record<string, EdnValue>): EdnValue => new Map(Object.entries(entries));
const kw = (keyword: string) => ({ keyword });

/** The routes as `project.edn` gives them, read by the real config reader. */
function routesFor(grafana: Upstream, wiki: Upstream, subject: string) {
  const edn = m({
    ':svc/project': 'demo',
    ':svc/packages': m({ 'svc-store-sqlite': m({ ':version': '0.1.0', ':sha256': 'a'.repeat(64) }) }),
    ':svc/modules': m({
      ':store': m({ ':package': 'svc-store-sqlite', ':activate': [kw('svc/store')] }),
      ':auth': m({ ':module': kw('svc/auth'), ':config': m({ ':auth/store': kw('store') }) }),
    }),
    ':svc/app-routes': [
      m({ ':from': 'http://grafana.test', ':to': grafana.url.origin, ':public': ['/api/health'], ':require': m({ ':groups': ['ops'] }) }),
      m({
        ':from': 'http://tools.test/wiki/*',
        ':to': wiki.url.origin,
        ':public': ['/wiki/pub/*'],
        ':require': m({ ':subjects': [subject] }),
        ':audience': 'wiki',
      }),
    ],
  });
  return validateProjectConfig(edn, { file: 'p/project.edn' }).app.routes ?? [];
}

const keySet = (): AssertionKeySetJson => {
  const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  return firstAssertionKeySet({ x: jwk.x as string, d: jwk.d as string }, Date.now() - 3600_000);
};

describe(':svc/app-routes: two applications behind one gateway, chosen by Host', () => {
  let h: GatewayHarness;
  let target: GatewayTarget;
  let grafana: Upstream;
  let wiki: Upstream;
  let signer: AssertionSigner;
  let pair: Pair;
  let subject: string;
  const actor = { via: 'cli', subject: null, session: null } as const;
  const at = (
    host: string,
    method: string,
    path: string,
    opts: { token?: string; headers?: Record<string, string>; body?: unknown } = {},
  ) => hostRequest(target.gatewayBase, host, method, path, opts);
  const seen = () => [...grafana.requests, ...wiki.requests];
  /** Every gateway built, closed after (a failed setup included). */
  const gateways: { close(): Promise<unknown> }[] = [];

  before(async () => {
    grafana = await startEchoUpstream();
    wiki = await startEchoUpstream();
    const set = keySet();
    signer = createAssertionSigner({ keys: () => set, issuer: 'NODE-A', audience: 'unused-default', clock: { now: Date.now } });
    // The subject is known only once a device is paired: the gateway is built after, with the real routes.
    const base = await startGatewayHarness({ socket: false, store: 'memory' });
    gateways.push({ close: () => base.close() });
    const device = await pairApplicationDevice(base);
    await base.gateway.close();
    const routes = routesFor(grafana, wiki, 'sub_01JD0000000000000000000000');
    const g = await startGateway(base, {
      socket: true,
      policy: { publicPaths: [], identityHeaders: [], requirements: [], routes },
      attach: upstreamAttach({ upstream: 'routes', identityHeaders: svcIdentityHeaders(signer) }),
    });
    gateways.unshift(g.app);
    target = { gatewayBase: g.base, injected: false };
    // Signing in happens at the gateway's own /.svc/ routes, on any route's origin.
    const challenge = await at('grafana.test', 'POST', '/.svc/auth/v1/challenges', { body: { public_key: device.key.publicKeyHex } });
    assert.equal(challenge.status, 201, challenge.text);
    const session = await at('tools.test', 'POST', '/.svc/auth/v1/sessions', {
      body: { challenge_id: challenge.body.challenge_id, signature: device.key.signHex(challenge.body.challenge) },
    });
    assert.equal(session.status, 201, session.text);
    pair = session.body;
    const me = await at('tools.test', 'GET', '/.svc/auth/v1/me', { token: pair.access_token });
    assert.equal(me.status, 200, me.text);
    subject = me.body.subject;
    // Now the wiki's :subjects names this user: rebuild the gateway with it.
    await g.app.close();
    const real = await startGateway(base, {
      socket: true,
      policy: { publicPaths: [], identityHeaders: [], requirements: [], routes: routesFor(grafana, wiki, subject) },
      attach: upstreamAttach({ upstream: 'routes', identityHeaders: svcIdentityHeaders(signer) }),
    });
    gateways.unshift(real.app);
    h = { ...base, gateway: real.app, gatewayBase: real.base, gatewayPort: real.port };
    target = { gatewayBase: real.base, injected: false };
    grafana.requests.length = 0;
    wiki.requests.length = 0;
  });
  after(async () => {
    for (const g of gateways) await g.close().catch(() => undefined);
    await grafana?.close();
    await wiki?.close();
  });

  const verify = (token: string, audience: string, url: string) =>
    verifySvcAssertion(token, { jwks: signer.jwks() as never, audience, request: { method: 'GET', url: new URL(url) } });

  test('unknown host: 404 not_found on every path, /.svc/ included, and neither upstream sees anything', async () => {
    for (const [host, path] of [
      ['evil.test', '/'],
      ['evil.test', '/api/health'],
      ['evil.test', '/.svc/jwks.json'],
      ['127.0.0.1', '/wiki/x'],
      ['tools.test', '/'],
      ['tools.test', '/wiki-private'],
      ['grafana.test:8080', '/api/health'],
    ] as const) {
      const r = await at(host, 'GET', path, { token: pair.access_token });
      assert.equal(r.status, 404, `${host}${path}: ${r.text}`);
      assert.equal(r.body.code, 'not_found', `${host}${path}`);
    }
    const page = await at('evil.test', 'GET', '/', { headers: { accept: 'text/html' } });
    assert.equal(page.status, 404);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/, 'a browser gets the refusal page');
    assert.deepEqual(seen(), [], 'no upstream saw any of them');
  });

  test("each route's :public path goes to its own upstream without a principal; its other paths need one", async () => {
    const health = await at('grafana.test', 'GET', '/api/health');
    assert.equal(health.status, 200, health.text);
    assert.equal(health.body.headers.host, grafana.url.host, 'proxied to grafana');
    assert.equal('svc-subject' in health.body.headers, false);
    assert.equal((await at('tools.test', 'GET', '/wiki/pub/logo.svg')).status, 200);
    assert.equal(wiki.requests.at(-1), '/wiki/pub/logo.svg');
    assert.equal((await at('grafana.test', 'GET', '/d/abc')).status, 401);
    assert.equal((await at('tools.test', 'GET', '/wiki/Main')).status, 401);
    assert.equal((await at('grafana.test', 'GET', '/wiki/pub/logo.svg')).status, 401, "another route's public path is not public here");
    assert.deepEqual(grafana.requests, ['/api/health']);
  });

  test("each route's :require: grafana wants the ops group, the wiki this subject; one sign-in serves both", async () => {
    await updateUser(h.deps, { subject, attributes: { groups: [] }, actor, source: 'operator' });
    const reached = grafana.requests.length;
    const refused = await at('grafana.test', 'GET', '/d/abc', { token: pair.access_token });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.code, 'insufficient_claims');
    assert.equal(grafana.requests.length, reached, 'the refused request never reached grafana');
    const allowed = await at('tools.test', 'GET', '/wiki/Main', { token: pair.access_token });
    assert.equal(allowed.status, 200, allowed.text);
    assert.equal(allowed.body.headers.host, wiki.url.host);
    await updateUser(h.deps, { subject, attributes: { groups: ['ops'] }, actor, source: 'operator' });
    const now = await at('grafana.test', 'GET', '/d/abc', { token: pair.access_token });
    assert.equal(now.status, 200, now.text);
    assert.equal(now.body.headers.host, grafana.url.host);
    assert.deepEqual(grafana.requests.slice(reached), ['/d/abc'], 'only the allowed one reached grafana');
  });

  test("each route's assertion: its own audience (default the :to origin) and htu from its :from origin", async () => {
    await updateUser(h.deps, { subject, attributes: { groups: ['ops'] }, actor, source: 'operator' });
    const g = await at('GRAFANA.test', 'GET', '/d/abc?x=1', { token: pair.access_token });
    assert.equal(g.status, 200, g.text);
    const gw = await verify(g.body.headers['svc-assertion'], grafana.url.origin, 'http://grafana.test/d/abc');
    assert.equal(gw.subject, subject);
    await assert.rejects(verify(g.body.headers['svc-assertion'], 'wiki', 'http://grafana.test/d/abc'), /audience/i);
    const w = await at('tools.test', 'GET', '/wiki/Main', { token: pair.access_token });
    assert.equal(w.status, 200, w.text);
    await verify(w.body.headers['svc-assertion'], 'wiki', 'http://tools.test/wiki/Main');
    await assert.rejects(verify(w.body.headers['svc-assertion'], wiki.url.origin, 'http://tools.test/wiki/Main'), /audience/i);
  });

  test('attack: X-Forwarded-Host from an untrusted peer does not choose the route', async () => {
    const before = seen().length;
    const r = await at('evil.test', 'GET', '/api/health', { headers: { 'x-forwarded-host': 'grafana.test' } });
    assert.equal(r.status, 404, r.text);
    const s = await at('grafana.test', 'GET', '/wiki/pub/logo.svg', { headers: { 'x-forwarded-host': 'tools.test' } });
    assert.equal(s.status, 401, 'still grafana (its policy), not the wiki');
    assert.equal(seen().length, before);
  });

  test("a websocket goes to its route's upstream; one for no route is refused before any upstream", async () => {
    /** Opens a websocket naming `host`; resolves with its first message, or the refusal's status. */
    const open = (host: string, path: string) =>
      new Promise<{ message?: string; status?: number }>((resolve, reject) => {
        const ws = new WebSocket(`${target.gatewayBase.replace('http', 'ws')}${path}`, {
          headers: { host, authorization: `Bearer ${pair.access_token}` },
          handshakeTimeout: 10_000,
        });
        ws.once('message', (data) => {
          resolve({ message: String(data) });
          ws.close();
        });
        ws.once('unexpected-response', (_req, res) => {
          resolve({ status: res.statusCode ?? 0 });
          res.resume();
        });
        ws.once('error', reject);
      });
    const upgrades = grafana.upgrades.length + wiki.upgrades.length;
    const refused = await open('evil.test', '/wiki/ws');
    assert.equal(refused.status, 404);
    assert.equal(grafana.upgrades.length + wiki.upgrades.length, upgrades, 'no upstream saw the refused upgrade');
    const ok = await open('tools.test', '/wiki/ws');
    assert.ok(ok.message !== undefined, `opened: ${JSON.stringify(ok)}`);
    const handshake = JSON.parse(ok.message).handshake;
    assert.equal(wiki.upgrades.length, 1, 'the wiki got it');
    assert.equal(grafana.upgrades.length, 0);
    const who = await verify(handshake['svc-assertion'], 'wiki', 'http://tools.test/wiki/ws');
    assert.equal(who.subject, subject);
  });

  test('attack: path prefix boundary and percent-encoding: /wiki-private is no route, /%77iki/ is the wiki', async () => {
    assert.equal((await at('tools.test', 'GET', '/wiki-private/x', { token: pair.access_token })).status, 404);
    const encoded = await at('tools.test', 'GET', '/%77iki/pub/x');
    assert.equal(encoded.status, 200, 'public: the decoded /wiki/pub/x');
    assert.equal(wiki.requests.at(-1), '/%77iki/pub/x', 'sent on as received');
    assert.equal((await at('tools.test', 'GET', '/wiki%2fpub/x')).status, 400, 'an encoded slash is refused');
  });
});

describe(':svc/app-routes behind a trusted proxy', () => {
  test('X-Forwarded-Host and -Proto from a trusted proxy choose the route (the origin the browser used)', async () => {
    const up = await startEchoUpstream();
    const h = await startGatewayHarness({ socket: false, store: 'memory' });
    try {
      const routes =
        validateProjectConfig(
          m({
            ':svc/project': 'demo',
            ':svc/packages': m({ 'svc-store-sqlite': m({ ':version': '0.1.0', ':sha256': 'a'.repeat(64) }) }),
            ':svc/modules': m({
              ':store': m({ ':package': 'svc-store-sqlite', ':activate': [kw('svc/store')] }),
              ':auth': m({ ':module': kw('svc/auth'), ':config': m({ ':auth/store': kw('store') }) }),
            }),
            ':svc/app-routes': [m({ ':from': 'https://grafana.example.com', ':to': up.url.origin, ':public': ['/*'] })],
          }),
          { file: 'p/project.edn' },
        ).app.routes ?? [];
      const g = await startGateway(h, {
        socket: true,
        trustedProxies: ['127.0.0.1'],
        policy: { publicPaths: [], identityHeaders: [], requirements: [], routes },
        attach: upstreamAttach({ upstream: 'routes', identityHeaders: () => ({}) }),
      });
      const via = ({ host, ...headers }: Record<string, string>) => hostRequest(g.base, host as string, 'GET', '/x', { headers });
      assert.equal(
        (await via({ host: '10.0.0.5:8080', 'x-forwarded-host': 'grafana.example.com', 'x-forwarded-proto': 'https' })).status,
        200,
      );
      assert.equal(
        (await via({ host: 'grafana.example.com', 'x-forwarded-proto': 'http' })).status,
        404,
        'the browser used plain http: another origin',
      );
      assert.equal((await via({ host: 'grafana.example.com' })).status, 404, 'no X-Forwarded-Proto: the connection is plain http');
      assert.deepEqual(up.requests, ['/x']);
      await g.app.close();
    } finally {
      await h.close();
      await up.close();
    }
  });
});

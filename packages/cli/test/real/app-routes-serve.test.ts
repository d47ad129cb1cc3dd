// Many applications behind one gateway, end to end (#28 part 1): the installed `svc serve` with
// `:svc/app-routes` naming two real upstream HTTP servers on 127.0.0.1, reached over real HTTP
// with different `Host` headers. Per route: its upstream, its :public, its :require (an
// operator's PATCH of the user through the management API changes the answer at the next
// request), its assertion audience and htu (verified against the gateway's JWK Set); a Host no
// route names is 404 and neither upstream sees anything; one sign-in serves both routes.
// `svc app routes` lists the same routes from project.edn. Fast tier: server/test/gateway-routes.test.ts.
import assert from 'node:assert/strict';
import { createPublicKey, verify } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { hostRequest } from '../../../server/test/support/host-request.js';
import { startEchoUpstream, type Upstream } from '../../../server/test/support/upstream-harness.js';
import { cleanEnv, freePort, type StartedProcess, startUntilReady, tempDir, withTimeout } from '../helpers.js';
import {
  enrolledProjectInProcess as enrolledProject,
  keygenInProcess as keygen,
  svcInProcess,
  svcOkInProcess as svcOk,
} from '../in-process.js';
import { currentCredentials } from '../support/credentials-file.js';
import { pairComplete, type ServedUrls, signWith } from '../support/serve-all.js';

// biome-ignore lint/suspicious/noExplicitAny: JSON answers are inspected field by field
type Json = any;

/** Sends `request` as exact bytes and returns everything the server wrote before it closed (bounded). */
function rawExchange(port: number, request: string): Promise<string> {
  return withTimeout(
    new Promise<string>((resolve, reject) => {
      const socket = connect({ port, host: '127.0.0.1' }, () => socket.write(request));
      const parts: Buffer[] = [];
      socket.on('data', (c: Buffer) => parts.push(c));
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(parts).toString('utf8')));
    }),
    'the gateway to answer the raw request and close',
    10_000,
  );
}

/**
 * The claims of a `Svc-Assertion` whose Ed25519 signature verifies under the key of the JWK Set
 * its `kid` names (as an application checks it), or a failed assertion.
 */
function verifiedClaims(token: string, jwks: Json): Json {
  const [h = '', p = '', s = ''] = token.split('.');
  const header = JSON.parse(Buffer.from(h, 'base64url').toString());
  assert.equal(header.alg, 'EdDSA');
  assert.equal(header.typ, 'svc-assertion+jwt');
  const jwk = jwks.keys.find((k: Json) => k.kid === header.kid);
  assert.ok(jwk, `the JWK Set publishes ${header.kid}`);
  const ok = verify(null, Buffer.from(`${h}.${p}`), createPublicKey({ key: jwk, format: 'jwk' }), Buffer.from(s, 'base64url'));
  assert.equal(ok, true, 'the signature verifies');
  return JSON.parse(Buffer.from(p, 'base64url').toString());
}

describe('svc serve with :svc/app-routes: two applications behind one gateway', () => {
  const tmp = tempDir('svc-app-routes-test-');
  const adminHome = join(tmp.dir, 'admin-home');
  const adminEnv = cleanEnv({ HOME: adminHome, SVC_CREDENTIALS: join(adminHome, 'credentials.json') });
  const deviceEnv = cleanEnv({ HOME: join(tmp.dir, 'device-home'), SVC_CREDENTIALS: join(tmp.dir, 'device-home', 'c.json') });
  let server: StartedProcess<ServedUrls>;
  let grafana: Upstream;
  let wiki: Upstream;
  let port: number;
  let dir: string;
  let subject: string;
  let token: string;
  const GRAFANA = () => `grafana.test:${port}`;
  const TOOLS = () => `tools.test:${port}`;
  const at = (host: string, method: string, path: string, opts: { token?: string; body?: unknown } = {}) =>
    hostRequest(server.ready.app, host, method, path, opts);
  const seen = () => [...grafana.requests, ...wiki.requests];
  const adminToken = () => currentCredentials(join(adminHome, 'credentials.json')).access_token as string;
  async function patchUser(body: Json): Promise<void> {
    const res = await fetch(`${server.ready.management}/v1/auth/users/${subject}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${adminToken()}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200, await res.text());
  }
  /** The gateway's JWK Set, as an application behind the route fetches it (from its own origin). */
  async function jwks(host: string): Promise<Json> {
    const r = await at(host, 'GET', '/.svc/jwks.json');
    assert.equal(r.status, 200, r.text);
    return r.body;
  }

  before(async () => {
    grafana = await startEchoUpstream();
    wiki = await startEchoUpstream();
    const p = await enrolledProject(tmp.dir, { env: adminEnv });
    dir = p.dir;
    port = await freePort();
    const edn = join(dir, 'project.edn');
    writeFileSync(
      edn,
      readFileSync(edn, 'utf8').replace(
        /^\{/,
        `{:svc/app-routes [{:from "http://grafana.test:${port}" :to "${grafana.url.origin}"
                    :public ["/api/health"] :require {:groups ["ops"]}}
                   {:from "http://tools.test:${port}/wiki/*" :to "${wiki.url.origin}"
                    :require {:email-domains ["example.com"]} :audience "wiki"}]
 `,
      ),
    );
    // The gateway's address is part of every route's origin: it listens on the port chosen above.
    server = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', `127.0.0.1:${port}`, dir],
      (out) => {
        const m = /management API listening on (http:\/\/\S+)\n/.exec(out);
        const n = /node surface listening on (http:\/\/\S+)\n/.exec(out);
        const a = /application gateway listening on (http:\/\/\S+)\n/.exec(out);
        return m && n && a ? { management: m[1] as string, node: n[1] as string, app: a[1] as string } : null;
      },
      { env: adminEnv },
    );
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.ready.management], { env: adminEnv });
    const nodeId = ((await (await fetch(`${server.ready.node}/.well-known/edge`)).json()) as { node_id: string }).node_id;
    const keyFile = join(tmp.dir, 'app-device.pem');
    const pub = await keygen(keyFile, { env: deviceEnv });
    const prepared = JSON.parse(
      (
        await svcOk(
          ['auth', 'pair', '--node-url', server.ready.node, '--realm', 'application', '--device-key', pub, '--name', 'ada', '--json'],
          { env: adminEnv },
        )
      ).stdout,
    );
    const paired = await pairComplete({ nodeUrl: server.ready.node, nodeId, prepared, keyFile, env: deviceEnv });
    subject = paired.device.subject;
    // One sign-in, at the gateway's own routes on the grafana origin.
    const challenge = await at(GRAFANA(), 'POST', '/.svc/auth/v1/challenges', { body: { public_key: pub } });
    assert.equal(challenge.status, 201, challenge.text);
    const session = await at(GRAFANA(), 'POST', '/.svc/auth/v1/sessions', {
      body: { challenge_id: challenge.body.challenge_id, signature: signWith(keyFile, challenge.body.challenge) },
    });
    assert.equal(session.status, 201, session.text);
    token = session.body.access_token;
  });
  after(async () => {
    await server?.stop('SIGKILL');
    await grafana?.close();
    await wiki?.close();
    tmp.cleanup();
  });

  test('svc app routes lists both routes with their public paths, requirements and audience', async () => {
    const json = JSON.parse((await svcOk(['app', 'routes', dir, '--json'], { env: adminEnv })).stdout);
    assert.equal(json.mode, 'routes');
    assert.deepEqual(
      json.routes.map((r: Json) => [
        r.from,
        r.to,
        r.public,
        r.requirements.map((q: Json) => [q.path, q.groups, q.email_domains]),
        r.audience,
      ]),
      [
        [`http://grafana.test:${port}`, grafana.url.origin, ['/api/health'], [['/*', ['ops'], null]], grafana.url.origin],
        [`http://tools.test:${port}/wiki/*`, wiki.url.origin, [], [['/wiki/*', null, ['example.com']]], 'wiki'],
      ],
    );
    const text = (await svcOk(['app', 'routes', dir], { env: adminEnv })).stdout;
    assert.match(text, /^FROM\s+TO\s+PUBLIC\s+REQUIRES\s+AUDIENCE$/m);
    assert.match(text, new RegExp(`^http://grafana\\.test:${port}\\s+${grafana.url.origin}\\s+/api/health\\s+a member of ops\\s+`, 'm'));
    assert.match(text, /tools\.test:\d+\/wiki\/\*.*an email at example\.com, verified\s+wiki$/m);
    const missing = await svcInProcess(['app', 'routes', join(tmp.dir, 'nowhere')], { env: adminEnv });
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no project at/);
  });

  test('a Host no route names is 404 on every path, /.svc/ included, and neither upstream sees anything', async () => {
    for (const host of ['evil.test', `evil.test:${port}`, `127.0.0.1:${port}`, `grafana.test:${port + 1}`, `grafana.test`]) {
      for (const path of ['/', '/api/health', '/.svc/jwks.json', '/wiki/x']) {
        const r = await at(host, 'GET', path, { token });
        assert.equal(r.status, 404, `${host}${path}: ${r.text}`);
        assert.equal(r.body.code, 'not_found');
      }
    }
    assert.equal((await at(TOOLS(), 'GET', '/', { token })).status, 404, 'tools.test has only /wiki/*');
    assert.equal((await at(TOOLS(), 'GET', '/wiki-private', { token })).status, 404, 'the prefix ends at a segment boundary');
    assert.deepEqual(seen(), []);
  });

  test('attack: an absolute-form request target naming a route host, sent with an unknown Host, reaches nothing', async () => {
    const answer = await rawExchange(port, `GET http://${GRAFANA()}/api/health HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n`);
    assert.match(answer, /^HTTP\/1\.1 400 /);
    const other = await rawExchange(port, `GET http://evil.test/api/health HTTP/1.1\r\nHost: ${GRAFANA()}\r\nConnection: close\r\n\r\n`);
    assert.match(other, /^HTTP\/1\.1 400 /);
    assert.deepEqual(seen(), []);
  });

  test("grafana's route: its public path needs nobody; the rest needs the ops group; its assertion is for grafana", async () => {
    const health = await at(GRAFANA(), 'GET', '/api/health');
    assert.equal(health.status, 200, health.text);
    assert.equal(health.body.headers.host, grafana.url.host);
    assert.equal((await at(GRAFANA(), 'GET', '/d/abc')).status, 401);
    const refused = await at(GRAFANA(), 'GET', '/d/abc', { token });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.code, 'insufficient_claims');
    assert.deepEqual(grafana.requests, ['/api/health'], 'the refused requests never reached grafana');
    await patchUser({ groups: ['ops'] });
    const ok = await at(GRAFANA(), 'GET', '/d/abc?from=now', { token });
    assert.equal(ok.status, 200, ok.text);
    const who = verifiedClaims(ok.body.headers['svc-assertion'], await jwks(GRAFANA()));
    assert.equal(who.aud, grafana.url.origin, "grafana's audience: its :to origin");
    assert.equal(who.htu, `http://${GRAFANA()}/d/abc`, 'bound to the route origin and path, without the query');
    assert.equal(who.sub, subject);
    assert.deepEqual(wiki.requests, []);
  });

  test("the wiki's route: a verified email at example.com is needed; its assertion has audience wiki and its own htu", async () => {
    await patchUser({ email: 'ada@other.example', email_verified: true });
    assert.equal((await at(TOOLS(), 'GET', '/wiki/Main', { token })).status, 403);
    await patchUser({ email: 'ada@example.com', email_verified: true });
    const ok = await at(TOOLS(), 'GET', '/wiki/Main', { token });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.headers.host, wiki.url.host);
    const assertion = ok.body.headers['svc-assertion'];
    const who = verifiedClaims(assertion, await jwks(TOOLS()));
    assert.equal(who.aud, 'wiki', "the wiki's :audience, never grafana's");
    assert.equal(who.htu, `http://${TOOLS()}/wiki/Main`);
    assert.equal(who.email, 'ada@example.com');
    assert.deepEqual(wiki.requests, ['/wiki/Main']);
  });
});

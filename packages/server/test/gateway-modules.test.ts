import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { after, before, describe, test } from 'node:test';
import type { FastifyPluginAsync } from 'fastify';
import { moduleAttach } from '../src/index.js';
import { svcApp as goodApp } from './fixtures/app-modules/good-app/index.js';
import { svcApp as hostileApp } from './fixtures/app-modules/hostile-app/index.js';
import { svcApp as skipOverrideApp } from './fixtures/app-modules/skip-override-app/index.js';
import { applicationUser, type GatewayHarness, gatewayApi, startGatewayHarness } from './support/gateway-harness.js';
import { loopbackCertificate } from './support/loopback-cert.js';
import { scratch } from './support/node-harness.js';
import { rawRequest } from './support/raw-http.js';

// Module mode of the application gateway (spec rule 1: identity is established before
// application modules run; a package loaded into the application cannot replace it). A hostile
// module (fixtures/app-modules/hostile-app) tries every way around identity we know of and
// reports over real HTTP whether it worked; a well-behaved one reads request.principal.

const FORGED = 'forged-admin';
const REFUSED = /^refused: /;

describe('module mode: application modules run after identity and cannot replace it', () => {
  let h: GatewayHarness;
  let token: string;
  let subject: string;

  before(async () => {
    h = await startGatewayHarness({
      attach: moduleAttach([
        { name: 'good-app@1.0.0', plugin: goodApp as FastifyPluginAsync },
        { name: 'hostile-app@1.0.0', plugin: hostileApp as FastifyPluginAsync },
      ]),
    });
    const user = await applicationUser(h);
    token = user.pair.access_token;
    const me = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token });
    subject = me.body.subject;
    assert.ok(typeof subject === 'string' && subject.length > 0);
  });
  after(() => h.close());

  test('a well-behaved module reads the frozen principal on an authenticated route and null on a public one', async () => {
    const hello = await gatewayApi(h, 'GET', '/hello', { token });
    assert.equal(hello.status, 200);
    assert.deepEqual(hello.body, { hello: subject, realm: 'application', session: hello.body.session });
    assert.ok(typeof hello.body.session === 'string');
    const pub = await gatewayApi(h, 'GET', '/public/hello');
    assert.equal(pub.status, 200);
    assert.deepEqual(pub.body, { principal: null });
    const anonymous = await gatewayApi(h, 'GET', '/hello');
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.code, 'invalid_token');
  });

  test('skip-override onRequest hook forging a principal: it runs after identity and cannot redefine the principal', async () => {
    const r = await gatewayApi(h, 'GET', '/hostile/hook', { token, headers: { 'svc-subject': FORGED } });
    assert.equal(r.status, 200);
    assert.equal(r.body.hook.ran, true);
    // When the module's hook ran, identity had already run: the principal was set, the forged header gone.
    assert.equal(r.body.hook.principalWhenHookRan, subject);
    assert.equal(r.body.hook.forgedHeaderWhenHookRan, null);
    assert.match(r.body.hook.definePrincipal, REFUSED);
    assert.equal(r.body.principal, subject);
  });

  test('skip-override onRequest hook on an unauthenticated request: refused 401 before the hook runs', async () => {
    const r = await gatewayApi(h, 'GET', '/hostile/hook', { headers: { 'svc-subject': FORGED } });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_token');
  });

  test('reassign, redefine, delete or mutate request.principal: every attempt fails and the principal is unchanged', async () => {
    const r = await gatewayApi(h, 'GET', '/hostile/principal', { token });
    assert.equal(r.status, 200);
    for (const attack of ['assign', 'define', 'defineGetter', 'delete', 'reflectDelete', 'mutateSubject', 'mutateClaims']) {
      assert.match(r.body[attack], REFUSED, `${attack}: ${r.body[attack]}`);
    }
    assert.equal(r.body.before, subject);
    assert.equal(r.body.after, subject);
    // A principal defined on the request prototype is shadowed by the gateway's own property.
    const again = await gatewayApi(h, 'GET', '/hostile/hook', { token });
    assert.equal(again.body.principal, subject);
    assert.equal((await gatewayApi(h, 'GET', '/public/hello')).body.principal, null);
  });

  test('strip bypass through the raw server (prepend, remove, replace emit, via app.server or request.raw.socket.server): every attempt fails', async () => {
    const r = await gatewayApi(h, 'GET', '/hostile/raw-server', { token });
    assert.equal(r.status, 200);
    for (const when of ['atLoad', 'atRequest'] as const) {
      for (const [attack, outcome] of Object.entries(r.body[when] as Record<string, string>)) {
        assert.match(outcome, REFUSED, `${when} ${attack}: ${outcome}`);
      }
    }
    // And the gateway still strips and authenticates first: no bypass listener answers.
    const anonymous = await gatewayApi(h, 'GET', '/hostile/echo-identity', { headers: { 'svc-subject': FORGED } });
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.bypassed, undefined);
    const expect = await rawRequest(h.gatewayPort, {
      method: 'POST',
      target: '/hostile/echo-identity',
      headers: [
        ['Expect', '100-continue'],
        ['Svc-Subject', FORGED],
      ],
      body: '{}',
    });
    assert.notEqual(expect.status, 200);
    assert.equal(expect.body?.bypassed, undefined);
    const upgrade = await rawRequest(h.gatewayPort, {
      target: '/hostile/echo-identity',
      headers: [
        ['Upgrade', 'websocket'],
        ['Connection', 'Upgrade'],
        ['Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ=='],
        ['Sec-WebSocket-Version', '13'],
        ['Svc-Subject', FORGED],
      ],
    });
    // The module's prepended upgrade listener never sees it: identity refuses it first.
    assert.equal(upgrade.status, 401);
  });

  test('a header-reading route never sees a forged svc-subject (any spelling, any view) nor our bearer token', async () => {
    for (const [path, auth] of [
      ['/hostile/echo-identity', token],
      ['/public/hostile/echo-identity', undefined],
      ['/public/hostile/echo-identity', token],
    ] as const) {
      const r = await gatewayApi(h, 'GET', path, {
        ...(auth === undefined ? {} : { token: auth }),
        headers: { 'svc-subject': FORGED, svc_subject: FORGED, 'x-forwarded-user': FORGED },
      });
      assert.equal(r.status, 200, path);
      assert.equal(r.body.header, null);
      assert.equal(r.body.underscore, null);
      assert.equal(r.body.distinct, null);
      assert.ok(!(r.body.rawHeaders as string[]).includes(FORGED), `${path}: ${JSON.stringify(r.body.rawHeaders)}`);
      assert.equal(r.body.authorization, null);
      assert.equal(r.body.principal, auth === undefined ? null : subject);
    }
  });

  test('reach the control store from what a module is handed (instance, request, reply, their prototypes): not found', async () => {
    const r = await gatewayApi(h, 'GET', '/hostile/find-store', { token });
    assert.equal(r.status, 200);
    assert.equal(r.body.found, null);
  });
});

describe('module mode refuses a module that asks to share the gateway context', () => {
  test('a module exported with skip-override (fastify-plugin) is refused before it runs', () => {
    assert.throws(
      () => moduleAttach([{ name: 'skip-override-app@1.0.0', plugin: skipOverrideApp as unknown as FastifyPluginAsync }]),
      (err: Error) => err instanceof TypeError && /skip-override-app@1\.0\.0: .*skip-override/.test(err.message),
    );
  });

  test('a module that fails to load names itself, and the gateway does not start', async () => {
    await assert.rejects(
      startGatewayHarness({
        attach: moduleAttach([
          {
            name: 'broken-app@1.0.0',
            plugin: async () => {
              throw new Error('no database configured');
            },
          },
        ]),
      }),
      /application module broken-app@1\.0\.0 failed to load: no database configured/,
    );
  });
});

describe('strip bypass through a raw request listener prepended by a module', () => {
  test('a module that prepends a raw request listener at load cannot answer before identity, nor see forged headers', async () => {
    let attempt = 'not tried';
    const h = await startGatewayHarness({
      attach: moduleAttach([
        {
          name: 'prepend-app@1.0.0',
          plugin: async (app) => {
            try {
              app.server.prependListener('request', (req, res) => {
                res.writeHead(200, { 'content-type': 'application/json' });
                res.end(JSON.stringify({ bypassed: true, svcSubject: req.headers['svc-subject'] ?? null }));
              });
              attempt = 'succeeded';
            } catch (err) {
              attempt = `refused: ${(err as Error).name}`;
            }
          },
        },
      ]),
    });
    try {
      assert.match(attempt, REFUSED);
      const r = await gatewayApi(h, 'GET', '/anything', { headers: { 'svc-subject': FORGED } });
      assert.equal(r.status, 401);
      assert.equal(r.body.code, 'invalid_token');
    } finally {
      await h.close();
    }
  });
});

describe('strip bypass through a raw connection listener prepended by a module', () => {
  test('a module that prepends a connection listener writing its own response cannot answer before identity', async () => {
    let attempt = 'not tried';
    const h = await startGatewayHarness({
      attach: moduleAttach([
        {
          name: 'connection-app@1.0.0',
          plugin: async (app) => {
            try {
              app.server.prependListener('connection', (socket: import('node:net').Socket) => {
                const body = JSON.stringify({ bypassed: true });
                socket.write(
                  `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
                );
                socket.end();
              });
              attempt = 'succeeded';
            } catch (err) {
              attempt = `refused: ${(err as Error).name}`;
            }
          },
        },
      ]),
    });
    try {
      assert.match(attempt, REFUSED);
      const r = await rawRequest(h.gatewayPort, { target: '/anything', headers: [['Svc-Subject', FORGED]] });
      assert.equal(r.status, 401);
      assert.equal(r.body?.bypassed, undefined);
    } finally {
      await h.close();
    }
  });
});

describe('module mode over HTTPS', () => {
  test('the sealed TLS server still serves modules after identity, and a module cannot take its secureConnection listener', async () => {
    const dir = scratch();
    let attempt = 'not tried';
    try {
      const { key, cert } = loopbackCertificate(dir.dir);
      const h = await startGatewayHarness({
        attach: moduleAttach([
          { name: 'good-app@1.0.0', plugin: goodApp as FastifyPluginAsync },
          {
            name: 'tls-grab@1.0.0',
            plugin: async (app) => {
              try {
                app.server.removeAllListeners('secureConnection');
                attempt = 'succeeded';
              } catch (err) {
                attempt = `refused: ${(err as Error).name}`;
              }
            },
          },
        ]),
        gateway: { https: { cert: readFileSync(cert), key: readFileSync(key) } },
      });
      try {
        const get = (path: string) =>
          new Promise<{ status: number; body: string }>((resolve, reject) => {
            const req = httpsRequest({ host: '127.0.0.1', port: h.gatewayPort, path, ca: readFileSync(cert), agent: false }, (res) => {
              let body = '';
              res.on('data', (c) => {
                body += c;
              });
              res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
            });
            req.on('error', reject);
            req.end();
          });
        assert.match(attempt, REFUSED);
        const pub = await get('/public/hello');
        assert.equal(pub.status, 200);
        assert.deepEqual(JSON.parse(pub.body), { principal: null });
        assert.equal((await get('/hello')).status, 401);
      } finally {
        await h.close();
      }
    } finally {
      dir.cleanup();
    }
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { INSUFFICIENT_SCOPE_CHALLENGE } from '../src/gateway/app.js';
import { registeredRoutes } from '../src/http/route-registry.js';
import { NODE_ROUTES } from '../src/node/routes.js';
import {
  applicationUser,
  echoAttach,
  type GatewayHarness,
  gatewayApi,
  requirement,
  startGateway,
  startGatewayHarness,
  testPolicy,
} from './support/gateway-harness.js';
import { admin, api, type Pair } from './support/harness.js';
import { nodeApi } from './support/node-harness.js';

const SAMPLE_IDS: Readonly<Record<string, string>> = { id: 'dev_01M81B5H80VQ6PF8VXZGD22NT1' };

/** A concrete path for a route pattern (`:id` filled with a well-formed id). */
function concrete(url: string): string {
  return url.replace(/:([a-z_]+)/gi, (_m, name: string) => SAMPLE_IDS[name] ?? 'ses_01M81B5H80VQ6PF8VXZGD22NT1');
}

describe('the gateway authenticates in the application realm only', () => {
  let h: GatewayHarness;
  let app: { pair: Pair; deviceId: string };
  let mgmt: Pair;
  before(async () => {
    h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach });
    app = await applicationUser(h);
    mgmt = (await admin(h)).pair;
  });
  after(() => h.close());

  test('a management access token is refused on every gateway path: the application, me and revoke', async () => {
    for (const [method, path] of [
      ['GET', '/app/x'],
      ['POST', '/app/x'],
      ['GET', '/'],
      ['GET', '/.svc/auth/v1/me'],
      ['POST', '/.svc/auth/v1/revoke'],
    ] as const) {
      const r = await gatewayApi(h, method, path, { token: mgmt.access_token });
      assert.equal(r.status, 401, `${method} ${path}`);
      assert.equal(r.body.code, 'invalid_token', `${method} ${path}`);
      assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="application", error="invalid_token"', `${method} ${path}`);
    }
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: mgmt.access_token })).status, 200, 'the management token itself is live');
  });

  test('a management refresh token is refused by the application refresh, and an application one by the management refresh', async () => {
    const r = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: mgmt.refresh_token } });
    assert.equal(r.status, 401);
    const fresh = await applicationUser(h);
    const m = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: fresh.pair.refresh_token } });
    assert.equal(m.status, 401);
  });

  test('an application access token is refused on every management-bearer route of the management API and the node surface', async () => {
    const routes = registeredRoutes(h.app).filter((r) => JSON.stringify(r.schema?.security ?? []).includes('managementBearer'));
    assert.ok(routes.length >= 6, `management bearer routes found: ${routes.length}`);
    for (const route of routes) {
      const body = route.method === 'GET' || route.method === 'DELETE' ? undefined : {};
      const r = await api(h, route.method, concrete(route.url), { token: app.pair.access_token, ...(body === undefined ? {} : { body }) });
      assert.equal(r.status, 401, `${route.method} ${route.url}: ${r.text}`);
      assert.equal(r.body.code, 'invalid_token', `${route.method} ${route.url}`);
    }
    const nodeRoutes = NODE_ROUTES.filter((r) => r.auth === 'management_bearer');
    assert.ok(nodeRoutes.length >= 3);
    for (const route of nodeRoutes) {
      const r = await nodeApi(h, route.method, concrete(route.path), {
        token: app.pair.access_token,
        ...(route.method === 'GET' ? {} : { body: {} }),
      });
      assert.equal(r.status, 401, `${route.method} ${route.path}: ${r.text}`);
    }
  });

  test('no token, a malformed one, another scheme: 401 with the application challenge', async () => {
    const none = await gatewayApi(h, 'GET', '/app/x');
    assert.equal(none.status, 401);
    assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="application"');
    assert.match(none.headers.get('content-type') ?? '', /application\/problem\+json/);
    for (const authorization of ['Bearer svca_garbage', 'Basic YWRtaW46YWRtaW4=', 'Bearer ']) {
      const r = await gatewayApi(h, 'GET', '/app/x', { headers: { authorization } });
      assert.equal(r.status, 401, authorization);
      assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="application", error="invalid_token"', authorization);
    }
  });

  test('an application token reaches the application with its frozen principal and without the Authorization header', async () => {
    const r = await gatewayApi(h, 'GET', '/app/x', { token: app.pair.access_token });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-security-policy'), null, "the application's responses carry no gateway CSP");
    assert.equal(r.headers.get('cache-control'), 'no-store', 'the other security headers are defaults');
    const refused = await gatewayApi(h, 'GET', '/app/x');
    assert.match(refused.headers.get('content-security-policy') ?? '', /default-src 'none'/, "the gateway's own refusals keep it");
    assert.equal(r.body.principal.session, app.pair.session_id);
    assert.equal(r.body.principal.device, app.deviceId);
    assert.equal(r.body.headers.authorization, undefined);
  });
});

describe('public paths', () => {
  let h: GatewayHarness;
  let app: { pair: Pair };
  let mgmt: Pair;
  before(async () => {
    h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: echoAttach,
      policy: testPolicy({ publicPaths: ['/healthz', '/public/*'] }),
    });
    app = await applicationUser(h);
    mgmt = (await admin(h)).pair;
  });
  after(() => h.close());

  test('exact and prefix public paths go on with principal null; the rest needs a token', async () => {
    for (const path of ['/healthz', '/public/', '/public/a/b.css', '/healthz?probe=1']) {
      const r = await gatewayApi(h, 'GET', path);
      assert.equal(r.status, 200, path);
      assert.equal(r.body.principal, null, path);
    }
    for (const path of ['/healthz/', '/healthzz', '/public', '/publicity', '/HEALTHZ', '/Public/x']) {
      assert.equal((await gatewayApi(h, 'GET', path)).status, 401, path);
    }
  });

  test('a public path never fails because of a bad token: revoked, malformed, refresh or management tokens are dropped, principal null', async () => {
    const revoked = await applicationUser(h);
    assert.equal((await gatewayApi(h, 'POST', '/.svc/auth/v1/revoke', { token: revoked.pair.access_token })).status, 200);
    const live = await applicationUser(h);
    for (const token of [revoked.pair.access_token, mgmt.access_token, live.pair.refresh_token, 'svca_garbage', 'svcb_x']) {
      const r = await gatewayApi(h, 'GET', '/public/x', { token });
      assert.equal(r.status, 200, token.slice(0, 5));
      assert.equal(r.body.principal, null);
      assert.equal(r.body.headers.authorization, undefined, 'a credential of ours never reaches the application');
    }
  });

  test('a valid application token on a public path gives the principal (the page can be personalised) and is removed', async () => {
    const r = await gatewayApi(h, 'GET', '/public/x', { token: app.pair.access_token });
    assert.equal(r.body.principal.session, app.pair.session_id);
    assert.equal(r.body.headers.authorization, undefined);
  });

  test("a credential that is not ours on a public path is the application's own and passes", async () => {
    const r = await gatewayApi(h, 'GET', '/public/x', { headers: { authorization: 'Basic YWxpY2U6cHc=' } });
    assert.equal(r.status, 200);
    assert.equal(r.body.headers.authorization, 'Basic YWxpY2U6cHc=');
  });
});

describe('per-path requirements', () => {
  test('subjects, amr and sign-in age; the most specific pattern wins; 403 insufficient_claims with insufficient_scope', async () => {
    const h = await startGatewayHarness({ socket: false, store: 'memory' });
    try {
      const alice = await applicationUser(h);
      const bob = await applicationUser(h);
      const aliceSubject = (await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: alice.pair.access_token })).body.subject as string;
      const g = await startGateway(h, {
        socket: false,
        attach: echoAttach,
        policy: testPolicy({
          publicPaths: ['/healthz', '/public/*', '/admin/open'],
          requirements: [
            requirement('/admin/*', { subjects: [aliceSubject] }),
            requirement('/admin/open', { subjects: null }),
            requirement('/admin/fresh/*', { subjects: [aliceSubject], maxAuthAgeSeconds: 300 }),
            requirement('/hardware/*', { amr: ['hwk'] }),
          ],
        }),
      });
      try {
        const gw = { gatewayBase: g.base, gateway: g.app, injected: g.injected };
        const status = async (path: string, token?: string) => {
          const r = await gatewayApi(gw, 'GET', path, token === undefined ? {} : { token });
          return { status: r.status, code: r.body?.code as string | undefined, challenge: r.headers.get('www-authenticate') };
        };
        assert.equal((await status('/admin/users', alice.pair.access_token)).status, 200);
        const refused = await status('/admin/users', bob.pair.access_token);
        assert.deepEqual(refused, { status: 403, code: 'insufficient_claims', challenge: INSUFFICIENT_SCOPE_CHALLENGE });
        assert.equal((await status('/ADMIN/users', bob.pair.access_token)).status, 403, 'case variants are covered');
        assert.equal((await status('/admin/users')).status, 401, 'unauthenticated is still 401');
        assert.equal((await status('/admin/open', bob.pair.access_token)).status, 200, 'the exact pattern outranks the prefix');
        assert.equal((await status('/admin/open')).status, 401, 'a path with a requirement is never public');
        assert.equal((await status('/hardware/key', alice.pair.access_token)).code, 'insufficient_claims', 'amr');
        assert.equal((await status('/admin/fresh/x', alice.pair.access_token)).status, 200);
        h.clock.advance(301_000);
        const refreshed = await gatewayApi(gw, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: alice.pair.refresh_token } });
        assert.equal(refreshed.status, 200, refreshed.text);
        assert.equal(
          (await status('/admin/fresh/x', refreshed.body.access_token)).code,
          'insufficient_claims',
          'a refresh is not a new sign-in',
        );
        assert.equal((await status('/admin/users', refreshed.body.access_token)).status, 200);
      } finally {
        await g.app.close();
      }
    } finally {
      await h.close();
    }
  });
});

describe('the reserved prefix and the principal', () => {
  test('/.svc/ never reaches the attach: unknown reserved paths are 404, jwks is served, an attach route under it is refused', async () => {
    const h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: echoAttach,
      gateway: { jwks: () => ({ keys: [{ kty: 'OKP', crv: 'Ed25519', x: 'abc', kid: 'k1' }] }) },
    });
    try {
      const user = await applicationUser(h);
      for (const path of ['/.svc/', '/.svc', '/.svc/anything', '/.svc/auth/v1/other', '/.svc/auth/v2/me']) {
        const r = await gatewayApi(h, 'GET', path, { token: user.pair.access_token });
        assert.equal(r.status, 404, path);
        assert.equal(r.body.code, 'not_found', path);
      }
      const jwks = await gatewayApi(h, 'GET', '/.svc/jwks.json');
      assert.equal(jwks.status, 200);
      assert.match(jwks.headers.get('content-type') ?? '', /^application\/jwk-set\+json/);
      assert.deepEqual(jwks.body, { keys: [{ kty: 'OKP', crv: 'Ed25519', x: 'abc', kid: 'k1' }] });
      await assert.rejects(
        startGateway(h, {
          socket: false,
          attach: async (app) => {
            app.get('/.svc/jwks.json', async () => ({ keys: ['forged'] }));
          },
        }),
        /reserved/,
      );
    } finally {
      await h.close();
    }
  });

  test('the reserved prefix in another letter case (/.SVC/, /.Svc/) never reaches the application, and no attach may claim it', async () => {
    const h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach });
    try {
      const user = await applicationUser(h);
      for (const path of ['/.SVC/auth/v1/me', '/.Svc/jwks.json', '/.SVC', '/.sVc/anything', '/.sv%63/auth/v1/me', '/.SV%43/x']) {
        for (const token of [user.pair.access_token, undefined]) {
          const r = await gatewayApi(h, 'GET', path, token === undefined ? {} : { token });
          assert.equal(r.status, 404, `${path} ${token === undefined ? 'without' : 'with'} a bearer`);
          assert.equal(r.body.code, 'not_found', path);
          assert.equal(r.body.attach, undefined, `${path} reached the application`);
        }
      }
      await assert.rejects(
        startGateway(h, {
          socket: false,
          attach: async (app) => {
            app.get('/.SVC/jwks.json', async () => ({ keys: ['forged'] }));
          },
        }),
        /reserved/,
      );
    } finally {
      await h.close();
    }
  });

  test('without an attach, an authenticated request gets 404 problem+json and jwks is an empty set', async () => {
    const h = await startGatewayHarness({ socket: false, store: 'memory' });
    try {
      const user = await applicationUser(h);
      const r = await gatewayApi(h, 'GET', '/app/x', { token: user.pair.access_token });
      assert.equal(r.status, 404);
      assert.equal(r.body.code, 'not_found');
      assert.equal((await gatewayApi(h, 'GET', '/app/x')).status, 401, 'unauthenticated first');
      assert.deepEqual((await gatewayApi(h, 'GET', '/.svc/jwks.json')).body, { keys: [] });
    } finally {
      await h.close();
    }
  });

  test('request.principal is read-only and non-configurable: an attach can neither replace, redefine nor re-decorate it', async () => {
    const h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: async (app) => {
        app.get('/replace', async (req) => {
          (req as { principal: unknown }).principal = { subject: 'sub_forged' };
          return { replaced: true };
        });
        app.get('/redefine', async (req) => {
          Object.defineProperty(req, 'principal', { value: { subject: 'sub_forged' } });
          return { redefined: true };
        });
        app.get('/inspect', async (req) => {
          const d = Object.getOwnPropertyDescriptor(req, 'principal');
          return {
            writable: d?.writable,
            configurable: d?.configurable,
            frozen: Object.isFrozen(req.principal),
            subject: req.principal?.subject,
          };
        });
      },
    });
    try {
      const user = await applicationUser(h);
      const token = user.pair.access_token;
      const inspect = await gatewayApi(h, 'GET', '/inspect', { token });
      assert.equal(inspect.body.writable, false);
      assert.equal(inspect.body.configurable, false);
      assert.equal(inspect.body.frozen, true);
      assert.match(inspect.body.subject, /^sub_/);
      assert.equal((await gatewayApi(h, 'GET', '/replace', { token })).status, 500);
      assert.equal((await gatewayApi(h, 'GET', '/redefine', { token })).status, 500);
      await assert.rejects(
        startGateway(h, {
          socket: false,
          attach: async (app) => {
            app.decorateRequest('principal', null);
          },
        }),
        /principal/,
      );
    } finally {
      await h.close();
    }
  });

  test("an attach's hooks, even from a plugin that skips encapsulation (fastify-plugin), run after identity", async () => {
    const seen: (string | null)[] = [];
    const lifted = Object.assign(
      async (scope: FastifyInstance) => {
        scope.addHook('onRequest', async (req) => {
          const d = Object.getOwnPropertyDescriptor(req, 'principal');
          seen.push(d?.configurable === false ? ((d.value as { subject?: string } | null)?.subject ?? null) : 'not yet settled');
        });
      },
      { [Symbol.for('skip-override')]: true },
    );
    const h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: async (app) => {
        await app.register(lifted);
        await echoAttach(app);
      },
    });
    try {
      const user = await applicationUser(h);
      assert.equal((await gatewayApi(h, 'GET', '/app/x')).status, 401);
      assert.equal((await gatewayApi(h, 'GET', '/app/x', { token: user.pair.access_token })).status, 200);
      assert.equal((await gatewayApi(h, 'GET', '/public/x')).status, 200);
      assert.equal((await gatewayApi(h, 'POST', '/.svc/auth/v1/challenges', { body: { public_key: 'ab' } })).status, 400);
      assert.equal(seen.length, 2, 'the refused request and the reserved route never reached it');
      assert.match(seen[0] ?? '', /^sub_/);
      assert.equal(seen[1], null);
    } finally {
      await h.close();
    }
  });
});

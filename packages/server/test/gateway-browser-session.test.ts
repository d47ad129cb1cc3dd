import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import pino from 'pino';
import { buildGatewayApp } from '../src/index.js';
import { browserRequest, cookiesSet } from './support/browser-http.js';
import {
  applicationUser,
  echoAttach,
  type GatewayHarness,
  gatewayApi,
  requirement,
  startGatewayHarness,
  testPolicy,
} from './support/gateway-harness.js';
import { plainCookies, plantedCookieSuite, sessionCookieSuites } from './support/session-cookie-suite.js';
import { testRedirectProvider } from './support/test-provider.js';

// The gateway listens on 127.0.0.1, where the DNS-rebinding guard already refuses any
// non-loopback Origin (403 forbidden_host): the attacking page is another loopback origin, a
// different site (localhost vs 127.0.0.1) or the same site on another port, which only the CSRF
// rule stops.
const EVIL_ORIGIN = 'http://localhost:9';

const ACCESS_TTL_MS = DEFAULT_AUTH_SETTINGS.accessTokenTtlSeconds * 1000;

// The other attach modes (a real upstream, module mode) run in real/gateway-browser-session-sockets.test.ts.
sessionCookieSuites((m) => m.name === 'in-process echo', { socket: false, store: 'memory' });

// Module mode runs in real/gateway-browser-session-sockets.test.ts.
plantedCookieSuite(['in-process'], { socket: false, store: 'memory' });

describe('cookies and the Authorization header are never mixed', () => {
  let h: GatewayHarness;
  before(async () => {
    h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach });
  });
  after(() => h.close());

  test('an Authorization header always wins: a bad bearer with a live cookie is 401', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'GET', '/app/x', {
      cookies: plainCookies(user.pair),
      headers: { authorization: 'Bearer svca_garbage' },
    });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_token');
  });

  test('a valid bearer with a bad cookie passes as the bearer, and the cookie still never reaches the application', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'GET', '/app/x', {
      cookies: { 'svc-access': 'svca_garbage' },
      headers: { authorization: `Bearer ${user.pair.access_token}` },
    });
    assert.equal(r.status, 200);
    assert.equal(r.body.principal.session, user.pair.session_id);
    assert.equal(r.body.headers.cookie, undefined);
  });

  test('a cookie sent twice is not believed (a tossed cookie cannot shadow the real one)', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'GET', '/app/x', {
      headers: { cookie: `svc-access=${user.pair.access_token}; svc-access=${user.pair.access_token}` },
    });
    assert.equal(r.status, 401);
  });

  test('no cookie and no header: 401 with the application challenge, as before', async () => {
    const r = await browserRequest(h, 'GET', '/app/x');
    assert.equal(r.status, 401);
    assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="application"');
  });
});

describe('cookie names and attributes follow the transport', () => {
  let h: GatewayHarness;
  before(async () => {
    // A trusted TLS-terminating proxy on loopback: X-Forwarded-Proto: https is believed.
    h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach, gateway: { trustedProxies: ['127.0.0.1'] } });
  });
  after(() => h.close());

  test('over TLS only the __Host- names are read: a prefix-less cookie (which any subdomain could plant) is ignored', async () => {
    const user = await applicationUser(h);
    const tls = { 'x-forwarded-proto': 'https' };
    const plain = await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair), headers: tls });
    assert.equal(plain.status, 401);
    const hosted = await browserRequest(h, 'GET', '/app/x', {
      cookies: { '__Host-svc-access': user.pair.access_token },
      headers: tls,
    });
    assert.equal(hosted.status, 200);
    assert.equal(hosted.body.principal.session, user.pair.session_id);
  });

  test('over plain HTTP the __Host- names are not read', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'GET', '/app/x', { cookies: { '__Host-svc-access': user.pair.access_token } });
    assert.equal(r.status, 401);
  });

  test('a refresh over TLS sets __Host- cookies with Secure, HttpOnly, Path=/, SameSite=Lax and no Domain', async () => {
    const user = await applicationUser(h);
    h.clock.advance(ACCESS_TTL_MS + 1000);
    const r = await browserRequest(h, 'GET', '/app/x', {
      cookies: { '__Host-svc-access': user.pair.access_token, '__Host-svc-refresh': user.pair.refresh_token },
      headers: { 'x-forwarded-proto': 'https' },
    });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.setCookies.length, 2);
    for (const c of r.setCookies) {
      assert.match(c, /^__Host-svc-(access|refresh)=svc[ar]_/);
      const attrs = c.split(';').map((a) => a.trim().toLowerCase());
      for (const a of ['path=/', 'httponly', 'samesite=lax', 'secure']) assert.ok(attrs.includes(a), `${a} in ${c}`);
      assert.ok(!attrs.some((a) => a.startsWith('domain')), c);
    }
  });

  test('a refresh over plain HTTP sets the prefix-less cookies, HttpOnly and SameSite=Lax, without Secure', async () => {
    const user = await applicationUser(h);
    h.clock.advance(ACCESS_TTL_MS + 1000);
    const r = await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair) });
    assert.equal(r.status, 200, r.text);
    for (const c of r.setCookies) {
      assert.match(c, /^svc-(access|refresh)=svc[ar]_.*; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/);
    }
  });
});

describe('transparent refresh', () => {
  let h: GatewayHarness;
  before(async () => {
    h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: echoAttach,
      policy: testPolicy({ requirements: [requirement('/fresh/*', { maxAuthAgeSeconds: 3600 })] }),
    });
  });
  after(() => h.close());

  test('an expired access cookie with a live refresh cookie rotates the pair, sets new cookies, and the request goes on', async () => {
    const user = await applicationUser(h);
    h.clock.advance(ACCESS_TTL_MS + 1000);
    const r = await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair) });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.principal.session, user.pair.session_id, 'the same session');
    const set = cookiesSet(r.setCookies);
    assert.match(set['svc-access'] ?? '', /^svca_/);
    assert.match(set['svc-refresh'] ?? '', /^svcr_/);
    assert.notEqual(set['svc-access'], user.pair.access_token);
    assert.notEqual(set['svc-refresh'], user.pair.refresh_token);
    const next = await browserRequest(h, 'GET', '/app/x', {
      cookies: { 'svc-access': set['svc-access'] as string, 'svc-refresh': set['svc-refresh'] as string },
    });
    assert.equal(next.status, 200);
    assert.deepEqual(next.setCookies, [], 'the new access token is live: no second rotation');
  });

  test('a refresh cookie alone (the browser dropped the expired access cookie) is enough', async () => {
    const user = await applicationUser(h);
    h.clock.advance(ACCESS_TTL_MS + 1000);
    const r = await browserRequest(h, 'GET', '/app/x', { cookies: { 'svc-refresh': user.pair.refresh_token } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.principal.session, user.pair.session_id);
  });

  test('concurrent requests of one browser during a rotation all pass with the one new pair, and the session lives on', async () => {
    const user = await applicationUser(h);
    h.clock.advance(ACCESS_TTL_MS + 1000);
    const replies = await Promise.all(
      Array.from({ length: 8 }, (_, i) => browserRequest(h, 'GET', `/app/parallel/${i}`, { cookies: plainCookies(user.pair) })),
    );
    for (const r of replies) assert.equal(r.status, 200, r.text);
    const pairs = new Set(replies.map((r) => JSON.stringify(cookiesSet(r.setCookies))));
    assert.equal(pairs.size, 1, 'every request got the same new pair (the grace rule replays the rotation)');
    const set = cookiesSet(replies[0]?.setCookies ?? []);
    const me = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: set['svc-access'] as string });
    assert.equal(me.status, 200, 'the session was not revoked');
    assert.equal(me.body.session, user.pair.session_id);
  });

  test('the old refresh cookie after the grace interval is reuse: the session is revoked and the cookies are cleared', async () => {
    const user = await applicationUser(h);
    h.clock.advance(ACCESS_TTL_MS + 1000);
    const first = await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair) });
    assert.equal(first.status, 200);
    h.clock.advance((DEFAULT_AUTH_SETTINGS.refreshReuseGraceSeconds + 1) * 1000);
    const stolen = await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair) });
    assert.equal(stolen.status, 401);
    assert.deepEqual(cookiesSet(stolen.setCookies), { 'svc-access': '', 'svc-refresh': '' });
    for (const c of stolen.setCookies) assert.match(c, /Max-Age=0/);
    const set = cookiesSet(first.setCookies);
    const after = await browserRequest(h, 'GET', '/app/x', { cookies: { 'svc-access': set['svc-access'] as string } });
    assert.equal(after.status, 401, 'the whole session ended');
  });

  test('a refresh is not a new sign-in: the path requirement on sign-in age still holds', async () => {
    const user = await applicationUser(h);
    h.clock.advance(3601 * 1000);
    const r = await browserRequest(h, 'GET', '/fresh/x', { cookies: plainCookies(user.pair) });
    assert.equal(r.status, 403);
    assert.equal(r.body.code, 'insufficient_claims');
  });
});

describe('CSRF: a cookie-authenticated request that changes state must come from the gateway origin', () => {
  let h: GatewayHarness;
  let reached: string[];
  before(async () => {
    reached = [];
    h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: async (app) => {
        app.addHook('onRequest', async (req) => {
          reached.push(`${req.method} ${req.url}`);
        });
        await echoAttach(app);
      },
    });
  });
  after(() => h.close());

  const form = { 'content-type': 'application/x-www-form-urlencoded' };

  test('cross-site form POST with cookies is refused 403 csrf_refused and the application never sees it', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'POST', '/app/transfer', {
      cookies: plainCookies(user.pair),
      headers: { ...form, origin: EVIL_ORIGIN, 'sec-fetch-site': 'cross-site' },
      body: 'to=mallory&amount=1000',
    });
    assert.equal(r.status, 403);
    assert.equal(r.body.code, 'csrf_refused');
    assert.match(r.headers.get('content-type') ?? '', /application\/problem\+json/);
    assert.ok(!reached.includes('POST /app/transfer'));
  });

  test('a same-site page on another port is another origin: refused', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'POST', '/app/transfer', {
      cookies: plainCookies(user.pair),
      headers: { ...form, origin: 'http://127.0.0.1:1', 'sec-fetch-site': 'same-site' },
      body: 'x=1',
    });
    assert.equal(r.status, 403);
    assert.equal(r.body.code, 'csrf_refused');
  });

  test('missing Origin with Sec-Fetch-Site cross-site is refused, and so is a request showing neither', async () => {
    const user = await applicationUser(h);
    for (const headers of [{ 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, {}]) {
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
        const r = await browserRequest(h, method, '/app/x', { cookies: plainCookies(user.pair), headers });
        assert.equal(r.status, 403, `${method} ${JSON.stringify(headers)}`);
        assert.equal(r.body.code, 'csrf_refused');
      }
    }
    assert.deepEqual(
      reached.filter((x) => !x.startsWith('GET')),
      [],
    );
  });

  test('same-origin POST passes (Origin equal to the gateway origin, or Sec-Fetch-Site same-origin or none)', async () => {
    const user = await applicationUser(h);
    for (const headers of [{ origin: h.gatewayBase }, { 'sec-fetch-site': 'same-origin' }, { 'sec-fetch-site': 'none' }]) {
      const r = await browserRequest(h, 'POST', '/app/ok', { cookies: plainCookies(user.pair), headers });
      assert.equal(r.status, 200, JSON.stringify(headers));
      assert.equal(r.body.principal.session, user.pair.session_id);
    }
  });

  test('safe methods with cookies are not checked (a cross-site link still opens the page)', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'GET', '/app/page', {
      cookies: plainCookies(user.pair),
      headers: { 'sec-fetch-site': 'cross-site' },
    });
    assert.equal(r.status, 200);
  });

  test('bearer (header) requests are not affected by the CSRF rule', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'POST', '/app/api', {
      headers: { authorization: `Bearer ${user.pair.access_token}`, origin: EVIL_ORIGIN, 'sec-fetch-site': 'cross-site' },
    });
    assert.equal(r.status, 200);
  });

  test('a forged POST with an expired access cookie does not rotate the refresh token on its behalf', async () => {
    const user = await applicationUser(h);
    h.clock.advance(ACCESS_TTL_MS + 1000);
    const forged = await browserRequest(h, 'POST', '/app/x', { cookies: plainCookies(user.pair), headers: { origin: EVIL_ORIGIN } });
    assert.equal(forged.status, 403);
    assert.deepEqual(forged.setCookies, []);
    // Long after any grace: had the forged request rotated, this would be reuse and revoke the session.
    h.clock.advance(60_000);
    const own = await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair) });
    assert.equal(own.status, 200, own.text);
  });

  test('on a public path a cross-site POST with cookies goes on without the principal', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'POST', '/public/form', { cookies: plainCookies(user.pair), headers: { origin: EVIL_ORIGIN } });
    assert.equal(r.status, 200);
    assert.equal(r.body.principal, null);
    assert.equal(r.body.headers.cookie, undefined);
  });
});

describe('logout and the sign-in page', () => {
  let h: GatewayHarness;
  before(async () => {
    h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach, gateway: { providers: [testRedirectProvider()] } });
  });
  after(() => h.close());

  test('logout revokes the session and clears the cookies; the cookies are refused after', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'POST', '/.svc/auth/v1/logout', {
      cookies: plainCookies(user.pair),
      headers: { origin: h.gatewayBase },
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body, { session_id: user.pair.session_id, revoked: true });
    assert.deepEqual(cookiesSet(r.setCookies), { 'svc-access': '', 'svc-refresh': '' });
    const after = await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair) });
    assert.equal(after.status, 401);
    assert.equal((await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: user.pair.refresh_token } })).status, 401);
  });

  test('a plain form logout button works (form body accepted, 303 to the sign-in page)', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'POST', '/.svc/auth/v1/logout', {
      cookies: plainCookies(user.pair),
      headers: { origin: h.gatewayBase, 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
      body: '',
    });
    assert.equal(r.status, 303);
    assert.equal(r.headers.get('location'), '/.svc/auth/v1/login');
    assert.equal((await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair) })).status, 401);
  });

  test('logout with an expired access cookie still ends the session (through the refresh cookie)', async () => {
    const user = await applicationUser(h);
    h.clock.advance(ACCESS_TTL_MS + 1000);
    const r = await browserRequest(h, 'POST', '/.svc/auth/v1/logout', {
      cookies: plainCookies(user.pair),
      headers: { origin: h.gatewayBase },
    });
    assert.equal(r.status, 200);
    assert.equal(r.body.revoked, true);
    assert.deepEqual(cookiesSet(r.setCookies), { 'svc-access': '', 'svc-refresh': '' });
    assert.equal((await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: user.pair.refresh_token } })).status, 401);
  });

  test('cross-site logout is refused (csrf_refused) and the session lives on', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'POST', '/.svc/auth/v1/logout', {
      cookies: plainCookies(user.pair),
      headers: { origin: EVIL_ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
      body: '',
    });
    assert.equal(r.status, 403);
    assert.equal(r.body.code, 'csrf_refused');
    assert.equal((await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair) })).status, 200);
  });

  test('a browser opening a protected page without a session is sent to the sign-in page with its path; bearer clients keep 401', async () => {
    const r = await browserRequest(h, 'GET', '/app/orders?id=7', { headers: { accept: 'text/html,application/xhtml+xml' } });
    assert.equal(r.status, 302);
    assert.equal(r.headers.get('location'), `/.svc/auth/v1/login?return=${encodeURIComponent('/app/orders?id=7')}`);
    const api = await browserRequest(h, 'GET', '/app/orders', { headers: { accept: 'application/json' } });
    assert.equal(api.status, 401);
    const bearer = await browserRequest(h, 'GET', '/app/orders', {
      headers: { accept: 'text/html', authorization: 'Bearer svca_garbage' },
    });
    assert.equal(bearer.status, 401);
    const post = await browserRequest(h, 'POST', '/app/orders', { headers: { accept: 'text/html' } });
    assert.equal(post.status, 401);
  });

  test('an expired session on a page navigation clears the cookies and goes to the sign-in page', async () => {
    const user = await applicationUser(h);
    await gatewayApi(h, 'POST', '/.svc/auth/v1/revoke', { token: user.pair.access_token });
    const r = await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair), headers: { accept: 'text/html' } });
    assert.equal(r.status, 302);
    assert.deepEqual(cookiesSet(r.setCookies), { 'svc-access': '', 'svc-refresh': '' });
  });

  test('the sign-in page: HTML, one button per provider, a strict CSP with a nonce, no third-party script, the return path kept', async () => {
    const r = await browserRequest(h, 'GET', '/.svc/auth/v1/login?return=%2Fapp%2Forders');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/html/);
    const csp = r.headers.get('content-security-policy') ?? '';
    const nonce = /script-src 'nonce-([^']+)'/.exec(csp)?.[1];
    assert.ok(nonce !== undefined, csp);
    assert.match(csp, /default-src 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:|\*/);
    assert.ok(r.text.includes(`<script nonce="${nonce}">`));
    assert.doesNotMatch(r.text, /<script[^>]*\bsrc=/);
    assert.equal((r.text.match(/data-provider="/g) ?? []).length, 1);
    assert.ok(r.text.includes('href="/.svc/auth/v1/providers/testidp/begin?return=%2Fapp%2Forders"'));
    const other = await browserRequest(h, 'GET', '/.svc/auth/v1/login');
    assert.notEqual(/nonce-([^']+)/.exec(other.headers.get('content-security-policy') ?? '')?.[1], nonce, 'a fresh nonce per page');
  });

  test('the sign-in page never keeps an off-site return path (//host, /\\host, absolute URLs)', async () => {
    for (const evil of ['//evil.example/x', '/\\evil.example', 'https://evil.example/', 'javascript:alert(1)', '/.svc/auth/v1/logout']) {
      const r = await browserRequest(h, 'GET', `/.svc/auth/v1/login?return=${encodeURIComponent(evil)}`);
      assert.equal(r.status, 200);
      assert.ok(r.text.includes('data-return="/"'), evil);
      assert.ok(!r.text.includes('evil.example'), evil);
    }
  });

  test('an unknown provider name is 404 on every provider route', async () => {
    for (const [method, path] of [
      ['GET', '/.svc/auth/v1/providers/nope/begin'],
      ['GET', '/.svc/auth/v1/providers/nope/callback?code=x'],
      ['GET', '/.svc/auth/v1/providers/__proto__/begin'],
      ['GET', '/.svc/auth/v1/providers/constructor/begin'],
    ] as const) {
      const r = await browserRequest(h, method, path);
      assert.equal(r.status, 404, path);
      assert.equal(r.body.code, 'not_found');
    }
    const post = await browserRequest(h, 'POST', '/.svc/auth/v1/providers/nope/begin', {
      headers: { origin: h.gatewayBase, 'content-type': 'application/json' },
      body: '{"intent":"signin"}',
    });
    assert.equal(post.status, 404);
  });

  test('a cross-site POST to begin or finish is refused before the provider is asked', async () => {
    for (const path of ['/.svc/auth/v1/providers/testidp/begin', '/.svc/auth/v1/providers/testidp/finish']) {
      const r = await browserRequest(h, 'POST', path, {
        headers: { origin: EVIL_ORIGIN, 'content-type': 'application/json' },
        body: '{"intent":"signin"}',
      });
      assert.equal(r.status, 403, path);
      assert.equal(r.body.code, 'csrf_refused');
    }
  });
});

describe('the gateway origin', () => {
  test('with publicOrigin the CSRF rule compares Origin with it, not with the Host the request names', async () => {
    const h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: echoAttach,
      gateway: { publicOrigin: 'http://localhost:1234' },
    });
    try {
      const user = await applicationUser(h);
      const own = await browserRequest(h, 'POST', '/app/x', {
        cookies: plainCookies(user.pair),
        headers: { origin: 'http://localhost:1234' },
      });
      assert.equal(own.status, 200);
      const byHost = await browserRequest(h, 'POST', '/app/x', { cookies: plainCookies(user.pair), headers: { origin: h.gatewayBase } });
      assert.equal(byHost.status, 403);
      assert.equal(byHost.body.code, 'csrf_refused');
    } finally {
      await h.close();
    }
  });

  test('a publicOrigin that is not an http(s) origin is refused when the gateway is built', async () => {
    const h = await startGatewayHarness({ socket: false, store: 'memory' });
    try {
      for (const publicOrigin of ['app.example.com', 'https://app.example.com/path', 'null']) {
        await assert.rejects(
          buildGatewayApp({ deps: h.deps, policy: testPolicy(), trustedProxies: [], publicOrigin }),
          TypeError,
          publicOrigin,
        );
      }
    } finally {
      await h.close();
    }
  });
});

describe('cookies never appear in logs', () => {
  test('every token the browser session carried or received stays out of the log', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const logger = pino({ level: 'trace' }, sink);
    const h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: echoAttach,
      gateway: { logger, providers: [testRedirectProvider()] },
    });
    try {
      const user = await applicationUser(h);
      await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair) });
      h.clock.advance(ACCESS_TTL_MS + 1000);
      const refreshed = await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair) });
      await browserRequest(h, 'POST', '/app/x', { cookies: plainCookies(user.pair), headers: { origin: EVIL_ORIGIN } });
      const set = cookiesSet(refreshed.setCookies);
      await browserRequest(h, 'POST', '/.svc/auth/v1/logout', { cookies: set, headers: { origin: h.gatewayBase } });
      await browserRequest(h, 'GET', '/.svc/auth/v1/providers/testidp/callback?code=SECRETCODE123&state=SECRETSTATE', {
        cookies: { 'svc-flow': 'flw_x' },
      });
      const log = lines.join('');
      assert.doesNotMatch(log, /SECRETCODE123|SECRETSTATE|flw_x/);
      assert.ok(log.length > 0, 'the logger was used');
      for (const secret of [user.pair.access_token, user.pair.refresh_token, set['svc-access'], set['svc-refresh']]) {
        assert.ok(secret !== undefined && !log.includes(secret), 'a token reached the log');
        assert.ok(!log.includes((secret as string).slice(5, 25)), 'part of a token reached the log');
      }
      assert.doesNotMatch(log, /svc-access=|svc-refresh=/);
    } finally {
      await h.close();
    }
  });
});

import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { browserRequest, cookiesSet } from './support/browser-http.js';
import { applicationUser, echoAttach, type GatewayHarness, startGatewayHarness } from './support/gateway-harness.js';
import { plainCookies } from './support/session-cookie-suite.js';
import { testRedirectProvider } from './support/test-provider.js';

// One sign-in across route hosts (`:svc/app-auth-origin`), through inject: three host names with
// no shared parent domain, the auth origin first.
const AUTH = 'http://auth.a.test';
const APP = 'http://app.b.test';
const WIKI = 'http://wiki.c.test';
const SSO = { authOrigin: AUTH, origins: [APP, WIKI] };
const HTML = 'text/html,application/xhtml+xml';

type Browser = Record<string, string>;

/** A browser's request to one host (its `Host` header), as a navigation unless told otherwise. */
function at(h: GatewayHarness, origin: string, method: string, path: string, cookies: Browser = {}, headers: Record<string, string> = {}) {
  return browserRequest(h, method, path, { cookies, headers: { host: new URL(origin).host, accept: HTML, ...headers } });
}

/** The cookies a browser holds after a response (set ones added, deleted ones dropped). */
function keep(jar: Browser, setCookies: string[]): Browser {
  const next = { ...jar };
  for (const [name, value] of Object.entries(cookiesSet(setCookies))) {
    if (value === '') delete next[name];
    else next[name] = value;
  }
  return next;
}

/**
 * A browser signed in at the auth origin (its cookies there) visiting `path` on `origin`: every
 * redirect of the handoff followed by hand. Returns each host's cookies and the last answer.
 */
async function visit(h: GatewayHarness, auth: Browser, origin: string, path: string) {
  let jar: Browser = {};
  const first = await at(h, origin, 'GET', path);
  assert.equal(first.status, 302, first.text);
  const start = first.headers.get('location') as string;
  assert.equal(start, `/.svc/auth/v1/sso/start?return=${encodeURIComponent(path)}`);
  const started = await at(h, origin, 'GET', start);
  assert.equal(started.status, 302, started.text);
  jar = keep(jar, started.setCookies);
  const authorize = new URL(started.headers.get('location') as string);
  assert.equal(authorize.origin, AUTH);
  const minted = await at(h, AUTH, 'GET', authorize.pathname + authorize.search, auth);
  assert.equal(minted.status, 302, minted.text);
  const callback = new URL(minted.headers.get('location') as string);
  assert.equal(callback.origin, origin);
  const landed = await at(h, origin, 'GET', callback.pathname + callback.search, jar);
  jar = keep(jar, landed.setCookies);
  return { jar, landed, callback, authorize, started };
}

describe('one sign-in across route hosts', () => {
  let h: GatewayHarness;
  const lines: string[] = [];
  before(async () => {
    const sink = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: echoAttach,
      gateway: { logger: pino({ level: 'trace' }, sink), providers: [testRedirectProvider()], sso: SSO },
    });
  });
  after(() => h.close());

  test('a browser signed in at the auth origin is signed in on another host without a sign-in page, with a session of its own', async () => {
    const user = await applicationUser(h);
    const auth = plainCookies(user.pair);
    const { jar, landed, callback } = await visit(h, auth, APP, '/orders?id=7');
    assert.equal(landed.status, 303, landed.text);
    // Back to the page asked for, with the code gone from the URL.
    assert.equal(landed.headers.get('location'), '/orders?id=7');
    assert.match(callback.searchParams.get('code') ?? '', /^svch_[\w-]{43}$/);
    assert.equal(landed.headers.get('referrer-policy'), 'no-referrer');
    assert.equal(landed.headers.get('cache-control'), 'no-store');
    assert.ok(jar['svc-access'] !== undefined && jar['svc-access'] !== user.pair.access_token, 'this host has its own token');
    assert.equal(jar['svc-sso'], undefined, 'the state cookie is spent');
    const page = await at(h, APP, 'GET', '/orders?id=7', jar);
    assert.equal(page.status, 200, page.text);
    assert.notEqual(page.body.principal.session, user.pair.session_id);
    assert.equal(page.body.principal.subject, (await h.deps.store.getSession(user.pair.session_id))?.subject);
    assert.equal((await h.deps.store.getSession(page.body.principal.session))?.parentId, user.pair.session_id);
    // The state cookie is the gateway's: the application never sees it.
    assert.equal(page.body.headers.cookie, undefined);
  });

  test('without a session at the auth origin the sign-in page comes first, and returns to the handoff', async () => {
    const started = await at(h, APP, 'GET', '/.svc/auth/v1/sso/start?return=%2Fwiki');
    const authorize = new URL(started.headers.get('location') as string);
    const r = await at(h, AUTH, 'GET', authorize.pathname + authorize.search);
    assert.equal(r.status, 302);
    const login = new URL(r.headers.get('location') as string, AUTH);
    assert.equal(login.pathname, '/.svc/auth/v1/login');
    assert.equal(login.searchParams.get('return'), authorize.pathname + authorize.search);
    const page = await at(h, AUTH, 'GET', login.pathname + login.search);
    assert.equal(page.status, 200);
    assert.match(page.text, /sso\/authorize/, 'the sign-in page returns to the handoff');
  });

  test('signing in again at the auth origin (a step-up) ends the host sessions of the replaced sign-in: the next logout leaves none live', async () => {
    const user = await applicationUser(h);
    const auth = plainCookies(user.pair);
    const { jar } = await visit(h, auth, APP, '/orders');
    const hostSession = (await at(h, APP, 'GET', '/orders', jar)).body.principal.session as string;
    // The browser signs in again at the auth origin while its old sign-in is live.
    const begun = await at(h, AUTH, 'GET', '/.svc/auth/v1/providers/testidp/begin?return=%2F', auth);
    assert.equal(begun.status, 302, begun.text);
    const withFlow = keep(auth, begun.setCookies);
    const callback = new URL(begun.headers.get('location') as string);
    const signedIn = await at(h, AUTH, 'GET', callback.pathname + callback.search, withFlow);
    assert.equal(signedIn.status, 303, signedIn.text);
    const now = keep(withFlow, signedIn.setCookies);
    assert.notEqual(now['svc-access'], user.pair.access_token, 'a new sign-in');
    assert.notEqual((await h.deps.store.getSession(user.pair.session_id))?.revokedAt ?? null, null, 'the replaced sign-in ended');
    assert.notEqual((await h.deps.store.getSession(hostSession))?.revokedAt ?? null, null, 'and the host session handed off from it');
    const stale = await at(h, APP, 'GET', '/orders', jar);
    assert.equal(stale.status, 302, 'the host hands the browser over again');
  });

  test("a host session's stolen refresh token, reused, ends the whole sign-in it came from, on every host", async () => {
    const user = await applicationUser(h);
    const auth = plainCookies(user.pair);
    const app = await visit(h, auth, APP, '/orders');
    const wiki = await visit(h, auth, WIKI, '/pages');
    const stolen = app.jar['svc-refresh'] as string;
    const rotate = () =>
      browserRequest(h, 'POST', '/.svc/auth/v1/refresh', {
        headers: { host: new URL(APP).host, 'content-type': 'application/json' },
        body: JSON.stringify({ refresh_token: stolen }),
      });
    assert.equal((await rotate()).status, 200);
    h.clock.advance(60_000); // outside the grace interval
    const reused = await rotate();
    assert.equal(reused.status, 401);
    assert.equal(reused.body.code, 'refresh_token_reused');
    assert.notEqual((await h.deps.store.getSession(user.pair.session_id))?.revokedAt ?? null, null, 'the sign-in ended');
    assert.equal((await at(h, WIKI, 'GET', '/pages', wiki.jar)).status, 302, 'the sibling host is signed out too');
  });

  test("a route host's own sign-in page sends the browser to the auth origin", async () => {
    const r = await at(h, WIKI, 'GET', '/.svc/auth/v1/login?return=%2Fpages');
    assert.equal(r.status, 302);
    assert.equal(r.headers.get('location'), '/.svc/auth/v1/sso/start?return=%2Fpages');
  });

  test('a step-up on a route host signs in on that host: a handoff would carry the old sign-in back (a redirect loop)', async () => {
    const r = await at(h, WIKI, 'GET', '/.svc/auth/v1/login?return=%2Fpages&step-up=recent');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /text\/html/);
  });

  test('open redirect via the return URL: authorize refuses any URL that is not on a route origin', async () => {
    const user = await applicationUser(h);
    const binding = 'a'.repeat(64);
    for (const target of [
      'http://evil.test/',
      '//evil.test/',
      'http://app.b.test@evil.test/',
      'javascript:alert(1)',
      '/local',
      'https://app.b.test/',
    ]) {
      const r = await at(
        h,
        AUTH,
        'GET',
        `/.svc/auth/v1/sso/authorize?return=${encodeURIComponent(target)}&binding=${binding}`,
        plainCookies(user.pair),
        {
          accept: 'application/json',
        },
      );
      assert.equal(r.status, 400, target);
      assert.equal(r.body.code, 'invalid_request', target);
    }
    // start never names another site either: a return that is not a local path goes to '/'.
    const started = await at(h, APP, 'GET', `/.svc/auth/v1/sso/start?return=${encodeURIComponent('//evil.test/x')}`);
    assert.equal(new URL(started.headers.get('location') as string).searchParams.get('return'), `${APP}/`);
  });

  test('only the auth origin mints codes: authorize on a route host is 404', async () => {
    const user = await applicationUser(h);
    const r = await at(
      h,
      APP,
      'GET',
      `/.svc/auth/v1/sso/authorize?return=${encodeURIComponent(`${APP}/`)}&binding=${'a'.repeat(64)}`,
      plainCookies(user.pair),
      {
        accept: 'application/json',
      },
    );
    assert.equal(r.status, 404);
  });

  test('code replay: a code used once is refused the second time, with a page that offers to sign in again', async () => {
    const user = await applicationUser(h);
    const first = await visit(h, plainCookies(user.pair), APP, '/a');
    assert.equal(first.landed.status, 303);
    const replay = await at(
      h,
      APP,
      'GET',
      first.callback.pathname + first.callback.search,
      first.started.setCookies.length > 0 ? keep({}, first.started.setCookies) : {},
    );
    assert.equal(replay.status, 400);
    assert.match(replay.headers.get('content-type') ?? '', /text\/html/);
    assert.match(replay.text, /invalid_handoff/);
    assert.match(replay.text, /href="\/\.svc\/auth\/v1\/login/);
    assert.equal(cookiesSet(replay.setCookies)['svc-access'], undefined, 'no session cookie for a replay');
  });

  test('a code for host B presented at host C is refused (and burned)', async () => {
    const user = await applicationUser(h);
    const started = await at(h, APP, 'GET', '/.svc/auth/v1/sso/start?return=%2F');
    const jar = keep({}, started.setCookies);
    const authorize = new URL(started.headers.get('location') as string);
    const minted = await at(h, AUTH, 'GET', authorize.pathname + authorize.search, plainCookies(user.pair));
    const callback = new URL(minted.headers.get('location') as string);
    const stolen = await at(h, WIKI, 'GET', callback.pathname + callback.search, jar, { accept: 'application/json' });
    assert.equal(stolen.status, 400);
    assert.equal(stolen.body.code, 'invalid_handoff');
    const late = await at(h, APP, 'GET', callback.pathname + callback.search, jar, { accept: 'application/json' });
    assert.equal(late.status, 400, 'a code seen at the wrong host is never usable again');
  });

  test('login CSRF: a code minted for the attacker, forced onto a victim browser, signs nobody in', async () => {
    const attacker = await applicationUser(h);
    // The attacker runs the handoff in their own browser, stopping before the callback.
    const started = await at(h, APP, 'GET', '/.svc/auth/v1/sso/start?return=%2F');
    const authorize = new URL(started.headers.get('location') as string);
    const minted = await at(h, AUTH, 'GET', authorize.pathname + authorize.search, plainCookies(attacker.pair));
    const callback = new URL(minted.headers.get('location') as string);
    // The victim's browser is made to open the callback: with its own state, or none.
    const victimStart = await at(h, APP, 'GET', '/.svc/auth/v1/sso/start?return=%2F');
    for (const victim of [keep({}, victimStart.setCookies), {}]) {
      const r = await at(h, APP, 'GET', callback.pathname + callback.search, victim, { accept: 'application/json' });
      assert.equal(r.status, 400);
      assert.equal(r.body.code, 'invalid_handoff');
      assert.equal(cookiesSet(r.setCookies)['svc-access'], undefined);
    }
  });

  test('a code older than 30 s is refused', async () => {
    const user = await applicationUser(h);
    const started = await at(h, APP, 'GET', '/.svc/auth/v1/sso/start?return=%2F');
    const authorize = new URL(started.headers.get('location') as string);
    const minted = await at(h, AUTH, 'GET', authorize.pathname + authorize.search, plainCookies(user.pair));
    const callback = new URL(minted.headers.get('location') as string);
    h.clock.advance(30_000);
    const r = await at(h, APP, 'GET', callback.pathname + callback.search, keep({}, started.setCookies), { accept: 'application/json' });
    assert.equal(r.status, 400);
    assert.equal(r.body.code, 'invalid_handoff');
  });

  test('one logout on any host signs the browser out on every host', async () => {
    const user = await applicationUser(h);
    const auth = plainCookies(user.pair);
    const app = (await visit(h, auth, APP, '/')).jar;
    const wiki = (await visit(h, auth, WIKI, '/')).jar;
    for (const [origin, jar] of [
      [AUTH, auth],
      [APP, app],
      [WIKI, wiki],
    ] as const) {
      assert.equal((await at(h, origin, 'GET', '/x', jar, { accept: 'application/json' })).status, 200, `${origin} signed in`);
    }
    const out = await at(h, WIKI, 'POST', '/.svc/auth/v1/logout', wiki, { origin: WIKI, accept: 'application/json' });
    assert.equal(out.status, 200, out.text);
    for (const [origin, jar] of [
      [AUTH, auth],
      [APP, app],
      [WIKI, wiki],
    ] as const) {
      const r = await at(h, origin, 'GET', '/x', jar, { accept: 'application/json' });
      assert.equal(r.status, 401, `${origin} signed out`);
    }
    const revoked = (await h.deps.store.listAuditEvents({ afterSeq: 0, limit: 1000 })).filter(
      (e) => e.type === 'session.revoked' && e.data.reason === 'logout',
    );
    assert.ok(revoked.some((e) => e.sessionId === user.pair.session_id));
    assert.equal(revoked.filter((e) => e.data.family === user.pair.session_id).length, 2);
  });

  test('no code, state or token of the handoff reaches the log', async () => {
    const user = await applicationUser(h);
    const { callback, jar } = await visit(h, plainCookies(user.pair), APP, '/logged');
    const code = callback.searchParams.get('code') as string;
    const log = lines.join('');
    assert.ok(log.length > 0, 'the logger was used');
    for (const secret of [code, code.slice(5, 30), jar['svc-access'] as string, jar['svc-refresh'] as string]) {
      assert.ok(!log.includes(secret), 'a secret of the handoff reached the log');
    }
    assert.doesNotMatch(log, /svc-sso=/);
  });
});

describe('without :svc/app-auth-origin nothing changes', () => {
  let h: GatewayHarness;
  before(async () => {
    h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach, gateway: { providers: [testRedirectProvider()] } });
  });
  after(() => h.close());

  test('the handoff routes do not exist, and a browser without a session goes to this host sign-in page', async () => {
    for (const path of ['/.svc/auth/v1/sso/start', '/.svc/auth/v1/sso/authorize', '/.svc/auth/v1/sso/callback']) {
      const r = await browserRequest(h, 'GET', path, { headers: { accept: 'application/json' } });
      assert.equal(r.status, 404, path);
    }
    const r = await browserRequest(h, 'GET', '/page', { headers: { accept: HTML } });
    assert.equal(r.status, 302);
    assert.equal(r.headers.get('location'), '/.svc/auth/v1/login?return=%2Fpage');
  });
});

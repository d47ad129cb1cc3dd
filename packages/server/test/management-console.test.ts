import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { admin, api, type DeviceKey, type Harness, signIn, startHarness } from './support/harness.js';

const HOST = '127.0.0.1:9090';
const ORIGIN = `http://${HOST}`;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

describe('management console: sign-in, CSRF and the loopback rule', () => {
  let h: Harness;
  let token: string;
  let victim: string;
  let adminSubject: string;
  let adminKey: DeviceKey;

  async function inject(
    method: 'GET' | 'POST',
    url: string,
    opts: { cookie?: string; headers?: Record<string, string>; form?: Record<string, string> } = {},
  ): Promise<Answer> {
    const r = await h.app.inject({
      method,
      url,
      headers: {
        host: HOST,
        accept: 'text/html',
        ...(opts.cookie === undefined ? {} : { cookie: opts.cookie }),
        ...(opts.form === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }),
        ...(opts.headers ?? {}),
      },
      ...(opts.form === undefined ? {} : { payload: new URLSearchParams(opts.form).toString() }),
    });
    return { status: r.statusCode, headers: r.headers, body: r.body };
  }

  /** A fresh one-time code minted with the administrator's bearer token. */
  async function mint(): Promise<{ url: string; code: string }> {
    const r = await api(h, 'POST', '/v1/auth/console-links', { token, headers: { host: HOST } });
    assert.equal(r.status, 201, r.text);
    const url = new URL(r.body.url as string);
    assert.equal(url.origin, ORIGIN, 'the URL names the loopback host the CLI reached');
    assert.equal(url.pathname, '/console/login');
    assert.equal(r.body.expires_in, 60);
    return { url: r.body.url as string, code: url.searchParams.get('code') as string };
  }

  function cookiesOf(a: Answer): string[] {
    const v = a.headers['set-cookie'];
    return Array.isArray(v) ? v : v === undefined ? [] : [String(v)];
  }

  /** Signs a browser in; its Cookie header and CSRF token (read from a page's form). */
  async function signedInBrowser(): Promise<{ cookie: string; csrf: string }> {
    const { code } = await mint();
    const login = await inject('GET', `/console/login?code=${encodeURIComponent(code)}`);
    assert.equal(login.status, 303);
    const cookie = cookiesOf(login)
      .map((c) => c.split(';')[0])
      .join('; ');
    const page = await inject('GET', '/console/users', { cookie });
    assert.equal(page.status, 200);
    const csrf = /name="csrf" value="([^"]+)"/.exec(page.body)?.[1];
    assert.ok(csrf !== undefined, 'every console page carries the CSRF token in its forms');
    return { cookie, csrf };
  }

  before(async () => {
    h = await startHarness({ socket: false, store: 'memory' });
    const me = await admin(h);
    token = me.pair.access_token;
    adminKey = me.key;
    adminSubject = (await api(h, 'GET', '/v1/auth/me', { token })).body.subject as string;
    const added = await api(h, 'POST', '/v1/auth/users', {
      token,
      body: { realm: 'application', name: 'Victim Person', email: 'v@example.com' },
    });
    victim = added.body.user.subject as string;
  });
  after(() => h.close());

  test('without a console cookie a page is a sign-in hint (401 HTML), an API client gets 401 problem+json', async () => {
    const page = await inject('GET', '/console/users');
    assert.equal(page.status, 401);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.match(page.body, /svc auth console/);
    assert.match(String(page.headers['content-security-policy']), /default-src 'none'/);
    const json = await inject('GET', '/console/audit/events', { headers: { accept: 'application/json' } });
    assert.equal(json.status, 401);
    assert.equal(JSON.parse(json.body).code, 'invalid_token');
  });

  test('the one-time URL signs a browser in once: HttpOnly, SameSite=Strict cookies on /console/; the session is the CLI device’s, amr console', async () => {
    const { code } = await mint();
    const login = await inject('GET', `/console/login?code=${encodeURIComponent(code)}`);
    assert.equal(login.status, 303);
    assert.equal(login.headers.location, '/console/users');
    const set = cookiesOf(login);
    assert.equal(set.length, 2);
    for (const c of set) {
      assert.match(c, /; HttpOnly/);
      assert.match(c, /; SameSite=Strict/);
      assert.match(c, /; Path=\/console\//);
    }
    const cookie = set.map((c) => c.split(';')[0]).join('; ');
    const sessions = (await api(h, 'GET', '/v1/auth/sessions', { token })).body.sessions as {
      id: string;
      amr?: string[];
      subject: string;
    }[];
    const me = (await api(h, 'GET', '/v1/auth/me', { token })).body;
    const consoleSession = await h.store.getSession(
      cookie.match(/svca_([0-9A-Z]{26})/)?.[1] === undefined ? '' : `ses_${cookie.match(/svca_([0-9A-Z]{26})/)?.[1]}`,
    );
    assert.ok(consoleSession !== null);
    assert.equal(consoleSession.subject, me.subject);
    assert.equal(consoleSession.deviceId, me.device);
    assert.deepEqual([...consoleSession.amr], ['console']);
    assert.ok(sessions.some((s) => s.id === consoleSession.id));

    const again = await inject('GET', `/console/login?code=${encodeURIComponent(code)}`);
    assert.equal(again.status, 400, 'a second use is refused');
    assert.match(again.body, /cannot be used/);
    assert.equal(cookiesOf(again).length, 0);
  });

  test('a console link used after 60 s, a forged secret and a malformed code are refused with a page', async () => {
    const late = await mint();
    h.clock.advance(61_000);
    const lateUse = await inject('GET', `/console/login?code=${encodeURIComponent(late.code)}`);
    assert.equal(lateUse.status, 400);
    assert.equal(cookiesOf(lateUse).length, 0);

    const forged = await mint();
    const wrong = forged.code.replace(/\.(.)/, (_m, c: string) => `.${c === 'A' ? 'B' : 'A'}`);
    assert.equal((await inject('GET', `/console/login?code=${encodeURIComponent(wrong)}`)).status, 400);
    assert.equal(
      (await inject('GET', `/console/login?code=${encodeURIComponent(forged.code)}`)).status,
      400,
      'a wrong guess burns the link',
    );
    assert.equal((await inject('GET', '/console/login?code=nonsense')).status, 400);
    assert.equal((await inject('GET', '/console/login')).status, 400);
  });

  test('a non-loopback Host or Origin never reaches the console (403 forbidden_host), before any cookie is read', async () => {
    const { cookie, csrf } = await signedInBrowser();
    const rebound = await inject('GET', '/console/users', { cookie, headers: { host: 'evil.example:9090' } });
    assert.equal(rebound.status, 403);
    assert.equal(JSON.parse(rebound.body).code, 'forbidden_host');
    const login = await inject('GET', '/console/login?code=x', { headers: { host: 'console.attacker.example' } });
    assert.equal(login.status, 403);
    const crossSite = await inject('POST', `/console/users/${victim}/disable`, {
      cookie,
      headers: { origin: 'https://evil.example' },
      form: { csrf },
    });
    assert.equal(crossSite.status, 403);
    assert.equal(JSON.parse(crossSite.body).code, 'forbidden_host');
    assert.equal((await h.store.getUser(victim))?.status, 'active');
  });

  test('CSRF: every state-changing console route refuses a missing token, a wrong token, a missing Origin and another loopback origin (403 csrf_refused), writing nothing', async () => {
    const { cookie, csrf } = await signedInBrowser();
    const sessionId = `ses_${/svca_([0-9A-Z]{26})/.exec(cookie)?.[1]}`;
    const device = (await h.store.listDevices({ realm: 'management' }))[0]?.id as string;
    const routes: [string, Record<string, string>][] = [
      ['/console/logout', {}],
      [`/console/users/${victim}/disable`, {}],
      [`/console/users/${victim}/enable`, {}],
      [`/console/users/${victim}/edit`, { name: 'Hacked', email: 'x@evil.example', groups: 'admins' }],
      [`/console/sessions/${sessionId}/revoke`, {}],
      [`/console/devices/${device}/remove`, {}],
      ['/console/pairing/device', { realm: 'management', public_key: 'ab'.repeat(32) }],
      ['/console/pairing/link', { realm: 'application', provider: 'passkeys' }],
      ['/console/users/new', { realm: 'application', name: 'Planted' }],
      [`/console/users/${victim}/remove`, {}],
    ];
    const attacks: [string, (form: Record<string, string>) => { headers: Record<string, string>; form: Record<string, string> }][] = [
      ['missing token', (form) => ({ headers: { origin: ORIGIN }, form })],
      ['wrong token', (form) => ({ headers: { origin: ORIGIN }, form: { ...form, csrf: `${csrf.slice(0, -2)}xx` } })],
      ['token of another session', (form) => ({ headers: { origin: ORIGIN }, form: { ...form, csrf: 'A'.repeat(43) } })],
      ['no Origin', (form) => ({ headers: {}, form: { ...form, csrf } })],
      ['another loopback origin', (form) => ({ headers: { origin: 'http://127.0.0.1:8080' }, form: { ...form, csrf } })],
    ];
    const headBefore = await h.store.auditHead();
    for (const [path, form] of routes) {
      for (const [name, make] of attacks) {
        const a = make(form);
        const r = await inject('POST', path, { cookie, headers: { ...a.headers, accept: 'application/json' }, form: a.form });
        assert.equal(r.status, 403, `${path}, ${name}: ${r.body}`);
        assert.equal(JSON.parse(r.body).code, 'csrf_refused', `${path}, ${name}`);
      }
    }
    assert.deepEqual(await h.store.auditHead(), headBefore, 'no refused request wrote an event');
    const v = await h.store.getUser(victim);
    assert.equal(v?.status, 'active');
    assert.equal(v?.name, 'Victim Person');
    assert.ok((await h.store.getSession(sessionId))?.revokedAt === null);
    // With the access cookie expired, a forged request does not even get the session's tokens rotated.
    h.clock.advance(16 * 60 * 1000);
    const generation = (await h.store.getSession(sessionId))?.generation;
    const forged = await inject('POST', `/console/users/${victim}/disable`, {
      cookie,
      headers: { origin: 'http://127.0.0.1:8080', accept: 'application/json' },
      form: { csrf },
    });
    assert.equal(forged.status, 403);
    assert.equal(cookiesOf(forged).length, 0);
    assert.equal((await h.store.getSession(sessionId))?.generation, generation);
    token = (await signIn(h, adminKey)).access_token;
    // A browser's refusal is a page, not JSON.
    const page = await inject('POST', `/console/users/${victim}/disable`, { cookie, headers: { origin: ORIGIN }, form: {} });
    assert.equal(page.status, 403);
    assert.match(String(page.headers['content-type']), /^text\/html/);
  });

  test('the console disables, edits and enables a user through core’s use cases, audited via "console" with the console principal', async () => {
    const { cookie, csrf } = await signedInBrowser();
    const ok = { origin: ORIGIN };
    const disabled = await inject('POST', `/console/users/${victim}/disable`, { cookie, headers: ok, form: { csrf } });
    assert.equal(disabled.status, 303);
    assert.equal((await h.store.getUser(victim))?.status, 'disabled');
    const edited = await inject('POST', `/console/users/${victim}/edit`, {
      cookie,
      headers: ok,
      form: { csrf, name: 'Victim Renamed', email: 'v@example.com', groups: 'ops, dev' },
    });
    assert.equal(edited.status, 303);
    const u = await h.store.getUser(victim);
    assert.equal(u?.name, 'Victim Renamed');
    assert.deepEqual([...(u?.groups ?? [])], ['dev', 'ops']);
    const inOps = await inject('GET', '/console/users?group=ops', { cookie });
    assert.match(inOps.body, new RegExp(`/console/users/${victim}`), 'the group filter finds the user');
    assert.doesNotMatch(inOps.body, new RegExp(`/console/users/${adminSubject}"`), 'and only the group');
    assert.equal((await inject('POST', `/console/users/${victim}/enable`, { cookie, headers: ok, form: { csrf } })).status, 303);
    assert.equal((await h.store.getUser(victim))?.status, 'active');
    const events = await h.store.listAuditEvents({ afterSeq: 0, limit: 10_000 });
    const mine = events.filter((e) => e.subject === victim && e.type.startsWith('user.') && e.data.via === 'console');
    assert.deepEqual(
      mine.map((e) => e.type),
      ['user.disabled', 'user.updated', 'user.enabled'],
    );
    const consoleSession = `ses_${/svca_([0-9A-Z]{26})/.exec(cookie)?.[1]}`;
    assert.ok(
      mine.every((e) => e.data.by_subject === adminSubject && e.data.by_session === consoleSession),
      'the console principal acts',
    );

    // The follow-live JSON: events after a sequence number.
    const head = (await h.store.auditHead())?.seq ?? 0;
    const live = await inject('GET', `/console/audit/events?after=${head - 3}`, { cookie, headers: { accept: 'application/json' } });
    assert.equal(live.status, 200);
    assert.equal(JSON.parse(live.body).events.length, 3);

    // The pages render for a signed-in operator.
    for (const path of [
      '/console/users',
      `/console/users/${victim}`,
      '/console/sessions',
      '/console/audit',
      '/console/audit?type=user',
      '/console/pairing',
      '/console/status',
    ]) {
      const r = await inject('GET', path, { cookie });
      assert.equal(r.status, 200, path);
      assert.match(r.body, /Sign out/);
    }

    // Add a user, then remove them: both audited via the console.
    const added = await inject('POST', '/console/users/new', {
      cookie,
      headers: ok,
      form: { csrf, realm: 'application', name: 'Temp Person', groups: 'tmp' },
    });
    assert.equal(added.status, 303);
    const tempSubject = /\/console\/users\/(sub_[0-9A-Z]{26})/.exec(String(added.headers.location))?.[1] as string;
    assert.equal((await h.store.getUser(tempSubject))?.name, 'Temp Person');
    assert.equal((await inject('POST', `/console/users/${tempSubject}/remove`, { cookie, headers: ok, form: { csrf } })).status, 303);
    assert.equal(await h.store.getUser(tempSubject), null);
    const tempEvents = (await h.store.listAuditEvents({ afterSeq: 0, limit: 10_000 })).filter((e) => e.subject === tempSubject);
    assert.deepEqual(
      tempEvents.map((e) => [e.type, e.data.via]),
      [
        ['user.created', 'console'],
        ['user.removed', 'console'],
      ],
    );

    // The last management device is kept, as on the API: a page says why, nothing is removed.
    const lastDevice = (await h.store.listDevices({ realm: 'management' }))[0]?.id as string;
    const kept = await inject('POST', `/console/devices/${lastDevice}/remove`, { cookie, headers: ok, form: { csrf } });
    assert.equal(kept.status, 400);
    assert.match(kept.body, /last management device/);
    assert.equal((await h.store.listDevices({ realm: 'management' })).length, 1);

    // Sign-out ends the console session: the cookie proves nothing afterwards.
    assert.equal((await inject('POST', '/console/logout', { cookie, headers: ok, form: { csrf } })).status, 200);
    assert.equal((await inject('GET', '/console/users', { cookie })).status, 401);
  });
});

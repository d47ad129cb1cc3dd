import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { auditDraft, newId, publicKeyHexOf, reviewAuditCheckpoints, signAuditCheckpoint } from '@svc/core';
import type { LinkRecord } from '@svc/core/store';
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
  let linkId: string;
  // The node key that signs the checkpoints this "service" exports, and the export's text.
  const nodeKey = generateKeyPairSync('ed25519');
  const nodeSigner = { publicKeyHex: publicKeyHexOf(nodeKey.publicKey), sign: (m: Uint8Array) => sign(null, m, nodeKey.privateKey) };
  let exported = '';

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
    h = await startHarness({
      socket: false,
      store: 'memory',
      management: {
        console: { providers: [{ name: 'passkeys', realms: ['application'] }] },
        // As the runtime reviews its checkpoint file: every line checked against the chain and the node key.
        auditCheckpoints: async (latest) => {
          const events = await h.store.listAuditEvents({ afterSeq: 0, limit: 100_000 });
          const review = reviewAuditCheckpoints(
            exported,
            { project: h.deps.projectId, events, publicKeyHex: nodeSigner.publicKeyHex },
            latest,
          );
          return { exported: true, total: review.total, failed: review.failed, checkpoints: [...review.checkpoints] };
        },
      },
    });
    const me = await admin(h);
    token = me.pair.access_token;
    adminKey = me.key;
    adminSubject = (await api(h, 'GET', '/v1/auth/me', { token })).body.subject as string;
    const added = await api(h, 'POST', '/v1/auth/users', {
      token,
      body: { realm: 'application', name: 'Victim Person', email: 'v@example.com' },
    });
    victim = added.body.user.subject as string;
    const now = h.clock.now();
    const link: LinkRecord = {
      id: newId('link', h.deps.clock, h.deps.random),
      realm: 'application',
      subject: victim,
      provider: 'passkeys',
      issuer: 'webauthn:localhost',
      externalSubject: 'credential-1',
      credentialData: null,
      counter: null,
      name: 'Victim’s laptop',
      createdAt: now,
      lastUsedAt: null,
      removedAt: null,
    };
    await h.store.createLink(
      link,
      auditDraft(h.deps, 'link.created', { realm: 'application', subject: victim, deviceId: link.id, data: { provider: 'passkeys' } }),
    );
    linkId = link.id;
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
      [`/console/users/${victim}/remove`, { confirm: 'yes' }],
      [`/console/links/${linkId}/remove`, {}],
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
    assert.equal((await h.store.getLink(linkId))?.removedAt, null, 'the linked sign-in stays');
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
      '/console/groups',
      '/console/audit/verify',
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
    // Removal is confirmed on a page of its own: a post without the confirmation removes nothing.
    const unconfirmed = await inject('POST', `/console/users/${tempSubject}/remove`, { cookie, headers: ok, form: { csrf } });
    assert.equal(unconfirmed.status, 303);
    assert.equal(unconfirmed.headers.location, `/console/users/${tempSubject}/remove`);
    assert.equal((await h.store.getUser(tempSubject))?.name, 'Temp Person');
    const confirmPage = await inject('GET', `/console/users/${tempSubject}/remove`, { cookie });
    assert.equal(confirmPage.status, 200);
    assert.match(confirmPage.body, /cannot be undone/);
    assert.match(confirmPage.body, /name="confirm" value="yes"/);
    const removed = await inject('POST', `/console/users/${tempSubject}/remove`, { cookie, headers: ok, form: { csrf, confirm: 'yes' } });
    assert.equal(removed.status, 303);
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

  test('the Groups page lists every group with its members and where it comes from; a user’s groups edited on their page show there', async () => {
    const { cookie, csrf } = await signedInBrowser();
    const ok = { origin: ORIGIN };
    const edited = await inject('POST', `/console/users/${victim}/edit`, {
      cookie,
      headers: ok,
      form: { csrf, name: 'Victim Person', email: 'v@example.com', groups: 'auditors' },
    });
    assert.equal(edited.status, 303);
    const groups = await inject('GET', '/console/groups', { cookie });
    assert.equal(groups.status, 200);
    assert.match(groups.body, /<strong>auditors<\/strong>/);
    assert.match(groups.body, new RegExp(`href="/console/users/${victim}">Victim Person</a>`), 'the member, by name, linked to their page');
    assert.match(groups.body, /<td>operator<\/td>/, 'given by an operator');
    const management = await inject('GET', '/console/groups?realm=management', { cookie });
    assert.doesNotMatch(management.body, /auditors/, 'the realm filter');
  });

  test('a linked sign-in is listed with its user and removed from the console (link.removed by the console principal, its sessions revoked)', async () => {
    const { cookie, csrf } = await signedInBrowser();
    const listed = await inject('GET', '/console/sessions?realm=application', { cookie });
    assert.match(listed.body, new RegExp(`action="/console/links/${linkId}/remove"`));
    assert.match(listed.body, /Victim’s laptop/);
    const userPage = await inject('GET', `/console/users/${victim}`, { cookie });
    assert.match(userPage.body, new RegExp(`action="/console/links/${linkId}/remove"`), 'also on the user’s page');
    assert.match(userPage.body, /Prepare link code/, 'and a link intent for this user: the recovery path');
    const removed = await inject('POST', `/console/links/${linkId}/remove`, {
      cookie,
      headers: { origin: ORIGIN },
      form: { csrf, back: `/console/users/${victim}` },
    });
    assert.equal(removed.status, 303);
    assert.equal(removed.headers.location, `/console/users/${victim}?done=unlinked`);
    assert.notEqual((await h.store.getLink(linkId))?.removedAt, null);
    const event = (await h.store.listAuditEvents({ afterSeq: 0, limit: 100_000 })).findLast((e) => e.type === 'link.removed');
    assert.equal(event?.subject, victim);
    assert.equal(event?.data.by_subject, adminSubject);
    const again = await inject('POST', `/console/links/${linkId}/remove`, { cookie, headers: { origin: ORIGIN }, form: { csrf } });
    assert.equal(again.status, 404, 'a removed link is gone');
  });

  test('a link intent for an existing user, from their page: the code is shown once and the intent names that user', async () => {
    const { cookie, csrf } = await signedInBrowser();
    const r = await inject('POST', '/console/pairing/link', {
      cookie,
      headers: { origin: ORIGIN },
      form: { csrf, realm: 'application', provider: 'passkeys', subject: victim },
    });
    assert.equal(r.status, 201, r.body);
    const code = /<p class="code-big"><code>([^<]+)<\/code>/.exec(r.body)?.[1];
    assert.match(code ?? '', /^[0-9A-Z]{4}-[0-9A-Z]{4}$/);
    assert.match(r.body, new RegExp(`/console/users/${victim}`));
    const intentId = /<dt>Intent<\/dt><dd><code>([^<]+)<\/code>/.exec(r.body)?.[1] as string;
    const intent = await h.store.getPairingIntent(intentId);
    assert.equal(intent?.subject, victim);
    assert.equal(intent?.realm, 'application');
    const events = await h.store.listAuditEvents({ afterSeq: 0, limit: 100_000 });
    assert.ok(
      events.some((e) => e.type === 'pairing.prepared' && e.data.intent_id === intentId),
      'audited as the API’s prepare is',
    );
    assert.doesNotMatch(JSON.stringify(events), new RegExp(code as string), 'the code is in no event');
  });

  test('GET /v1/auth/audit/checkpoints and the console’s verification page: each exported checkpoint verified against the node key and the chain; a truncated chain fails', async () => {
    const head = await h.store.auditHead();
    assert.ok(head !== null);
    const stranger = generateKeyPairSync('ed25519');
    const forged = signAuditCheckpoint(
      { project: h.deps.projectId, head, now: h.clock.now() },
      { publicKeyHex: publicKeyHexOf(stranger.publicKey), sign: (m) => sign(null, m, stranger.privateKey) },
    );
    const good = signAuditCheckpoint({ project: h.deps.projectId, head, now: h.clock.now() }, nodeSigner);
    // A checkpoint of a chain longer than the store's: as if events were cut off the end since.
    const ahead = signAuditCheckpoint(
      { project: h.deps.projectId, head: { seq: head.seq + 5, hash: 'a'.repeat(64) }, now: h.clock.now() },
      nodeSigner,
    );
    exported = `${JSON.stringify(good)}\n${JSON.stringify(forged)}\n`;
    const r = await api(h, 'GET', '/v1/auth/audit/checkpoints?limit=10', { token });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.exported, true);
    assert.equal(r.body.total, 2);
    assert.equal(r.body.failed, 1);
    assert.deepEqual(
      r.body.checkpoints.map((k: { line: number; ok: boolean; problem: string | null; length: number }) => [
        k.line,
        k.ok,
        k.problem,
        k.length,
      ]),
      [
        [2, false, 'other_key', head.seq],
        [1, true, null, head.seq],
      ],
    );
    assert.equal((await api(h, 'GET', '/v1/auth/audit/checkpoints?limit=201', { token })).status, 400);
    assert.equal((await api(h, 'GET', '/v1/auth/audit/checkpoints')).status, 401, 'a management bearer token is required');

    const { cookie } = await signedInBrowser();
    exported = `${JSON.stringify(good)}\n`;
    const fine = await inject('GET', '/console/audit/verify', { cookie });
    assert.match(fine.body, /The exported checkpoint verifies/);
    assert.match(fine.body, new RegExp(`<code>${good.node_id}</code>`), 'the signing node');
    assert.match(fine.body, /Verified/);
    exported = `${JSON.stringify(good)}\n${JSON.stringify(ahead)}\n`;
    const cut = await inject('GET', '/console/audit/verify', { cookie });
    assert.match(cut.body, /1 of 2 exported checkpoints fail/);
    assert.match(cut.body, /the chain lost events since/);
  });
});

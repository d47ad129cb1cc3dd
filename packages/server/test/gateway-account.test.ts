import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { auditDraft, newId } from '@svc/core';
import { newDeviceKey } from '@svc/store-testkit';
import { browserRequest, cookiesSet } from './support/browser-http.js';
import { echoAttach, type GatewayHarness, startGatewayHarness } from './support/gateway-harness.js';
import { type TestProvider, testRedirectProvider } from './support/test-provider.js';

const FLOW = 'svc-flow';

/** The credential the next ceremony proves, when a test asks for one it used before; else a new one. */
let nextCredential: string | null = null;

/** A passkey-kind provider whose every ceremony proves a new credential (as each new passkey is), or {@link nextCredential}. */
function passkeyProvider(name: string): TestProvider {
  const claims = { email: 'ada@example.com', email_verified: true, name: 'Ada Lovelace' };
  const made = () => {
    const subject = nextCredential ?? `cred-${randomUUID()}`;
    nextCredential = null;
    return testRedirectProvider({ name, kind: 'webauthn', issuer: 'webauthn:localhost', subject, claims });
  };
  const base = made();
  return { ...base, finish: (ctx, input) => made().finish(ctx, input) };
}

/** The passkey that signed the browser's session in (the card the page marks). */
function currentPasskey(text: string): string {
  const cards = text.split('<li class="card">').slice(1);
  const card = cards.find((c) => c.includes('used for this session')) ?? '';
  return passkeyIds(card)[0] as string;
}

type Jar = Record<string, string>;

/** Signs up through a passkey-kind redirect provider: the browser's session cookies. */
async function signUp(h: GatewayHarness, provider: string, intent = 'signup'): Promise<Jar> {
  const begun = await browserRequest(h, 'GET', `/.svc/auth/v1/providers/${provider}/begin?intent=${intent}`);
  assert.equal(begun.status, 302, begun.text);
  const flow = cookiesSet(begun.setCookies)[FLOW] as string;
  const location = (begun.headers.get('location') ?? '').slice(h.gatewayBase.length);
  const done = await browserRequest(h, 'GET', location, { cookies: { [FLOW]: flow } });
  assert.equal(done.status, 303, done.text);
  const set = cookiesSet(done.setCookies);
  return { 'svc-access': set['svc-access'] as string, 'svc-refresh': set['svc-refresh'] as string };
}

/** Links another passkey-kind provider's credential to the signed-in browser's subject (the "add another passkey" ceremony). */
async function linkAnother(h: GatewayHarness, jar: Jar, provider: string): Promise<void> {
  const begun = await browserRequest(h, 'POST', `/.svc/auth/v1/providers/${provider}/begin`, {
    cookies: jar,
    headers: { origin: h.gatewayBase, 'content-type': 'application/json' },
    body: JSON.stringify({ intent: 'link', return: '/.svc/account' }),
  });
  assert.equal(begun.status, 200, begun.text);
  const flow = cookiesSet(begun.setCookies)[FLOW] as string;
  const done = await browserRequest(h, 'GET', (begun.body.redirect as string).slice(h.gatewayBase.length), {
    cookies: { ...jar, [FLOW]: flow },
  });
  assert.equal(done.status, 303, done.text);
}

/** A same-origin form POST of the account page. */
function formPost(h: GatewayHarness, jar: Jar, path: string, form: Record<string, string> = {}, origin = h.gatewayBase) {
  return browserRequest(h, 'POST', path, {
    cookies: jar,
    headers: { origin, 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
    body: new URLSearchParams(form).toString(),
  });
}

function page(h: GatewayHarness, jar: Jar, query = '') {
  return browserRequest(h, 'GET', `/.svc/account${query}`, { cookies: jar, headers: { accept: 'text/html' } });
}

/** The ids of the passkeys the page lists (from their rename forms). */
function passkeyIds(text: string): string[] {
  return [...text.matchAll(/action="\/\.svc\/account\/passkeys\/(lnk_[A-Za-z0-9_-]+)\/rename"/g)].map((m) => m[1] as string);
}

describe('the account page (/.svc/account)', () => {
  let h: GatewayHarness;
  let phone: TestProvider;
  let laptop: TestProvider;
  before(async () => {
    phone = passkeyProvider('passkey');
    laptop = passkeyProvider('passkey2');
    const corp = testRedirectProvider({
      name: 'corp',
      kind: 'oidc',
      issuer: 'https://login.example.com',
      subject: 'ada-at-corp',
      claims: { email: 'ada@corp.example', email_verified: true },
      policy: { label: 'Acme SSO' },
    });
    h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach, gateway: { providers: [phone, laptop, corp] } });
  });
  after(() => h.close());

  test('company sign-ins are listed by their label (never the module alias) and can be unlinked while a passkey remains', async () => {
    const jar = await signUp(h, 'passkey');
    await linkAnother(h, jar, 'corp');
    const r = await page(h, jar);
    assert.equal(r.status, 200);
    assert.match(r.text, /<h2 id="logins">Your company sign-ins<\/h2>/);
    assert.match(r.text, /<strong>Acme SSO<\/strong>: ada@corp\.example/);
    assert.doesNotMatch(r.text, />corp</, 'no module alias shown');
    const id = /action="\/\.svc\/account\/logins\/(lnk_[A-Za-z0-9_-]+)\/remove"/.exec(r.text)?.[1];
    assert.ok(id, r.text);
    const removed = await formPost(h, jar, `/.svc/account/logins/${id}/remove`);
    assert.equal(removed.status, 303, removed.text);
    assert.equal(removed.headers.get('location'), '/.svc/account?done=unlinked');
    assert.notEqual((await h.deps.store.getLink(id))?.removedAt, null);
    const after = await page(h, jar, '?done=unlinked');
    assert.match(after.text, /The company sign-in was unlinked/);
    assert.doesNotMatch(after.text, /Your company sign-ins/);
  });

  test('a browser without a session is sent to sign in and back to the account page', async () => {
    const r = await browserRequest(h, 'GET', '/.svc/account', { headers: { accept: 'text/html' } });
    assert.equal(r.status, 302);
    assert.equal(r.headers.get('location'), '/.svc/auth/v1/login?return=%2F.svc%2Faccount');
  });

  test('the page says who you are, how you signed in, your passkeys and sessions, with a strict CSP', async () => {
    const jar = await signUp(h, 'passkey');
    const r = await page(h, jar);
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers.get('content-type') ?? '', /^text\/html/);
    const csp = r.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'nonce-/);
    assert.doesNotMatch(csp, /unsafe-inline/);
    assert.match(r.text, /<h1>Your account<\/h1>/);
    assert.match(r.text, /ada@example\.com <span class="tag ok">verified<\/span>/);
    assert.match(r.text, /With a passkey, <time/);
    assert.equal(passkeyIds(r.text).length, 1);
    assert.match(r.text, /This is your only way to sign in, so it cannot be removed/);
    assert.doesNotMatch(r.text, /\/remove"/, 'no remove button for the only way in');
    assert.match(r.text, /You are not signed in anywhere else/);
    assert.match(r.text, /id="add-passkey"/);
  });

  test('removing the last way in is refused (409 last_credential): the page says why, the passkey stays, nothing is audited', async () => {
    const jar = await signUp(h, 'passkey');
    const [only] = passkeyIds((await page(h, jar)).text);
    const events = (await h.deps.store.auditHead())?.seq;
    const r = await formPost(h, jar, `/.svc/account/passkeys/${only}/remove`);
    assert.equal(r.status, 409, r.text);
    assert.match(r.text, /role="alert">This passkey is your only way to sign in, so it was not removed/);
    assert.equal((await h.deps.store.getLink(only as string))?.removedAt, null);
    assert.equal((await h.deps.store.auditHead())?.seq, events);
  });

  test('a device key is another way in: with one, the only passkey may be removed', async () => {
    const jar = await signUp(h, 'passkey');
    const me = (await browserRequest(h, 'GET', '/.svc/auth/v1/me', { headers: { authorization: `Bearer ${jar['svc-access']}` } })).body;
    const device = {
      id: newId('device', h.deps.clock, h.deps.random),
      publicKey: newDeviceKey().publicKey,
      realm: 'application' as const,
      subject: me.subject as string,
      name: 'build-bot',
      createdAt: h.deps.clock.now(),
      removedAt: null,
    };
    const event = auditDraft(h.deps, 'device.enrolled', { realm: 'application', subject: device.subject, deviceId: device.id });
    assert.equal(await h.deps.store.enrollDevice(device, event), 'enrolled');
    const listed = await page(h, jar);
    assert.doesNotMatch(listed.text, /This is your only way to sign in/);
    const [only] = passkeyIds(listed.text);
    const removed = await formPost(h, jar, `/.svc/account/passkeys/${only}/remove`);
    assert.equal(removed.status, 303, removed.text);
    assert.notEqual((await h.deps.store.getLink(only as string))?.removedAt, null);
  });

  test('add another passkey, rename it, remove the first: each a same-origin form, audited as self-service', async () => {
    const jar = await signUp(h, 'passkey');
    await linkAnother(h, jar, 'passkey2');
    const listed = await page(h, jar);
    const first = currentPasskey(listed.text);
    const second = passkeyIds(listed.text).find((id) => id !== first);
    assert.ok(first !== undefined && second !== undefined, listed.text);
    const session = (await browserRequest(h, 'GET', '/.svc/auth/v1/me', { headers: { authorization: `Bearer ${jar['svc-access']}` } }))
      .body;
    assert.match(session.subject, /^sub_/);

    const renamed = await formPost(h, jar, `/.svc/account/passkeys/${second}/rename`, { name: '  Work laptop <b>  ' });
    assert.equal(renamed.status, 303, renamed.text);
    assert.equal(renamed.headers.get('location'), '/.svc/account?done=renamed');
    const after = await page(h, jar, '?done=renamed');
    assert.match(after.text, /The passkey was renamed/);
    assert.match(after.text, /<strong>Work laptop &lt;b&gt;<\/strong>/, 'trimmed and escaped');

    // The passkey that signed this browser in: removing it ends this session (sign in again).
    const removed = await formPost(h, jar, `/.svc/account/passkeys/${first}/remove`);
    assert.equal(removed.status, 303, removed.text);
    assert.equal(removed.headers.get('location'), '/.svc/auth/v1/login?return=%2F.svc%2Faccount');
    assert.notEqual((await h.deps.store.getLink(first as string))?.removedAt, null);
    assert.equal((await page(h, jar)).status, 302, 'this session ended with the passkey that made it');

    const events = await h.deps.store.listAuditEvents({ afterSeq: 0, limit: 100_000 });
    const rename = events.findLast((e) => e.type === 'link.renamed');
    assert.equal(rename?.data.via, 'self');
    assert.equal(rename?.data.by_subject, session.subject);
    assert.equal(rename?.data.by_session, session.session);
    assert.equal(rename?.data.name, 'Work laptop <b>');
    const removal = events.findLast((e) => e.type === 'link.removed');
    assert.equal(removal?.deviceId, first);
    assert.equal(removal?.data.via, 'self');
    assert.equal(removal?.data.by_session, session.session);
  });

  test("another user's passkey cannot be renamed or removed from my account (as if it did not exist)", async () => {
    const mine = await signUp(h, 'passkey');
    // Another person on this gateway.
    const theirs = await signUp(h, 'passkey2');
    const [theirPasskey] = passkeyIds((await page(h, theirs)).text);
    const rename = await formPost(h, mine, `/.svc/account/passkeys/${theirPasskey}/rename`, { name: 'pwned' });
    assert.equal(rename.status, 404, rename.text);
    assert.match(rename.text, /That passkey is no longer on your account/);
    const remove = await formPost(h, mine, `/.svc/account/passkeys/${theirPasskey}/remove`);
    assert.equal(remove.status, 404);
    const link = await h.deps.store.getLink(theirPasskey as string);
    assert.equal(link?.removedAt, null);
    assert.notEqual(link?.name, 'pwned');
  });

  test('a bad name is refused with a sentence (400), nothing renamed', async () => {
    const jar = await signUp(h, 'passkey');
    const [only] = passkeyIds((await page(h, jar)).text);
    const r = await formPost(h, jar, `/.svc/account/passkeys/${only}/rename`, { name: 'evil\u202ename' });
    assert.equal(r.status, 400);
    assert.match(r.text, /That name cannot be used/);
  });

  test('sign out everywhere else: the other browser is signed out, this one stays; audited as self-service', async () => {
    nextCredential = 'cred-two-browsers';
    const here = await signUp(h, 'passkey');
    // The same passkey signs in a second browser: the same person, another session.
    nextCredential = 'cred-two-browsers';
    const there = await signUp(h, 'passkey', 'signin');
    const listed = await page(h, here);
    assert.match(listed.text, /Sign out everywhere else \(1 other session\)/);
    const r = await formPost(h, here, '/.svc/account/sessions/revoke-others');
    assert.equal(r.status, 303, r.text);
    assert.equal(r.headers.get('location'), '/.svc/account?done=signed-out-elsewhere');
    assert.equal((await page(h, here)).status, 200);
    const other = await browserRequest(h, 'GET', '/app', { cookies: there, headers: { accept: 'text/html' } });
    assert.equal(other.status, 302, 'the other browser is sent to sign in');
    const events = await h.deps.store.listAuditEvents({ afterSeq: 0, limit: 100_000 });
    const revoked = events.findLast((e) => e.type === 'session.revoked');
    assert.equal(revoked?.data.via, 'self');
    assert.equal(revoked?.data.reason, 'revoked_by_owner');
  });

  describe('CSRF: a form posted from another site is refused 403 csrf_refused and changes nothing', () => {
    for (const [what, path, form] of [
      ['sign out everywhere else', '/sessions/revoke-others', {}],
      ['rename', '/passkeys/LINK/rename', { name: 'pwned' }],
      ['remove', '/passkeys/LINK/remove', {}],
    ] as const) {
      test(`cross-origin ${what}`, async () => {
        const jar = await signUp(h, 'passkey');
        const victimElsewhere = await signUp(h, 'passkey');
        await linkAnother(h, jar, 'passkey2');
        const [link] = passkeyIds((await page(h, jar)).text);
        const before = (await h.deps.store.auditHead())?.seq;
        const target = `/.svc/account${path.replace('LINK', link as string)}`;
        const r = await formPost(h, jar, target, form, 'https://evil.example');
        assert.equal(r.status, 403, r.text);
        // A browser is shown the refusal as a page, its stable code as the reference.
        assert.match(r.headers.get('content-type') ?? '', /^text\/html/);
        assert.match(r.text, /csrf_refused/);
        // A cross-site form with no Origin but Sec-Fetch-Site: cross-site is refused too.
        const bySite = await browserRequest(h, 'POST', target, {
          cookies: jar,
          headers: { 'sec-fetch-site': 'cross-site', 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams(form).toString(),
        });
        assert.equal(bySite.status, 403, bySite.text);
        assert.equal((await h.deps.store.auditHead())?.seq, before, 'nothing written');
        assert.equal((await h.deps.store.getLink(link as string))?.removedAt, null);
        assert.notEqual((await h.deps.store.getLink(link as string))?.name, 'pwned');
        assert.equal((await page(h, victimElsewhere)).status, 200);
      });
    }
  });

  test('an action without a session goes to sign in, and writes nothing', async () => {
    const r = await formPost(h, {}, '/.svc/account/sessions/revoke-others');
    assert.equal(r.status, 303);
    assert.equal(r.headers.get('location'), '/.svc/auth/v1/login?return=%2F.svc%2Faccount');
  });
});

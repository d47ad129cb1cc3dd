// Who an OIDC sign-in says the person is (#27), end to end: the bundled, signed OIDC provider
// in `svc serve` against a real OpenID Provider (panva's oidc-provider) that sends email and
// name. A real Chromium signs in; the application receives Svc-Email and Svc-Name; the IdP
// changes the person's name and email and the next sign-in carries them; an operator disables
// the user and the next sign-in is refused with a page; a provider configured for sign-up by
// invitation creates the user disabled until the operator enables it.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { claimsOf, startIdp, type TestIdp } from '../../../provider-oidc/test/support/idp.js';
import { cleanEnv, freePort, initProject, keygen, type StartedProcess, startUntilReady, svcOk, tempDir } from '../helpers.js';
import { launchBrowser, REPO_ROOT } from '../repo.js';

const APP_READY = /svc app: application gateway listening on (https?:\/\/\S+)\n/;
const SESSION_COOKIE = /^(__Host-)?svc-(access|refresh)$/;

type Browser = Awaited<ReturnType<typeof launchBrowser>>;
type Context = Awaited<ReturnType<Browser['newContext']>>;
type Page = Awaited<ReturnType<Context['newPage']>>;

/** The application behind the gateway: answers with the identity headers it received. */
async function echoApp(): Promise<{ url: string; hits: () => number; close(): Promise<void> }> {
  let hits = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    hits += 1;
    const seen = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k.startsWith('svc-') && k !== 'svc-assertion'));
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ path: req.url, ...seen }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, hits: () => hits, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('OIDC users through svc serve: the IdP’s email and name reach the application, follow the IdP, and a disabled user is refused', () => {
  const tmp = tempDir('svc-oidc-users-');
  const dir = join(tmp.dir, 'demo');
  const shots = process.env.SVC_SCREENSHOTS;
  const adminEnv = cleanEnv({ HOME: join(tmp.dir, 'admin-home'), SVC_CREDENTIALS: join(tmp.dir, 'admin-home', 'credentials.json') });
  const adminKey = join(tmp.dir, 'admin.pem');
  /** What the IdP says about each person, changed by the tests between sign-ins. */
  const people = new Map<string, Record<string, unknown>>();
  let app: Awaited<ReturnType<typeof echoApp>>;
  let idp: TestIdp;
  let served: StartedProcess<string>;
  let browser: Browser;
  let gateway: string;
  const callbackOf = (name: string) => `${gateway}/.svc/auth/v1/providers/${name}/callback`;

  before(async () => {
    const init = await initProject(dir);
    await svcOk(['auth', 'enroll', init.bootstrap_token, await keygen(adminKey), dir]);
    app = await echoApp();
    const port = await freePort();
    gateway = `http://localhost:${port}`;
    idp = await startIdp({
      redirectUris: [callbackOf('corp'), callbackOf('invite')],
      claimsInIdToken: true,
      claims: (sub) => people.get(sub) ?? claimsOf(sub),
    });
    const sums = readFileSync(join(REPO_ROOT, 'packages/runtime/addons/SHA256SUMS'), 'utf8');
    const digest = /^([0-9a-f]{64}) {2}svc-provider-oidc-/m.exec(sums)?.[1];
    assert.ok(digest, 'the build bundles the OIDC provider');
    const publisher = readFileSync(join(REPO_ROOT, 'keys/svc-publisher.pub'), 'utf8').trim();
    const file = join(dir, 'project.edn');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/^\{/, `{:svc/trusted-publishers {"svc" "${publisher}"}\n `));
    await svcOk(['package', 'install', '@svc/provider-oidc', '--sha256', digest, dir]);
    const secretFile = join(tmp.dir, 'oidc-client-secret');
    writeFileSync(secretFile, `${idp.clientSecret}\n`, { mode: 0o600 });
    const oidc = (policy: string) =>
      `{:package "@svc/provider-oidc" :activate [:svc/auth-provider]
                 :config {:oidc/issuer "${idp.issuer}" :oidc/client-id "${idp.clientId}"
                          :oidc/client-secret #svc/secret "file:${secretFile}"
                          :provider/jit true ${policy}}}`;
    const edn = readFileSync(file, 'utf8')
      .replace(/^\{/, `{:svc/app-upstream "${app.url}"\n `)
      .replace(':svc/modules  {', `:svc/modules {:corp ${oidc('')}\n :invite ${oidc(':provider/jit-status :disabled')}\n `);
    assert.ok(edn.includes(':invite'), edn);
    writeFileSync(file, edn);
    served = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', `127.0.0.1:${port}`, dir],
      (out) => APP_READY.exec(out)?.[1] ?? null,
      { env: cleanEnv() },
    );
    const management = /svc auth: management API listening on (http:\/\/\S+)/.exec(served.stdout())?.[1];
    assert.ok(management, served.stdout());
    await svcOk(['auth', 'login', '--key', adminKey, '--url', management], { env: adminEnv });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await served?.stop();
    await app?.close();
    await idp?.close();
    tmp.cleanup();
  });

  async function withPage<T>(fn: (page: Page, context: Context) => Promise<T>): Promise<T> {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      page.setDefaultTimeout(15_000);
      return await fn(page, context);
    } finally {
      await context.close();
    }
  }

  /** From the application, through the sign-in page's link for `provider`, the IdP's login and consent, back to the gateway. */
  async function signInAtIdp(page: Page, provider: string, sub: string): Promise<void> {
    await page.goto(`${gateway}/whoami`);
    assert.match(new URL(page.url()).pathname, /^\/\.svc\/auth\/v1\/login/);
    await page.click(`a[data-provider="${provider}"]`);
    await page.waitForURL((u) => u.origin === idp.issuer);
    await page.fill('input[name=login]', sub);
    await page.fill('input[name=password]', 'any password');
    await page.click('button[type=submit]');
    await page.click('button:has-text("Continue")');
    await page.waitForURL((u) => u.origin === gateway);
  }

  /** Signs `sub` in through `provider` and answers what the application received. */
  async function whoami(provider: string, sub: string): Promise<Record<string, string>> {
    return withPage(async (page) => {
      await signInAtIdp(page, provider, sub);
      await page.waitForURL(`${gateway}/whoami`);
      return JSON.parse((await page.textContent('body')) ?? '') as Record<string, string>;
    });
  }

  /** Signs `sub` in through `provider` expecting a refusal page: its status, text and the session cookies left. */
  async function refused(provider: string, sub: string, shot?: string): Promise<{ status: number; text: string; cookies: string[] }> {
    return withPage(async (page, context) => {
      let status = 0;
      page.on('response', (r) => {
        if (r.url().startsWith(`${callbackOf(provider)}?`)) status = r.status();
      });
      await signInAtIdp(page, provider, sub);
      await page.waitForSelector('h1');
      if (shots !== undefined && shot !== undefined) await page.screenshot({ path: join(shots, shot) });
      const cookies = (await context.cookies(gateway)).filter((c) => SESSION_COOKIE.test(c.name)).map((c) => c.name);
      return { status, text: (await page.textContent('body')) ?? '', cookies };
    });
  }

  async function user(
    subject: string,
  ): Promise<{ name: string | null; email: string | null; status: string; sources: Record<string, string> }> {
    const out = JSON.parse((await svcOk(['auth', 'users', 'show', subject, '--json'], { env: adminEnv })).stdout);
    return out.user ?? out;
  }

  test('the application receives the IdP’s email and name; the IdP changes them and the next sign-in carries the new ones', async () => {
    people.set('ada', { email: 'ada@corp.example', email_verified: true, name: 'Ada Lovelace' });
    const first = await whoami('corp', 'ada');
    assert.match(first['svc-subject'] ?? '', /^sub_/);
    assert.equal(first['svc-email'], 'ada@corp.example');
    assert.equal(decodeURIComponent(first['svc-name'] ?? ''), 'Ada Lovelace');
    const stored = await user(first['svc-subject'] as string);
    assert.equal(stored.sources.name, 'provider:corp');

    people.set('ada', { email: 'ada.king@corp.example', email_verified: true, name: 'Ada King, Countess of Lovelace — Ådå' });
    const second = await whoami('corp', 'ada');
    assert.equal(second['svc-subject'], first['svc-subject'], 'the same person: found by the link, not by email');
    assert.equal(second['svc-email'], 'ada.king@corp.example');
    assert.equal(decodeURIComponent(second['svc-name'] ?? ''), 'Ada King, Countess of Lovelace — Ådå');
    assert.equal((await user(first['svc-subject'] as string)).email, 'ada.king@corp.example');
  });

  test('a disabled user’s next OIDC sign-in is refused: a 403 page saying an administrator must approve, no session, the application not reached', async () => {
    people.set('dora', { email: 'dora@corp.example', email_verified: true, name: 'Dora' });
    const seen = await whoami('corp', 'dora');
    await svcOk(['auth', 'users', 'disable', seen['svc-subject'] as string], { env: adminEnv });
    const hits = app.hits();
    const r = await refused('corp', 'dora', 'oidc-user-disabled.png');
    assert.equal(r.status, 403);
    assert.match(r.text, /administrator must approve/);
    assert.match(r.text, /user_disabled/);
    assert.deepEqual(r.cookies, []);
    assert.equal(app.hits(), hits, 'the application was not reached');
    const audit = (await svcOk(['auth', 'audit', dir, '--json'])).stdout.split('\n');
    assert.ok(
      audit.some((l) => l.includes('provider.signin_failed') && l.includes('"user_disabled"') && l.includes(seen['svc-subject'] as string)),
    );
  });

  test('sign-up by invitation: the first sign-in creates the user disabled and is refused; once an operator enables it, the same person signs in', async () => {
    people.set('bob', { email: 'bob@corp.example', email_verified: true, name: 'Bob Æsir' });
    const r = await refused('invite', 'bob', 'oidc-invitation-pending.png');
    assert.equal(r.status, 403);
    assert.match(r.text, /not active/);
    assert.deepEqual(r.cookies, []);
    const links = JSON.parse((await svcOk(['auth', 'links', dir, '--json'])).stdout) as {
      links: { subject: string; provider: string; name: string }[];
    };
    const link = links.links.find((l) => l.provider === 'invite');
    assert.ok(link, 'the link was created with the user');
    assert.equal(link.name, 'bob@corp.example');
    const pending = await user(link.subject);
    assert.equal(pending.status, 'disabled');
    assert.equal(pending.name, 'Bob Æsir');
    await svcOk(['auth', 'users', 'enable', link.subject], { env: adminEnv });
    const seen = await whoami('invite', 'bob');
    assert.equal(seen['svc-subject'], link.subject);
    assert.equal(decodeURIComponent(seen['svc-name'] ?? ''), 'Bob Æsir');
  });
});

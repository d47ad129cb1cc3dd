// OIDC login end to end, as an operator sets it up and a user signs in: the bundled, signed
// OIDC provider installed with `svc package install` by name and digest, trusted through the
// repository's publisher key, activated in project.edn against a real OpenID Provider (panva's
// oidc-provider on 127.0.0.1, a confidential client), and `svc serve` in front of an
// application. A real Chromium is sent to the gateway's sign-in page, signs in at the IdP and
// reaches the application; the attacks (a tampered state, a replayed code, another issuer's
// answer, an email domain the project does not provision) are refused by the running service.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startIdp, type TestIdp } from '../../../provider-oidc/test/support/idp.js';
import { cleanEnv, freePort, initProject, type StartedProcess, startUntilReady, svcOk, tempDir } from '../helpers.js';
import { launchBrowser, REPO_ROOT } from '../repo.js';

const ROOT = REPO_ROOT;
const APP_READY = /svc app: application gateway listening on (https?:\/\/\S+)\n/;
/** The gateway's session cookies (plain names over http, `__Host-` over TLS); `svc-flow` is not one. */
const SESSION_COOKIE = /^(__Host-)?svc-(access|refresh)$/;

type Browser = Awaited<ReturnType<typeof launchBrowser>>;
type Context = Awaited<ReturnType<Browser['newContext']>>;
type Page = Awaited<ReturnType<Context['newPage']>>;
/** A link as `svc auth links --json` prints it. */
interface LinkJson {
  readonly id: string;
  readonly subject: string;
  readonly provider: string;
  readonly issuer: string;
}

/** The application behind the gateway: answers with the identity headers it received. */
async function echoApp(): Promise<{ url: string; hits: () => number; close(): Promise<void> }> {
  let hits = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    hits += 1;
    const seen = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k.startsWith('svc-') && k !== 'svc-assertion'));
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ path: req.url, ...seen, cookie: req.headers.cookie ?? null }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, hits: () => hits, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('OIDC login through svc serve: the signed, bundled provider, confined, against a real OpenID Provider in a real Chromium', () => {
  const tmp = tempDir('svc-oidc-serve-');
  const dir = join(tmp.dir, 'demo');
  let app: Awaited<ReturnType<typeof echoApp>>;
  let idp: TestIdp;
  let other: TestIdp;
  let served: StartedProcess<string>;
  let browser: Browser;
  let gateway: string;
  const callbackOf = (name: string) => `${gateway}/.svc/auth/v1/providers/${name}/callback`;
  // A predicate, not a glob: in Playwright's globs `?` is a one-character wildcard.
  const atCallback = (name: string) => (u: URL) => u.href.startsWith(`${callbackOf(name)}?`);

  before(async () => {
    await initProject(dir);
    app = await echoApp();
    const port = await freePort();
    // The gateway on `localhost`, the IdPs on 127.0.0.1: the browser keeps their cookies apart.
    gateway = `http://localhost:${port}`;
    idp = await startIdp({ redirectUris: [callbackOf('corp'), callbackOf('strict')] });
    // Another real OpenID Provider, with a client registered for the same callback: the attacker's.
    other = await startIdp({ redirectUris: [callbackOf('corp')] });
    const sums = readFileSync(join(ROOT, 'packages/runtime/addons/SHA256SUMS'), 'utf8');
    const digest = /^([0-9a-f]{64}) {2}svc-provider-oidc-/m.exec(sums)?.[1];
    assert.ok(digest, 'the build bundles the OIDC provider');
    const publisher = readFileSync(join(ROOT, 'keys/svc-publisher.pub'), 'utf8').trim();
    const file = join(dir, 'project.edn');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/^\{/, `{:svc/trusted-publishers {"svc" "${publisher}"}\n `));
    await svcOk(['package', 'install', '@svc/provider-oidc', '--sha256', digest, dir]);
    // The client secret as a file reference (mode 0600): never in argv, nor in any child's environment.
    const secretFile = join(tmp.dir, 'oidc-client-secret');
    writeFileSync(secretFile, `${idp.clientSecret}\n`, { mode: 0o600 });
    const oidc = (domains: string) =>
      `{:package "@svc/provider-oidc" :activate [:svc/auth-provider]
                 :config {:oidc/issuer "${idp.issuer}" :oidc/client-id "${idp.clientId}"
                          :oidc/client-secret #svc/secret "file:${secretFile}"
                          :provider/jit true :provider/jit-email-domains ["${domains}"]}}`;
    const edn = readFileSync(file, 'utf8')
      .replace(/^\{/, `{:svc/app-upstream "${app.url}"\n `)
      .replace(':svc/modules  {', `:svc/modules {:corp ${oidc('corp.example')}\n :strict ${oidc('elsewhere.example')}\n `);
    assert.ok(edn.includes(':strict'), edn);
    assert.ok(!edn.includes(idp.clientSecret), 'no literal secret in project.edn');
    writeFileSync(file, edn);
    served = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', `127.0.0.1:${port}`, dir],
      (out) => APP_READY.exec(out)?.[1] ?? null,
      { env: cleanEnv() },
    );
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await served?.stop();
    await app?.close();
    await idp?.close();
    await other?.close();
    tmp.cleanup();
  });

  /** Runs `fn` with a page in a fresh browser context (its own cookies), closed whatever happens. */
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

  /** The IdP's own login and consent pages, as a person fills them in. */
  async function loginAtIdp(page: Page, sub: string): Promise<void> {
    await page.fill('input[name=login]', sub);
    await page.fill('input[name=password]', 'any password');
    await page.click('button[type=submit]');
    await page.click('button:has-text("Continue")');
  }

  /** From the application, through the sign-in page's link for `provider`, to the IdP's login form. */
  async function startAtApp(page: Page, provider: string): Promise<void> {
    await page.goto(`${gateway}/whoami`);
    assert.match(new URL(page.url()).pathname, /^\/\.svc\/auth\/v1\/login/);
    await page.click(`a[data-provider="${provider}"]`);
    await page.waitForURL((u) => u.origin === idp.issuer || u.origin === other.issuer);
  }

  /**
   * Holds the IdP's answer (the redirect to the gateway's callback) instead of delivering it, as
   * an attacker between the two would. Playwright does not route the hops of a redirect chain,
   * so the consent form's POST is routed: sent to the IdP without following its redirects, the
   * IdP's resume step fetched with the context's cookies, and the callback URL it names kept.
   */
  async function holdAtConsent(page: Page, context: Context, at: TestIdp): Promise<() => URL> {
    let held: URL | undefined;
    await page.route(
      (u) => u.origin === at.issuer && /^\/interaction\/[^/]+$/.test(u.pathname),
      async (route) => {
        if (route.request().method() !== 'POST' || !(route.request().postData() ?? '').includes('prompt=consent')) {
          return route.continue();
        }
        const confirmed = await route.fetch({ maxRedirects: 0 });
        const resume = new URL(confirmed.headers().location ?? '', at.issuer);
        const answered = await context.request.get(resume.href, { maxRedirects: 0 });
        held = new URL(answered.headers().location ?? '', at.issuer);
        return route.fulfill({ status: 200, contentType: 'text/plain', body: 'held' });
      },
    );
    return () => {
      assert.ok(held !== undefined, 'the IdP answered with a redirect to the callback');
      return held;
    };
  }

  async function holdCallback(page: Page, context: Context, provider: string, sub: string): Promise<URL> {
    const held = await holdAtConsent(page, context, idp);
    await startAtApp(page, provider);
    await loginAtIdp(page, sub);
    await page.waitForSelector('text=held');
    const url = held();
    assert.ok(url.href.startsWith(`${callbackOf(provider)}?`), url.href);
    return url;
  }

  async function sessionCookies(context: Context): Promise<string[]> {
    return (await context.cookies(gateway)).filter((c) => SESSION_COOKIE.test(c.name)).map((c) => c.name);
  }

  async function links(): Promise<LinkJson[]> {
    const out = await svcOk(['auth', 'links', dir, '--json']);
    return (JSON.parse(out.stdout) as { links: LinkJson[] }).links;
  }

  test('a user signs in at the real IdP from the sign-in page, is provisioned just in time by verified email domain, and signs in again as the same subject', async () => {
    const first = await withPage(async (page) => {
      await startAtApp(page, 'corp');
      await loginAtIdp(page, 'ada');
      await page.waitForURL(`${gateway}/whoami`);
      const seen = JSON.parse((await page.textContent('body')) ?? '') as Record<string, string | null>;
      assert.equal(seen['svc-realm'], 'application');
      assert.match(seen['svc-subject'] ?? '', /^sub_/);
      assert.match(seen['svc-device'] ?? '', /^lnk_/, 'the session was made from the OIDC link');
      assert.equal(seen.cookie, null, "the gateway's session cookies never reach the application");
      // Sign out: the application is out of reach again.
      const out = await page.evaluate(async () => (await fetch('/.svc/auth/v1/logout', { method: 'POST' })).status);
      assert.ok(out < 400, `logout answered ${out}`);
      await page.goto(`${gateway}/whoami`);
      assert.match(new URL(page.url()).pathname, /^\/\.svc\/auth\/v1\/login/);
      return seen;
    });
    // The operator sees the link, with the IdP's issuer.
    const link = JSON.stringify((await links()).find((l) => l.id === first['svc-device']) ?? null);
    assert.ok(link.includes(idp.issuer), link);
    assert.ok(link.includes(first['svc-subject'] as string), link);

    // A second sign-in, from another browser: the same subject and link, a new session.
    const second = await withPage(async (page) => {
      await startAtApp(page, 'corp');
      await loginAtIdp(page, 'ada');
      await page.waitForURL(`${gateway}/whoami`);
      return JSON.parse((await page.textContent('body')) ?? '') as Record<string, string | null>;
    });
    assert.equal(second['svc-subject'], first['svc-subject']);
    assert.equal(second['svc-device'], first['svc-device']);
    assert.notEqual(second['svc-session'], first['svc-session']);
  });

  test('a tampered state on the callback is refused: no session cookie, the application not reached, and the flow cannot be finished after', async () => {
    await withPage(async (page, context) => {
      const held = await holdCallback(page, context, 'corp', 'mallory-victim');
      const state = held.searchParams.get('state') ?? '';
      assert.ok(state.length >= 20);
      const tampered = new URL(held);
      tampered.searchParams.set('state', `${state.slice(0, -1)}${state.endsWith('A') ? 'B' : 'A'}`);
      const hits = app.hits();
      const refused = await page.goto(tampered.href);
      assert.ok((refused?.status() ?? 0) >= 400, `the tampered callback answered ${refused?.status()}`);
      assert.deepEqual(await sessionCookies(context), []);
      // The untampered answer no longer finishes it: the flow was used up by the refusal.
      const after = await page.goto(held.href);
      assert.ok((after?.status() ?? 0) >= 400, `the genuine callback after the tampered one answered ${after?.status()}`);
      assert.deepEqual(await sessionCookies(context), []);
      assert.equal(app.hits(), hits, 'the application was not reached');
      await page.goto(`${gateway}/whoami`);
      assert.match(new URL(page.url()).pathname, /^\/\.svc\/auth\/v1\/login/);
    });
  });

  test('a replayed callback (the same code, even with the flow cookie copied) is refused and makes no second session', async () => {
    let flowCookies: Awaited<ReturnType<Context['cookies']>> = [];
    const { held, subject } = await withPage(async (page, context) => {
      let url: URL | undefined;
      // The redirect hops are seen (not routable): the callback URL, and the flow cookie it carried.
      page.on('request', (r) => {
        if (atCallback('corp')(new URL(r.url()))) url = new URL(r.url());
      });
      await startAtApp(page, 'corp');
      flowCookies = (await context.cookies(gateway)).filter((c) => /svc-flow$/.test(c.name));
      await loginAtIdp(page, 'grace');
      await page.waitForURL(`${gateway}/whoami`);
      const seen = JSON.parse((await page.textContent('body')) ?? '') as Record<string, string | null>;
      assert.match(seen['svc-subject'] ?? '', /^sub_/);
      const before = await context.cookies(gateway);
      assert.ok(url !== undefined);
      // The same browser requests the exact callback URL again: refused, its session unchanged.
      const again = await page.goto(url.href);
      assert.ok((again?.status() ?? 0) >= 400, `the replayed callback answered ${again?.status()}`);
      assert.deepEqual(
        (await context.cookies(gateway)).filter((c) => SESSION_COOKIE.test(c.name)),
        before.filter((c) => SESSION_COOKIE.test(c.name)),
      );
      return { held: url, subject: seen['svc-subject'] };
    });
    assert.ok(
      flowCookies.some((c) => /svc-flow$/.test(c.name)),
      'the flow cookie was there when the callback came',
    );
    // An attacker who copied the flow cookie and the callback URL replays both: no session.
    await withPage(async (page, context) => {
      await context.addCookies(flowCookies);
      const hits = app.hits();
      const replay = await page.goto(held.href);
      assert.ok((replay?.status() ?? 0) >= 400, `the replay answered ${replay?.status()}`);
      assert.deepEqual(await sessionCookies(context), []);
      assert.equal(app.hits(), hits);
    });
    const own = (await links()).filter((l) => l.subject === subject);
    assert.equal(own.length, 1, 'one link for the subject, not a second');
  });

  test("mix-up: another OpenID Provider's answer (its code and iss) on the configured provider's callback is refused", async () => {
    // The attacker completes a sign-in at its own IdP, whose client redirects to the same callback.
    const attacker = await withPage(async (page, context) => {
      const held = await holdAtConsent(page, context, other);
      const authorize = new URL(`${other.issuer}/auth`);
      authorize.search = new URLSearchParams({
        client_id: other.clientId,
        redirect_uri: callbackOf('corp'),
        response_type: 'code',
        scope: 'openid email profile',
        state: 'attacker-state-0123456789',
        code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
        code_challenge_method: 'S256',
      }).toString();
      await page.goto(authorize.href);
      await loginAtIdp(page, 'ada');
      await page.waitForSelector('text=held');
      return held();
    });
    assert.equal(attacker.searchParams.get('iss'), other.issuer);
    const corpRefusals = async () =>
      (await svcOk(['auth', 'audit', dir, '--json'])).stdout
        .split('\n')
        .filter((l) => l.includes('provider.signin_failed') && l.includes('"corp"') && l.includes('provider_refused')).length;
    const refusedBefore = await corpRefusals();
    // The victim's browser began a flow at the configured IdP; the attacker's answer is spliced in.
    await withPage(async (page, context) => {
      let victimState: string | null = null;
      // The redirect to the IdP is a hop Playwright sees but does not route: its `state` is read, and the victim stops at the IdP's login form.
      page.on('request', (r) => {
        const u = new URL(r.url());
        if (u.origin === idp.issuer && u.pathname === '/auth') victimState = u.searchParams.get('state');
      });
      await startAtApp(page, 'corp');
      assert.ok(victimState !== null);
      const spliced = new URL(callbackOf('corp'));
      spliced.search = new URLSearchParams({
        code: attacker.searchParams.get('code') ?? '',
        state: victimState,
        iss: other.issuer,
      }).toString();
      const hits = app.hits();
      const refused = await page.goto(spliced.href);
      assert.ok((refused?.status() ?? 0) >= 400, `the other issuer's answer was accepted (${refused?.status()})`);
      assert.deepEqual(await sessionCookies(context), []);
      assert.equal(app.hits(), hits);
    });
    // Refused by the provider: the service audits it as `provider_refused`.
    assert.equal(await corpRefusals(), refusedBefore + 1, 'the refusal is audited');
  });

  test('just-in-time provisioning is refused for an email domain not in :provider/jit-email-domains: no subject, no link, audited', async () => {
    const before = await links();
    await withPage(async (page, context) => {
      await startAtApp(page, 'strict');
      await loginAtIdp(page, 'outsider');
      await page.waitForURL((u) => u.origin === gateway);
      assert.notEqual(new URL(page.url()).pathname, '/whoami', 'the application was not reached');
      assert.deepEqual(await sessionCookies(context), []);
    });
    const afterLinks = await links();
    assert.equal(afterLinks.length, before.length, 'no link (and so no subject) was created');
    assert.ok(!afterLinks.some((l) => l.provider === 'strict'));
    const events = (await svcOk(['auth', 'audit', dir, '--json'])).stdout
      .split('\n')
      .filter((l) => l.includes('provider.signin_failed') && l.includes('strict'));
    assert.ok(events.length >= 1, 'provider.signin_failed is audited for the strict provider');
    assert.ok(!events.some((e) => e.includes(idp.clientSecret)));
  });
});

// One sign-in across route hosts (`:svc/app-auth-origin`) in a real Chromium: three host names
// with no shared parent domain mapped to the gateway on loopback, real HTTP, the real SQLite
// store. Sign in once at the auth origin, reach the other hosts signed in without a sign-in
// page, log out on one, signed out on all three.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { checkPage, launchBrowser } from '../repo.js';
import { echoAttach, type GatewayHarness, startGatewayHarness } from '../support/gateway-harness.js';
import { testRedirectProvider } from '../support/test-provider.js';

const AUTH = 'http://auth.a.test';
const APP = 'http://app.b.test';
const WIKI = 'http://wiki.c.test';

// playwright's types through launchBrowser: this package does not import playwright-core itself.
type Browser = Awaited<ReturnType<typeof launchBrowser>>;
type Page = Awaited<ReturnType<Browser['newPage']>>;

/** The JSON the echo application answered on the page, or null when the page is not its answer. */
async function echoOf(page: Page): Promise<{ principal: { session: string; subject: string } | null; url: string } | null> {
  try {
    return JSON.parse((await page.textContent('body')) ?? 'null');
  } catch {
    return null;
  }
}

describe('one sign-in, every route host, in Chromium', () => {
  let h: GatewayHarness;
  let browser: Browser;
  before(async () => {
    h = await startGatewayHarness({
      attach: echoAttach,
      gateway: { providers: [testRedirectProvider({ subject: 'alice', jit: true })], sso: { authOrigin: AUTH, origins: [APP, WIKI] } },
    });
    // Every *.test name on port 80 is the gateway on loopback: the browser sends each its own Host.
    browser = await launchBrowser([`--host-resolver-rules=MAP *.test:80 127.0.0.1:${h.gatewayPort}`]);
  });
  after(async () => {
    await browser?.close();
    await h?.close();
  });

  test('sign in once at the auth origin; the other hosts are signed in without a sign-in page; one logout signs out all three', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const navigations: string[] = [];
      page.on('request', (r) => {
        if (r.isNavigationRequest()) navigations.push(r.url());
      });

      // A page on app.b.test without a session: the auth origin's sign-in page, once.
      await page.goto(`${APP}/orders?id=7`);
      assert.equal(new URL(page.url()).origin, AUTH);
      assert.equal(new URL(page.url()).pathname, '/.svc/auth/v1/login');
      await page.click('a.provider');
      await page.waitForURL(`${APP}/orders?id=7`);
      const app = await echoOf(page);
      assert.ok(app?.principal !== null && app?.principal !== undefined, 'signed in on app.b.test');
      assert.equal(app.url, '/orders?id=7');

      // wiki.c.test: signed in through the handoff, no sign-in page on the way.
      navigations.length = 0;
      await page.goto(`${WIKI}/pages/home`);
      await page.waitForURL(`${WIKI}/pages/home`);
      const wiki = await echoOf(page);
      assert.equal(wiki?.principal?.subject, app.principal.subject, 'the same person');
      assert.notEqual(wiki?.principal?.session, app.principal.session, 'a session of its own');
      assert.ok(!navigations.some((u) => new URL(u).pathname === '/.svc/auth/v1/login'), `no sign-in page: ${navigations.join(' ')}`);
      const callback = navigations.find((u) => new URL(u).pathname === '/.svc/auth/v1/sso/callback');
      assert.ok(callback !== undefined && new URL(callback).origin === WIKI, `the code went to wiki.c.test only: ${navigations.join(' ')}`);
      assert.ok(!navigations.some((u) => u.includes('svch_') && new URL(u).origin !== WIKI), 'the code was never sent to another host');

      // The auth origin itself is signed in too (the sign-in session).
      await page.goto(`${AUTH}/dashboard`);
      assert.equal((await echoOf(page))?.principal?.subject, app.principal.subject);

      // Each host holds only its own HttpOnly cookies; no script reads them.
      for (const origin of [AUTH, APP, WIKI]) {
        const names = (await context.cookies(origin)).filter((c) => c.name === 'svc-access' || c.name === 'svc-refresh');
        assert.equal(names.length, 2, `${origin} has its session cookies`);
        assert.ok(names.every((c) => c.httpOnly && c.sameSite === 'Lax' && c.domain === new URL(origin).hostname));
      }

      // One logout, on app.b.test.
      await page.goto(`${APP}/orders`);
      const out = await page.evaluate(async () => (await fetch('/.svc/auth/v1/logout', { method: 'POST' })).status);
      assert.equal(out, 200);

      // Every host is signed out: each sends the browser to sign in again, at the auth origin.
      for (const origin of [APP, WIKI, AUTH]) {
        await page.goto(`${origin}/after-logout`);
        assert.equal(new URL(page.url()).origin, AUTH, `${origin} is signed out`);
        assert.equal(new URL(page.url()).pathname, '/.svc/auth/v1/login', `${origin} is signed out`);
      }

      // The code of the wiki handoff, opened again: refused, with a page that offers to sign in again.
      const replay = await page.goto(callback);
      assert.equal(replay?.status(), 400);
      assert.match((await page.textContent('main')) ?? '', /sign-in link no longer works/i);
      assert.ok(await page.locator('a.button', { hasText: /sign/i }).count(), 'a way to sign in again');
      await checkPage(page, 'gateway-sso-handoff-refused');
    } finally {
      await context.close();
    }
  });
});

// The gateway's browser sessions in a real Chromium (test-support/browser.ts): what the browser
// accepts as cookies over loopback HTTP, a cross-origin page forging a form POST, and a whole
// sign-in through the sign-in page with a provider, then logout.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { launchBrowser, pageWithAuthenticator } from '../repo.js';
import { applicationUser, echoAttach, type GatewayHarness, startGatewayHarness } from '../support/gateway-harness.js';
import { loopbackCertificate } from '../support/loopback-cert.js';
import { scratch } from '../support/node-harness.js';
import { testRedirectProvider, testWebauthnProvider } from '../support/test-provider.js';

/** A plain server on 127.0.0.1:0 answering every request with `handler`. */
async function startPage(
  handler: (url: string) => { type: string; body: string; setCookie?: string[] },
): Promise<{ server: Server; origin: string }> {
  const server = createServer((req, res) => {
    const page = handler(req.url ?? '/');
    if (page.setCookie !== undefined) res.setHeader('set-cookie', page.setCookie);
    res.setHeader('content-type', page.type);
    res.end(page.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

let browser: Awaited<ReturnType<typeof launchBrowser>>;
before(async () => {
  browser = await launchBrowser();
});
after(async () => {
  await browser.close();
});

describe('what Chromium accepts over loopback HTTP (why plain HTTP uses prefix-less names)', () => {
  test('a __Host- cookie without Secure is refused; the gateway-style prefix-less HttpOnly cookie is kept and sent back', async () => {
    const page = await startPage(() => ({
      type: 'text/plain',
      body: 'ok',
      setCookie: [
        '__Host-nosecure=1; Path=/; HttpOnly; SameSite=Lax',
        '__Host-secure=1; Path=/; HttpOnly; SameSite=Lax; Secure',
        'svc-probe=1; Path=/; HttpOnly; SameSite=Lax',
      ],
    }));
    const context = await browser.newContext();
    try {
      for (const origin of [page.origin, page.origin.replace('127.0.0.1', 'localhost')]) {
        const tab = await context.newPage();
        await tab.goto(`${origin}/`);
        const names = (await context.cookies(origin)).map((c) => c.name);
        assert.ok(!names.includes('__Host-nosecure'), `${origin}: ${names}`);
        assert.ok(names.includes('svc-probe'), `${origin}: ${names}`);
        // Chromium's loopback exception (documented in docs/providers.md): Secure is accepted
        // over plain HTTP on loopback. Not every browser has it, hence the prefix-less names.
        assert.ok(names.includes('__Host-secure'), `${origin}: ${names}`);
      }
    } finally {
      await context.close();
      page.server.close();
    }
  });
});

describe('CSRF in a real browser', () => {
  let h: GatewayHarness;
  const reached: string[] = [];
  before(async () => {
    h = await startGatewayHarness({
      attach: async (app) => {
        app.addHook('onRequest', async (req) => {
          reached.push(`${req.method} ${req.url}`);
        });
        await echoAttach(app);
      },
    });
  });
  after(() => h.close());

  test('a page on another origin auto-submits a form POST to the gateway with the session cookies: refused, the application never receives it', async () => {
    const user = await applicationUser(h);
    // Same site (127.0.0.1), another port: SameSite=Lax cookies DO go with this POST; only the
    // CSRF rule stands between the page and the application.
    const attacker = await startPage(() => ({
      type: 'text/html',
      body: `<!doctype html><form id="f" method="post" action="${h.gatewayBase}/app/transfer">
<input name="to" value="mallory"><input name="amount" value="1000"></form>
<script>document.getElementById('f').submit()</script>`,
    }));
    const context = await browser.newContext();
    try {
      await context.addCookies([
        { name: 'svc-access', value: user.pair.access_token, url: h.gatewayBase, httpOnly: true, sameSite: 'Lax' },
        { name: 'svc-refresh', value: user.pair.refresh_token, url: h.gatewayBase, httpOnly: true, sameSite: 'Lax' },
      ]);
      const page = await context.newPage();
      const answered = page.waitForResponse((r) => r.url() === `${h.gatewayBase}/app/transfer`);
      await page.goto(`${attacker.origin}/`);
      const response = await answered;
      assert.equal(response.status(), 403);
      // A browser's form navigation gets the refusal as a page, with the same status and code.
      const text = await response.text();
      assert.match(text, /<code>csrf_refused<\/code>/, 'the cookies were sent (else 401) and the origin refused');
      assert.ok(!reached.some((r) => r.startsWith('POST')), `the application received: ${reached}`);
      // The same session from the gateway's own origin works.
      const own = await page.goto(`${h.gatewayBase}/app/home`);
      assert.equal(own?.status(), 200);
    } finally {
      await context.close();
      attacker.server.close();
    }
  });
});

describe('signing in through the sign-in page in a real browser', () => {
  let h: GatewayHarness;
  const provider = testRedirectProvider({ subject: 'alice', jit: true });
  before(async () => {
    h = await startGatewayHarness({ attach: echoAttach, gateway: { providers: [provider] } });
  });
  after(() => h.close());

  test('the sign-in page with the test provider, HttpOnly cookies, the protected page reached, logout, refused after', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      // A protected page without a session: the sign-in page, with the way back.
      await page.goto(`${h.gatewayBase}/app/dashboard?tab=2`);
      assert.equal(new URL(page.url()).pathname, '/.svc/auth/v1/login');
      await page.click('a.provider');
      await page.waitForURL(`${h.gatewayBase}/app/dashboard?tab=2`);
      const echo = JSON.parse((await page.textContent('body')) ?? 'null');
      assert.equal(echo.url, '/app/dashboard?tab=2');
      assert.ok(echo.principal !== null && typeof echo.principal.session === 'string', 'signed in');
      assert.deepEqual(echo.principal.claims.amr.includes('fed'), true);
      assert.equal(echo.headers.cookie, undefined, 'the application never sees the session cookies');

      const cookies = await context.cookies(h.gatewayBase);
      const session = cookies.filter((c) => c.name === 'svc-access' || c.name === 'svc-refresh');
      assert.equal(session.length, 2, JSON.stringify(cookies.map((c) => c.name)));
      for (const c of session) {
        assert.equal(c.httpOnly, true);
        assert.equal(c.sameSite, 'Lax');
        assert.equal(c.path, '/');
      }
      assert.ok(!cookies.some((c) => c.name === 'svc-flow'), 'the flow cookie is spent');
      assert.equal(await page.evaluate('document.cookie'), '', 'no script reads the session');

      // Logout from the application's page (same origin), then the page is refused.
      const out = await page.evaluate(async () => (await fetch('/.svc/auth/v1/logout', { method: 'POST' })).status);
      assert.equal(out, 200);
      assert.deepEqual(
        (await context.cookies(h.gatewayBase)).filter((c) => c.name.startsWith('svc-')),
        [],
        'the cookies are cleared',
      );
      const refused = await page.evaluate(async () => (await fetch('/app/dashboard', { headers: { accept: 'application/json' } })).status);
      assert.equal(refused, 401);
      // The old cookies, replayed, prove nothing: the session is revoked.
      await context.addCookies(session.map((c) => ({ name: c.name, value: c.value, url: h.gatewayBase, httpOnly: true })));
      const replayed = await page.evaluate(async () => (await fetch('/app/dashboard', { headers: { accept: 'application/json' } })).status);
      assert.equal(replayed, 401);
    } finally {
      await context.close();
    }
  });
});

describe('a passkey ceremony run by the sign-in page (WebAuthn JSON helpers, virtual authenticator)', () => {
  let h: GatewayHarness;
  const provider = testWebauthnProvider();
  before(async () => {
    h = await startGatewayHarness({ attach: echoAttach, gateway: { providers: [provider] } });
  });
  after(() => h.close());

  test('create a passkey from the sign-in page, reach the page, log out, sign in again with the passkey as the same subject', async () => {
    const { context, page } = await pageWithAuthenticator(browser);
    // The RP id is localhost (an IP address cannot be one): the gateway is reached as localhost.
    const base = `http://localhost:${h.gatewayPort}`;
    try {
      await page.goto(`${base}/.svc/auth/v1/login?return=%2Fapp%2Fhome`);
      // Sign-up asks for the new user's name first.
      await page.click('button[data-intent="signup"]');
      assert.match((await page.textContent('#status')) ?? '', /Type your name first/);
      await page.fill('#display-name', 'Zoë Ångström');
      await page.click('button[data-intent="signup"]');
      await page.waitForURL(`${base}/app/home`);
      const first = JSON.parse((await page.textContent('body')) ?? 'null');
      assert.deepEqual(first.principal.claims.amr, ['hwk', 'user']);
      assert.equal(first.principal.claims.name, 'Zoë Ångström', 'the name typed at sign-up is the new user’s');
      const out = await page.evaluate(
        async () => ((await (await fetch('/.svc/auth/v1/logout', { method: 'POST' })).json()) as { revoked: boolean }).revoked,
      );
      assert.equal(out, true);

      await page.goto(`${base}/app/home`);
      assert.equal(new URL(page.url()).pathname, '/.svc/auth/v1/login', 'signed out: back to the sign-in page');
      await page.click('button[data-intent="signin"]');
      await page.waitForURL(`${base}/app/home`);
      const second = JSON.parse((await page.textContent('body')) ?? 'null');
      assert.equal(second.principal.subject, first.principal.subject, 'the passkey signs in the subject it created');
      assert.notEqual(second.principal.session, first.principal.session);
      assert.equal(provider.finished(), 2);
    } finally {
      await context.close();
    }
  });
});

describe('over TLS the session lives in __Host- cookies with Secure', () => {
  test('a sign-in over https sets __Host-svc-access and __Host-svc-refresh, Secure and HttpOnly, which Chromium keeps and sends', async () => {
    const tmp = scratch();
    const { cert, key } = loopbackCertificate(tmp.dir);
    const h = await startGatewayHarness({
      attach: echoAttach,
      gateway: { providers: [testRedirectProvider({ subject: 'grace' })], https: { cert: readFileSync(cert), key: readFileSync(key) } },
    });
    // The browser trusts nothing about this self-signed certificate but its use in this test.
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    try {
      const base = `https://127.0.0.1:${h.gatewayPort}`;
      const page = await context.newPage();
      await page.goto(`${base}/app/secure`);
      assert.equal(new URL(page.url()).pathname, '/.svc/auth/v1/login');
      await page.click('a.provider');
      await page.waitForURL(`${base}/app/secure`);
      const echo = JSON.parse((await page.textContent('body')) ?? 'null');
      assert.ok(echo.principal !== null);
      const cookies = await context.cookies(base);
      assert.deepEqual(cookies.map((c) => c.name).sort(), ['__Host-svc-access', '__Host-svc-refresh']);
      for (const c of cookies) {
        assert.equal(c.secure, true);
        assert.equal(c.httpOnly, true);
        assert.equal(c.sameSite, 'Lax');
      }
      const out = await page.evaluate(async () => (await fetch('/.svc/auth/v1/logout', { method: 'POST' })).status);
      assert.equal(out, 200);
      assert.deepEqual(await context.cookies(base), []);
    } finally {
      await context.close();
      await h.close();
      tmp.cleanup();
    }
  });
});

// The gateway's pages in a real Chromium, as a member of staff meets them: the branded sign-in
// page (provider labels, never module aliases), the pairing page, every refusal a browser can
// meet (403 with who you are, 404, 400, the application unreachable or not answering, a
// provider down, rate limiting, a disabled account), and step-up (a sign-in too old, or not by
// a passkey, sends the browser to sign in again and back). Each page is checked by
// `checkPage`: a screenshot under docs/screenshots/, axe-core clean, readable at 360 px.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { connect, createServer, type Server } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Clock } from '@svc/core';
import { upstreamAttach } from '../../src/gateway/upstream.js';
import { createChallengeBudget } from '../../src/http/challenge-budget.js';
import type { PageBrand } from '../../src/pages/layout.js';
import { checkPage, launchBrowser, pageWithAuthenticator } from '../repo.js';
import { echoAttach, type GatewayHarness, requirement, startGateway, startGatewayHarness, testPolicy } from '../support/gateway-harness.js';
import { type TestProvider, testRedirectProvider, testWebauthnProvider } from '../support/test-provider.js';

/** A small logo: the company's mark, as an SVG the pages show as an image. */
const LOGO_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#fff"/><path d="M9 24 16 7l7 17h-4l-3-8-3 8z" fill="#0f766e"/></svg>';
const BRAND: PageBrand = { name: 'Acme', accent: '#0f766e', logo: `data:image/svg+xml;base64,${Buffer.from(LOGO_SVG).toString('base64')}` };

/** A labelled provider: what the sign-in page calls it. */
function labelled(provider: TestProvider, label: string | null): TestProvider {
  return { ...provider, policy: { ...provider.policy, label } };
}

/** A TCP server that accepts connections and never answers (an application that hangs). */
async function silentServer(): Promise<{ server: Server; port: number }> {
  const server = createServer(() => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

/**
 * A port nothing listens on (an application that is down): 127.0.0.1:1, checked to refuse a
 * connection. Not an ephemeral port bound and released: the real tier runs four test files at
 * once, and another file's server could take that port meanwhile and answer in the refusal's
 * place (a CI run's page showed no heading for 30 s).
 */
async function closedPort(): Promise<number> {
  const port = 1;
  await new Promise<void>((resolve, reject) => {
    const probe = connect(port, '127.0.0.1');
    probe.once('connect', () => {
      probe.destroy();
      reject(new Error(`127.0.0.1:${port} accepts connections on this machine: the test needs a port nothing listens on`));
    });
    probe.once('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNREFUSED' ? resolve() : reject(err)));
  });
  return port;
}

let browser: Awaited<ReturnType<typeof launchBrowser>>;
before(async () => {
  browser = await launchBrowser();
});
after(async () => {
  await browser.close();
});

describe('the branded sign-in page, the 403, 404 and 400 pages, and step-up', () => {
  let h: GatewayHarness;
  const sso = labelled(testRedirectProvider({ name: 'corp', subject: 'alice', jit: true }), 'Acme SSO');
  const passkey = testWebauthnProvider();
  before(async () => {
    h = await startGatewayHarness({
      attach: echoAttach,
      policy: testPolicy({
        requirements: [
          requirement('/ops/*', { groups: ['ops', 'admins'] }),
          requirement('/admin/*', { maxAuthAgeSeconds: 300 }),
          requirement('/keys/*', { amr: ['hwk'] }),
        ],
      }),
      gateway: { providers: [sso, passkey], brand: BRAND, siteName: 'Acme Intranet' },
    });
  });
  after(() => h.close());

  test('the sign-in page: the brand, one button per provider by its label, no module alias; the pairing page', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${h.gatewayBase}/app/dashboard`);
      assert.equal(new URL(page.url()).pathname, '/.svc/auth/v1/login');
      assert.equal(await page.textContent('h1'), 'Sign in');
      const buttons = (await page.locator('.provider').allTextContents()).map((t) => t.trim());
      assert.deepEqual(buttons, ['Sign in with Acme SSO', 'Sign in with a passkey', 'Create a passkey']);
      const text = (await page.textContent('main')) ?? '';
      assert.doesNotMatch(text, /\bcorp\b|\(passkey\)/, 'no module alias on the page');
      assert.match(text, /Acme Intranet/, "the passkey provider's site name");
      assert.equal(await page.textContent('.brand'), 'Acme');
      await checkPage(page, 'gateway-sign-in');
      await page.goto(`${h.gatewayBase}/.svc/auth/v1/login?pairing=int_01M81B7CT8HVNVECCX78GQT5YW`);
      assert.equal(await page.textContent('h1'), 'Set up your sign-in');
      assert.deepEqual(
        (await page.locator('.provider').allTextContents()).map((t) => t.trim()),
        ['Link your Acme SSO account', 'Set up a passkey'],
      );
      await page.click('button[data-provider="passkey"]');
      assert.match((await page.textContent('#status')) ?? '', /Type the code you were given first/);
      await checkPage(page, 'gateway-pairing');
    } finally {
      await context.close();
    }
  });

  test("a passkey the browser refuses: the browser's own text never shows, a plain sentence with what to try next does", async () => {
    const context = await browser.newContext();
    try {
      // The browser's WebAuthn API failing as Chromium does when the person cancels or it times out.
      // (A string: tsx's compiled functions may name helpers the page does not have.)
      await context.addInitScript(`{
        const refuse = () => Promise.reject(new DOMException(
          'The operation either timed out or was not allowed. See: https://www.w3.org/TR/webauthn-2/#sctn-privacy-considerations-client.',
          'NotAllowedError'));
        Object.defineProperty(CredentialsContainer.prototype, 'get', { value: refuse });
        Object.defineProperty(CredentialsContainer.prototype, 'create', { value: refuse });
      }`);
      const page = await context.newPage();
      // The passkey's RP id is localhost: at that address the only failure is the browser's.
      await page.goto(`http://localhost:${h.gatewayPort}/.svc/auth/v1/login`);
      await page.click('button[data-intent="signin"]');
      await page.locator('#status', { hasText: /\S/ }).waitFor({ timeout: 10_000 });
      const status = (await page.textContent('#status')) ?? '';
      assert.equal(
        status,
        'Sign-in failed: The passkey request was cancelled or timed out. Try again, and confirm on your device when it asks.',
      );
      assert.doesNotMatch(status, /w3\.org|operation either/);
      await checkPage(page, 'gateway-sign-in-passkey-error');
    } finally {
      await context.close();
    }
  });

  test('the account page of a person who signs in with the company sign-in: listed by its label, kept while it is the only way in', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${h.gatewayBase}/.svc/account`);
      await page.click('a[data-provider="corp"]');
      await page.waitForURL(`${h.gatewayBase}/.svc/account`);
      assert.equal(await page.textContent('#logins'), 'Your company sign-ins');
      const card = (await page.textContent('ul.logins')) ?? '';
      assert.match(card, /Acme SSO: alice@example\.com/);
      assert.match(card, /only way to sign in, so it cannot be removed/);
      assert.equal(await page.locator('ul.logins button').count(), 0, 'no unlink button for the only way in');
      assert.match((await page.textContent('ul.sessions')) ?? '', /Signed in with Acme SSO \(alice@example\.com\)/);
      assert.equal((await page.textContent('#add-passkey'))?.trim(), 'Add a passkey');
      await checkPage(page, 'account-company-sign-in');
    } finally {
      await context.close();
    }
  });

  test('signed in without the group a path needs: a 403 page naming who is signed in and what the path needs, with a way to switch accounts', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${h.gatewayBase}/ops/deploy`);
      await page.click('a[data-provider="corp"]');
      await page.waitForURL(`${h.gatewayBase}/ops/deploy`);
      assert.equal(await page.textContent('h1'), 'You do not have access to this page');
      const text = (await page.textContent('main')) ?? '';
      assert.match(text, /alice@example\.com/);
      assert.match(text, /a member of ops or admins/);
      assert.match((await page.textContent('header')) ?? '', /Signed in as/);
      await checkPage(page, 'gateway-forbidden');
      // "Sign out and use another account" ends the session and shows the sign-in page.
      await page.click('main button[type="submit"]');
      await page.waitForURL(/\/\.svc\/auth\/v1\/login$/);
    } finally {
      await context.close();
    }
  });

  test('an unknown /.svc/ route is a 404 page; a malformed link a 400 page; neither shows internal text', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const missing = await page.goto(`${h.gatewayBase}/.svc/auth/v1/no-such-page`);
      assert.equal(missing?.status(), 404);
      assert.equal(await page.textContent('h1'), 'Page not found');
      assert.match((await page.textContent('main')) ?? '', /Reference: not_found/);
      await checkPage(page, 'gateway-not-found');
      const bad = await page.goto(`${h.gatewayBase}/.svc/auth/v1/login?pairing=not-an-intent`);
      assert.equal(bad?.status(), 400);
      assert.equal(await page.textContent('h1'), 'This request could not be understood');
      assert.doesNotMatch((await page.textContent('main')) ?? '', /int_|pairing must be/, 'not the detail meant for developers');
      await checkPage(page, 'gateway-bad-request');
    } finally {
      await context.close();
    }
  });

  test('a link with path parameters, refused before routing (/docs;jsessionid=1), is a 400 page too; a script still gets problem+json', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const refused = await page.goto(`${h.gatewayBase}/docs;jsessionid=1`);
      assert.equal(refused?.status(), 400);
      assert.match(refused?.headers()['content-type'] ?? '', /^text\/html/);
      assert.match(refused?.headers()['content-security-policy'] ?? '', /default-src 'none'/);
      assert.equal(await page.textContent('h1'), 'This request could not be understood');
      assert.match((await page.textContent('main')) ?? '', /Reference: invalid_request/);
      await checkPage(page, 'gateway-bad-path', { narrow: false });
    } finally {
      await context.close();
    }
    const script = await fetch(`${h.gatewayBase}/docs;jsessionid=1`, { headers: { accept: 'application/json' } });
    assert.equal(script.status, 400);
    assert.match(script.headers.get('content-type') ?? '', /^application\/problem\+json/);
    assert.equal(((await script.json()) as { code: string }).code, 'invalid_request');
  });

  test('step-up: a sign-in older than the path allows sends the browser to sign in again with a passkey, and back to the page', async () => {
    const { context, page } = await pageWithAuthenticator(browser);
    const base = `http://localhost:${h.gatewayPort}`;
    try {
      await page.goto(`${base}/.svc/auth/v1/login?return=%2Fadmin%2Fpanel`);
      await page.fill('#display-name', 'Grace Hopper');
      await page.click('button[data-intent="signup"]');
      await page.waitForURL(`${base}/admin/panel`);
      const first = JSON.parse((await page.textContent('body')) ?? 'null');
      assert.equal(first.url, '/admin/panel', 'a fresh sign-in reaches the page');
      // Past the path's max-auth-age (300 s), within the access token's lifetime.
      h.clock.advance(301_000);
      await page.goto(`${base}/admin/panel?tab=audit`);
      await page.waitForURL(/\/\.svc\/auth\/v1\/login\?/);
      const at = new URL(page.url());
      assert.equal(at.searchParams.get('return'), '/admin/panel?tab=audit');
      assert.equal(at.searchParams.get('step-up'), 'recent');
      assert.equal(await page.textContent('h1'), 'Sign in again');
      assert.match((await page.textContent('#step-up')) ?? '', /needs a recent sign-in/);
      await checkPage(page, 'gateway-step-up');
      await page.click('button[data-intent="signin"]');
      await page.waitForURL(`${base}/admin/panel?tab=audit`);
      const again = JSON.parse((await page.textContent('body')) ?? 'null');
      assert.equal(again.url, '/admin/panel?tab=audit', 'back where it was, signed in again');
      assert.ok(Date.parse(again.principal.claims.auth_time) > Date.parse(first.principal.claims.auth_time), 'a new sign-in');
      // An API client with the old sign-in keeps the 403.
    } finally {
      await context.close();
    }
  });

  test('step-up by method: signed in through the identity provider, a passkey-only path offers only the passkey', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${h.gatewayBase}/app/home`);
      await page.click('a[data-provider="corp"]');
      await page.waitForURL(`${h.gatewayBase}/app/home`);
      await page.goto(`${h.gatewayBase}/keys/rotate`);
      await page.waitForURL(/step-up=method/);
      assert.match((await page.textContent('#step-up')) ?? '', /needs a sign-in with a passkey/);
      const buttons = (await page.locator('.provider').allTextContents()).map((t) => t.trim());
      assert.ok(!buttons.includes('Sign in with Acme SSO'), `only providers that can satisfy the path: ${buttons}`);
      assert.ok(buttons.includes('Sign in with a passkey'));
      await checkPage(page, 'gateway-step-up-passkey', { narrow: false });
    } finally {
      await context.close();
    }
  });
});

describe('the application and the providers unavailable, rate limiting, a disabled account', () => {
  let h: GatewayHarness;
  let hanging: Awaited<ReturnType<typeof silentServer>>;
  const gateways: { close(): Promise<void> }[] = [];
  before(async () => {
    h = await startGatewayHarness({ attach: echoAttach });
    hanging = await silentServer();
  });
  after(async () => {
    for (const g of gateways) await g.close();
    hanging.server.close();
    await h.close();
  });

  /** A gateway in front of `upstream`, with `providers`, on the shared store. */
  async function gatewayTo(upstream: string, providers: TestProvider[], extra: Record<string, unknown> = {}) {
    const g = await startGateway(h, {
      attach: upstreamAttach(
        { upstream: new URL(upstream), identityHeaders: () => ({}) },
        { connectMs: 1_000, responseMs: 1_000, idleMs: 1_000 },
      ),
      providers,
      brand: BRAND,
      ...extra,
    });
    gateways.push({ close: () => g.app.close() });
    return g;
  }

  test('the application down (502) and not answering (504): pages naming the application, with a way to try again', async () => {
    const sso = labelled(testRedirectProvider({ name: 'corp', subject: 'bob', jit: true }), 'Acme SSO');
    const down = await gatewayTo(`http://127.0.0.1:${await closedPort()}`, [sso]);
    const slow = await gatewayTo(`http://127.0.0.1:${hanging.port}`, [sso]);
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${down.base}/reports`);
      await page.click('a[data-provider="corp"]');
      await page.waitForURL(`${down.base}/reports`);
      assert.equal(await page.textContent('h1'), 'Acme cannot be reached right now');
      assert.equal(await page.getAttribute('main a.primary', 'href'), '/reports');
      await checkPage(page, 'gateway-app-unreachable');
      const reload = await page.reload();
      assert.equal(reload?.status(), 502);

      // Cookies are per host, not port: the same session (one store) reaches the second gateway.
      const timedOut = await page.goto(`${slow.base}/reports`);
      assert.equal(timedOut?.status(), 504);
      assert.equal(await page.textContent('h1'), 'Acme is not answering');
      await checkPage(page, 'gateway-app-timeout');
    } finally {
      await context.close();
    }
  });

  test('a provider down (503, never 500), rate limited (429 with when to retry), and an account not yet approved (403)', async () => {
    const broken: TestProvider = {
      ...labelled(testRedirectProvider({ name: 'broken', jit: true }), 'Acme SSO'),
      async begin() {
        throw Object.assign(new Error('provider process ended'), { code: 'provider_failed', reason: 'crashed' });
      },
    };
    const invite = labelled(
      testRedirectProvider({
        name: 'invite',
        subject: 'carol',
        jit: true,
        policy: { jit: { enabled: true, emailDomains: [], status: 'disabled' } },
      }),
      'Acme Partners',
    );
    // A provider whose identity provider never sends the browser back: its flows stay open.
    const away: TestProvider = {
      ...labelled(testRedirectProvider({ name: 'away', jit: true }), 'Acme SSO'),
      async begin(ctx) {
        return { state: {}, reply: { kind: 'redirect', location: ctx.callbackUrl.replace(/callback$/, 'elsewhere') } };
      },
    };
    const realClock: Clock = { now: () => Date.now() } as Clock;
    const g = await gatewayTo(`http://127.0.0.1:${hanging.port}`, [broken, invite, away], {
      challenges: createChallengeBudget({ clock: realClock, flowsPerAddress: 2 }),
    });
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const outage = await page.goto(`${g.base}/.svc/auth/v1/providers/broken/begin?return=%2F`);
      assert.equal(outage?.status(), 503);
      assert.equal(await page.textContent('h1'), 'Sign-in is unavailable right now');
      const text = (await page.textContent('main')) ?? '';
      assert.match(text, /Acme SSO/);
      assert.doesNotMatch(text, /\bbroken\b|process ended/, 'no module alias, no internal text');
      await checkPage(page, 'gateway-provider-unavailable');

      // A sign-up by invitation: the account exists but waits for an operator.
      const disabled = await page.goto(`${g.base}/.svc/auth/v1/providers/invite/begin?return=%2F`);
      assert.equal(disabled?.status(), 403);
      assert.equal(await page.textContent('h1'), 'Your account is not active');
      await checkPage(page, 'gateway-account-disabled');

      // The budget of open flows per address (2 here) is spent: the next is 429 with Retry-After.
      await page.goto(`${g.base}/.svc/auth/v1/providers/away/begin?return=%2F`);
      await page.goto(`${g.base}/.svc/auth/v1/providers/away/begin?return=%2F`);
      const limited = await page.goto(`${g.base}/.svc/auth/v1/providers/away/begin?return=%2F`);
      assert.equal(limited?.status(), 429);
      const retry = Number(limited?.headers()['retry-after']);
      assert.ok(Number.isInteger(retry) && retry > 0, 'Retry-After kept');
      assert.equal(await page.textContent('h1'), 'Too many attempts');
      assert.match((await page.textContent('main')) ?? '', /wait \d+ (seconds|minutes)/);
      await checkPage(page, 'gateway-rate-limited');
    } finally {
      await context.close();
    }
  });
});

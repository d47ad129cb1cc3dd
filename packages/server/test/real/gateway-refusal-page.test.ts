// The page a signed-in browser gets where a path requirement (:svc/app-require :groups,
// :email-domains) refuses it, in a real Chromium: what it says, that a display name carrying
// markup stays text (no element, no script runs), and that its sign-out button ends the session.
// A screenshot of the page is written to SVC_TEST_SCREENSHOTS (a directory) when that is set.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, type TestContext, test } from 'node:test';
import { updateUser } from '@svc/core';
import { launchBrowser } from '../repo.js';
import {
  applicationUser,
  echoAttach,
  type GatewayHarness,
  gatewayApi,
  requirement,
  startGatewayHarness,
  testPolicy,
} from '../support/gateway-harness.js';
import type { Pair } from '../support/harness.js';

const actor = { via: 'cli', subject: null, session: null } as const;

type Browser = Awaited<ReturnType<typeof launchBrowser>>;
type BrowserContext = Awaited<ReturnType<Browser['newContext']>>;
type Page = Awaited<ReturnType<BrowserContext['newPage']>>;

/** Writes a full-page screenshot to SVC_TEST_SCREENSHOTS (a directory), when that is set, and says where. */
async function screenshot(page: Page, name: string, t: TestContext): Promise<void> {
  const dir = process.env.SVC_TEST_SCREENSHOTS;
  if (dir === undefined || dir === '') return;
  mkdirSync(dir, { recursive: true });
  const file = join(dir, name);
  await page.screenshot({ path: file, fullPage: true });
  t.diagnostic(`screenshot: ${file}`);
}

describe('the HTML refusal page of a path requirement, in Chromium', () => {
  let browser: Browser;
  let h: GatewayHarness;
  before(async () => {
    browser = await launchBrowser();
    h = await startGatewayHarness({
      attach: echoAttach,
      policy: testPolicy({
        requirements: [
          requirement('/ops/*', { groups: ['ops', 'admins'] }),
          requirement('/staff/*', { groups: ['staff'], emailDomains: ['example.com', 'xn--bcher-kva.example'] }),
        ],
      }),
    });
  });
  after(async () => {
    await h?.close();
    await browser?.close();
  });

  /** A signed-in application user with `attributes`, and a browser context holding its session cookies. */
  async function signedInBrowser(attributes: Record<string, unknown>): Promise<{ context: BrowserContext; pair: Pair }> {
    const { pair } = await applicationUser(h);
    const me = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: pair.access_token });
    await updateUser(h.deps, { subject: me.body.subject, attributes, actor, source: 'operator' });
    const context = await browser.newContext();
    await context.addCookies([
      { name: 'svc-access', value: pair.access_token, url: h.gatewayBase, httpOnly: true, sameSite: 'Lax' },
      { name: 'svc-refresh', value: pair.refresh_token, url: h.gatewayBase, httpOnly: true, sameSite: 'Lax' },
    ]);
    return { context, pair };
  }

  test('it says who is signed in and what the path needs; Sign out ends the session and leads to the sign-in page', async (t) => {
    const { context, pair } = await signedInBrowser({
      name: 'Zoë Ångström 山田',
      email: 'zoe@bücher.example',
      email_verified: false,
      groups: ['dev'],
    });
    try {
      const page = await context.newPage();
      const response = await page.goto(`${h.gatewayBase}/staff/handbook`);
      assert.equal(response?.status(), 403);
      assert.equal(await page.title(), 'You do not have access to this page · svc');
      assert.equal(
        (await page.textContent('p:has(.who)'))?.trim(),
        'Signed in as Zoë Ångström 山田 (zoe@bücher.example, not verified). This page is not open to your account.',
      );
      assert.deepEqual(await page.locator('main li').allTextContents(), [
        'a member of staff',
        'an email at example.com or bücher.example, verified',
      ]);
      await screenshot(page, 'gateway-refusal-403.png', t);
      await Promise.all([page.waitForURL(`${h.gatewayBase}/.svc/auth/v1/login`), page.click('button[type=submit]')]);
      const left = (await context.cookies(h.gatewayBase)).filter((c) => c.name.startsWith('svc-') && c.value !== '');
      assert.deepEqual(left, [], 'no session cookie left in the browser');
      const me = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: pair.access_token });
      assert.equal(me.status, 401, 'the session is over on the gateway');
      const again = await page.goto(`${h.gatewayBase}/staff/handbook`);
      assert.equal(again?.status(), 401, 'signed out: no longer known');
    } finally {
      await context.close();
    }
  });

  test('stored XSS through the display name: markup in the name is shown as text, no element is made, no script runs', async (t) => {
    const evil = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script><b>Bob</b>';
    const { context } = await signedInBrowser({ name: evil, email: null, groups: [] });
    try {
      const page = await context.newPage();
      const dialogs: string[] = [];
      page.on('dialog', (d) => {
        dialogs.push(d.message());
        void d.dismiss();
      });
      const response = await page.goto(`${h.gatewayBase}/ops/deploy`);
      assert.equal(response?.status(), 403);
      assert.equal(await page.textContent('main .who'), evil, 'the name, character for character, as text');
      assert.equal(await page.locator('img, script, b').count(), 0, 'no element from the name');
      assert.equal(await page.evaluate(() => (globalThis as unknown as { pwned?: number }).pwned ?? null), null);
      assert.deepEqual(dialogs, []);
      assert.deepEqual(await page.locator('main li').allTextContents(), ['a member of ops or admins']);
      await screenshot(page, 'gateway-refusal-403-markup-name.png', t);
    } finally {
      await context.close();
    }
  });
});

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pairingProofString } from '@svc/core';
import { cleanEnv, enrolledProject, keygen, type StartedProcess, svcOk, tempDir } from '../helpers.js';
import { checkPage, launchBrowser } from '../repo.js';
import { callJson, type ServedUrls, serveAll, signWith } from '../support/serve-all.js';

type Browser = Awaited<ReturnType<typeof launchBrowser>>;
type Page = Awaited<ReturnType<Browser['newPage']>>;

describe('the management console in Chromium, through svc serve and svc auth console', () => {
  const tmp = tempDir('svc-console-browser-');
  const adminEnv = cleanEnv({ HOME: join(tmp.dir, 'admin-home'), SVC_CREDENTIALS: join(tmp.dir, 'admin-home', 'credentials.json') });
  let server: StartedProcess<ServedUrls>;
  let browser: Browser;
  let page: Page;
  let adminKey: string;

  const consoleUrl = async (): Promise<{ url: string; expires_in: number }> =>
    JSON.parse((await svcOk(['auth', 'console', '--json'], { env: adminEnv })).stdout);

  before(async () => {
    const p = await enrolledProject(tmp.dir, { env: adminEnv });
    adminKey = p.keyFile;
    server = await serveAll(p.dir, adminEnv);
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.ready.management], { env: adminEnv });
    browser = await launchBrowser();
    page = await (await browser.newContext({ viewport: { width: 1100, height: 800 } })).newPage();
  });
  after(async () => {
    await browser?.close();
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('sign in by the one-time URL (a second use and a use after 60 s refused), disable a user whose old token is then refused, follow the audit live while a sign-in happens', async () => {
    // Minted first: it is used once the rest has given it more than 60 s.
    const late = await consoleUrl();
    const lateMintedAt = Date.now();
    assert.equal(late.expires_in, 60);

    const text = (await svcOk(['auth', 'console'], { env: adminEnv })).stdout;
    assert.match(text, /works once/);
    const printed = /^(http:\/\/127\.0\.0\.1:\d+\/console\/login\?code=\S+)$/m.exec(text)?.[1];
    assert.ok(printed !== undefined, text);
    assert.ok(printed.startsWith(server.ready.management), 'a loopback URL of this management listener');

    // No cookie yet: the hint page.
    await page.goto(`${server.ready.management}/console/users`);
    assert.match((await page.textContent('main')) ?? '', /svc auth console/);
    await checkPage(page, 'console-signin');

    const first = await consoleUrl();
    const response = await page.goto(first.url);
    assert.equal(response?.status(), 200);
    assert.equal(new URL(page.url()).pathname, '/console/users');
    assert.match((await page.textContent('header')) ?? '', /Signed in as/);

    // A second use, even from another browser, is refused.
    const other = await (await browser.newContext()).newPage();
    const reused = await other.goto(first.url);
    assert.equal(reused?.status(), 400);
    assert.match((await other.textContent('h1')) ?? '', /cannot be used/);
    await checkPage(other, 'console-link-used');
    await other.context().close();

    // Pairing from the console: an application device; the code is shown once.
    const deviceKey = join(tmp.dir, 'app.pem');
    const devicePublic = await keygen(deviceKey, { env: adminEnv });
    await page.click('nav >> text=Pairing');
    await checkPage(page, 'console-pairing');
    await page.fill('#d-key', devicePublic);
    await page.fill('#d-name', 'Build agent');
    await page.click('text=Prepare device code');
    await checkPage(page, 'console-pairing-code');
    const code = ((await page.textContent('.code-big')) ?? '').trim();
    const intentId = ((await page.textContent('.facts dd code')) ?? '').trim();
    assert.match(code, /^[0-9A-Z]{4}-[0-9A-Z]{4}$/);
    const nodeId = (await callJson(`${server.ready.node}/.well-known/edge`, 'GET')).body.node_id as string;
    const completed = await callJson(`${server.ready.node}/edge/0-alpha/pairing/complete`, 'POST', undefined, {
      intent_id: intentId,
      code,
      public_key: devicePublic,
      signature: signWith(deviceKey, pairingProofString({ nodeId, intentId, publicKey: devicePublic })),
    });
    assert.equal(completed.status, 201, JSON.stringify(completed.body));
    const subject = completed.body.device.subject as string;
    const challenge = await callJson(`${server.ready.app}/.svc/auth/v1/challenges`, 'POST', undefined, { public_key: devicePublic });
    const signedIn = await callJson(`${server.ready.app}/.svc/auth/v1/sessions`, 'POST', undefined, {
      challenge_id: challenge.body.challenge_id,
      signature: signWith(deviceKey, challenge.body.challenge),
    });
    assert.equal(signedIn.status, 201);
    const oldToken = signedIn.body.access_token as string;
    assert.equal((await callJson(`${server.ready.app}/.svc/auth/v1/me`, 'GET', oldToken)).status, 200);

    // Users: the list, the user's page, give them a name, then disable them.
    await page.click('nav >> text=Users');
    await page.fill('#f-text', subject);
    await page.click('button:has-text("Filter")');
    await page.click(`a[href="/console/users/${subject}"]`);
    await page.fill('#e-name', 'Build Agent');
    await page.fill('#e-groups', 'ci, builders');
    await page.click('button:has-text("Save")');
    assert.match((await page.textContent('[role=status]')) ?? '', /saved/);
    await page.click('button:has-text("Disable user")');
    assert.match((await page.textContent('[role=status]')) ?? '', /disabled/);
    await checkPage(page, 'console-user');
    const refused = await callJson(`${server.ready.app}/.svc/auth/v1/me`, 'GET', oldToken);
    assert.equal(refused.status, 401, 'the next request with the old token');
    assert.equal(refused.body.code, 'invalid_token');
    await page.click('nav >> text=Users');
    await checkPage(page, 'console-users');

    // The audit trail, followed live while the administrator signs in again from the CLI.
    await page.click('nav >> text=Audit trail');
    await page.click('#follow');
    await page.waitForSelector('#live-status:has-text("Following")', { timeout: 10_000 });
    await svcOk(['auth', 'login', '--key', adminKey, '--url', server.ready.management], { env: adminEnv });
    await page.waitForSelector('tr.fresh:has-text("session.created")', { timeout: 15_000 });
    assert.equal(new URL(page.url()).pathname, '/console/audit', 'no reload');
    await checkPage(page, 'console-audit');
    await page.click('text=Verify the chain');
    assert.match((await page.textContent('p.notice')) ?? '', /hash chain is intact/);

    await page.click('nav >> text=Sessions & devices');
    await checkPage(page, 'console-sessions');
    await page.click('nav >> text=Status');
    await checkPage(page, 'console-status');

    // The link minted first, used after its 60 s: refused.
    const wait = lateMintedAt + 61_000 - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const stale = await (await browser.newContext()).newPage();
    const lateUse = await stale.goto(late.url);
    assert.equal(lateUse?.status(), 400, 'a link used after 60 s');
    await stale.context().close();

    // Sign out: the console asks for a new link.
    await page.click('header >> text=Sign out');
    assert.match((await page.textContent('h1')) ?? '', /Signed out/);
    await page.goto(`${server.ready.management}/console/users`);
    assert.match((await page.textContent('h1')) ?? '', /Sign in to the console/);
  });
});

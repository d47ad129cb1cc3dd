// The account page and recovery, as staff meet them: `svc serve` with the bundled, signed
// passkey provider in front of an application, a real Chromium with virtual authenticators.
// A person signs up, sees who they are and where they are signed in, signs a second browser
// out, adds a second passkey, renames it, removes one (never the last); a person who lost their
// only passkey gets back in with a one-time code an operator issues, lands on the account page
// and removes the lost passkey. Every page state is screenshotted and checked with axe-core.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanEnv, freePort, initProject, keygen, type StartedProcess, startUntilReady, svcOk, tempDir } from '../helpers.js';
import { type AuthenticatorPage, addAuthenticator, checkPage, launchBrowser, pageWithAuthenticator, REPO_ROOT } from '../repo.js';

type Browser = Awaited<ReturnType<typeof launchBrowser>>;
type Page = AuthenticatorPage['page'];

const APP_READY = /svc app: application gateway listening on (https?:\/\/\S+)\n/;
const ACCOUNT = '/.svc/account';
const WAIT_MS = 20_000;

async function echoApp(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ path: req.url, subject: req.headers['svc-subject'] ?? null }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** The passkeys the account page lists, by name, with whether each signed this session in. */
async function listedPasskeys(page: Page): Promise<{ name: string; current: boolean }[]> {
  return page.$$eval('.passkeys li.card', (cards) =>
    cards.map((c) => ({
      name: c.querySelector('.card-title strong')?.textContent ?? '',
      current: (c.textContent ?? '').includes('used for this session'),
    })),
  );
}

describe('the account page and recovery through svc serve, in a real Chromium', () => {
  const tmp = tempDir('svc-account-serve-');
  const dir = join(tmp.dir, 'demo');
  let app: Awaited<ReturnType<typeof echoApp>>;
  let served: StartedProcess<string>;
  let gateway: string;
  let node: string;
  let browser: Browser;
  const adminEnv = cleanEnv({ HOME: join(tmp.dir, 'admin-home'), SVC_CREDENTIALS: join(tmp.dir, 'admin-home', 'credentials.json') });
  const adminKey = join(tmp.dir, 'admin.pem');

  before(async () => {
    const init = await initProject(dir);
    await svcOk(['auth', 'enroll', init.bootstrap_token, await keygen(adminKey), dir]);
    app = await echoApp();
    const sums = readFileSync(join(REPO_ROOT, 'packages/runtime/addons/SHA256SUMS'), 'utf8');
    const digest = /^([0-9a-f]{64}) {2}svc-provider-webauthn-/m.exec(sums)?.[1];
    assert.ok(digest, 'the build bundles the WebAuthn provider');
    const publisher = readFileSync(join(REPO_ROOT, 'keys/svc-publisher.pub'), 'utf8').trim();
    const file = join(dir, 'project.edn');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/^\{/, `{:svc/trusted-publishers {"svc" "${publisher}"}\n `));
    await svcOk(['package', 'install', '@svc/provider-webauthn', '--sha256', digest, dir]);
    const port = await freePort();
    gateway = `http://localhost:${port}`;
    const edn = readFileSync(file, 'utf8')
      .replace(/^\{/, `{:svc/app-upstream "${app.url}"\n `)
      .replace(
        ':svc/modules  {',
        `:svc/modules {:passkeys {:package "@svc/provider-webauthn" :activate [:svc/auth-provider]
                           :config {:webauthn/rp-id "localhost" :webauthn/rp-name "Acme"
                                    :webauthn/origins ["${gateway}"]
                                    :provider/jit true}}
                `,
      );
    assert.ok(edn.includes(':passkeys'), edn);
    writeFileSync(file, edn);
    served = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', `127.0.0.1:${port}`, dir],
      (out) => APP_READY.exec(out)?.[1] ?? null,
      { env: cleanEnv() },
    );
    const management = /svc auth: management API listening on (http:\/\/\S+)/.exec(served.stdout())?.[1];
    assert.ok(management, served.stdout());
    node = /svc node: node surface listening on (http:\/\/\S+)/.exec(served.stdout())?.[1] as string;
    assert.ok(node, served.stdout());
    await svcOk(['auth', 'login', '--key', adminKey, '--url', management], { env: adminEnv });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await served?.stop();
    await app?.close();
    tmp.cleanup();
  });

  /** Signs up a new person on `page` from the account page's sign-in redirect; lands on the account page. */
  async function signUpToAccount(page: Page, name: string): Promise<void> {
    await page.goto(`${gateway}${ACCOUNT}`);
    assert.equal(new URL(page.url()).pathname, '/.svc/auth/v1/login', 'no session: sent to sign in');
    assert.equal(new URL(page.url()).searchParams.get('return'), ACCOUNT);
    await page.fill('#display-name', name);
    await page.click('button[data-intent="signup"]');
    await page.waitForURL(`${gateway}${ACCOUNT}`, { timeout: WAIT_MS });
  }

  test('who you are, two sessions and sign out everywhere else, add a passkey, rename it, remove one, never the last', async () => {
    const first = await pageWithAuthenticator(browser);
    const page = first.page;
    await signUpToAccount(page, 'Ada Lovelace');
    assert.equal(await page.textContent('h1'), 'Your account');
    assert.match((await page.textContent('.facts')) ?? '', /Ada Lovelace/);
    assert.match((await page.textContent('.facts')) ?? '', /With a passkey/);
    const [own] = await listedPasskeys(page);
    assert.match(own?.name ?? '', /^Passkey added \d+ \w+ \d{4}/, 'a passkey the person did not name yet is called by when it was added');
    assert.equal(own?.current, true);
    assert.match((await page.textContent('main')) ?? '', /This is your only way to sign in, so it cannot be removed/);
    await checkPage(page, 'account');

    // A second browser signs in with the same passkey (copied to its own authenticator).
    const { credentials } = await first.cdp.send('WebAuthn.getCredentials', { authenticatorId: first.authenticatorId });
    assert.equal(credentials.length, 1);
    const credential = credentials[0];
    assert.ok(credential !== undefined);
    const second = await pageWithAuthenticator(browser);
    await second.cdp.send('WebAuthn.addCredential', { authenticatorId: second.authenticatorId, credential });
    await second.page.goto(`${gateway}${ACCOUNT}`);
    await second.page.click('button[data-intent="signin"]');
    await second.page.waitForURL(`${gateway}${ACCOUNT}`, { timeout: WAIT_MS });

    await page.reload();
    assert.equal(await page.locator('.sessions li').count(), 2, 'two sessions listed');
    assert.match((await page.textContent('.sessions')) ?? '', /this browser/);
    await checkPage(page, 'account-two-sessions');
    await page.click('button:has-text("Sign out everywhere else")');
    await page.waitForURL(`${gateway}${ACCOUNT}?done=signed-out-elsewhere`, { timeout: WAIT_MS });
    assert.equal(await page.locator('.sessions li').count(), 1);
    assert.match((await page.textContent('main')) ?? '', /You are now signed out everywhere else/);
    await checkPage(page, 'account-signed-out-elsewhere');
    // The other browser's next request is sent to sign in.
    await second.page.goto(`${gateway}/whoami`);
    assert.equal(new URL(second.page.url()).pathname, '/.svc/auth/v1/login', 'the other browser is signed out');
    await second.context.close();

    // Add another passkey: a new device (a second authenticator; the first one is taken away so the browser uses the new one).
    await first.cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId: first.authenticatorId });
    await addAuthenticator(first.cdp);
    await page.click('#add-passkey');
    await page.waitForURL(`${gateway}${ACCOUNT}?done=added`, { timeout: WAIT_MS });
    const added = await listedPasskeys(page);
    assert.equal(added.length, 2, JSON.stringify(added));
    await checkPage(page, 'account-passkey-added');

    // Rename the new one (the one that did not sign this session in).
    const newIndex = added.findIndex((p) => !p.current);
    const card = page.locator('.passkeys li.card').nth(newIndex);
    await card.locator('summary:has-text("Rename")').click();
    await card.locator('input[name="name"]').fill('Work laptop');
    await checkPage(page, 'account-passkey-rename-open');
    await card.locator('button:has-text("Save name")').click();
    await page.waitForURL(`${gateway}${ACCOUNT}?done=renamed`, { timeout: WAIT_MS });
    const names = (await listedPasskeys(page)).map((p) => p.name);
    assert.ok(names.includes('Work laptop'), JSON.stringify(names));
    assert.ok(names.includes(own?.name as string), JSON.stringify(names));
    await checkPage(page, 'account-passkeys-renamed');

    // Remove it: one passkey is left, and it cannot be removed.
    await page.locator('.passkeys li.card:has(.card-title strong:text-is("Work laptop"))').locator('button:has-text("Remove")').click();
    await page.waitForURL(`${gateway}${ACCOUNT}?done=removed`, { timeout: WAIT_MS });
    assert.deepEqual(await listedPasskeys(page), [own]);
    assert.equal(await page.locator('button:has-text("Remove")').count(), 0, 'no remove button for the only way in');
    await checkPage(page, 'account-passkey-removed');

    // A remove of the last one posted anyway (an old tab, a hand-made form): refused with a sentence.
    const lastId = await page.$eval(
      '.passkeys li.card form[action$="/rename"]',
      (f) => /passkeys\/([^/]+)\/rename/.exec(f.getAttribute('action') ?? '')?.[1] ?? '',
    );
    // Runs in the page (a string: this package's tests have no DOM types).
    await page.evaluate(`(() => {
      const form = document.createElement('form');
      form.method = 'post';
      form.action = '/.svc/account/passkeys/${lastId}/remove';
      document.body.append(form);
      form.submit();
    })()`);
    await page.locator('.error', { hasText: /only way to sign in/ }).waitFor({ timeout: WAIT_MS });
    await checkPage(page, 'account-last-passkey-refused');
    await page.goto(`${gateway}${ACCOUNT}`);
    assert.equal((await listedPasskeys(page)).length, 1, 'the last passkey is still there');

    // Each action was audited as self-service.
    const audit = (await svcOk(['auth', 'audit', '--json', dir], { env: adminEnv })).stdout;
    const events = audit
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as { type?: string; data?: Record<string, unknown> });
    for (const type of ['link.renamed', 'link.removed', 'session.revoked']) {
      const event = events.findLast((e) => e.type === type);
      assert.equal(event?.data?.via, 'self', `${type} is self-service: ${JSON.stringify(event)}`);
    }
    await first.context.close();
  });

  test('recovery: the only passkey is lost, an operator issues a code, the person creates a new passkey, lands on the account page and removes the lost one', async () => {
    const lost = await pageWithAuthenticator(browser);
    await signUpToAccount(lost.page, 'Grace Hopper');
    // The device is lost: its authenticator and its browser are gone.
    await lost.cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId: lost.authenticatorId });
    await lost.context.close();

    // The operator finds the person and issues a one-time link code for their subject.
    const users = JSON.parse((await svcOk(['auth', 'users', '--realm', 'application', '--json'], { env: adminEnv })).stdout) as {
      users: { subject: string; name: string | null }[];
    };
    const grace = users.users.find((u) => u.name === 'Grace Hopper');
    assert.ok(grace, JSON.stringify(users));
    const prepared = await svcOk(
      [
        'auth',
        'pair',
        '--provider',
        'passkeys',
        '--realm',
        'application',
        '--subject',
        grace.subject,
        '--node-url',
        node,
        '--app-url',
        gateway,
        '--json',
      ],
      { env: adminEnv },
    );
    const intent = JSON.parse(prepared.stdout) as { code: string; sign_in_url: string; subject: string };
    assert.equal(intent.subject, grace.subject);

    // On a new device: the link from the operator, the code typed in.
    const fresh = await pageWithAuthenticator(browser);
    const page = fresh.page;
    await page.goto(intent.sign_in_url);
    assert.match((await page.textContent('body')) ?? '', /Your administrator gave you a one-time code to set up a new passkey/);
    await checkPage(page, 'recovery-code-entry');
    await page.fill('#pairing-code', intent.code);
    await page.click('button[data-intent="link"]');
    await page.waitForURL(`${gateway}${ACCOUNT}`, { timeout: WAIT_MS });
    const listed = await listedPasskeys(page);
    assert.equal(listed.length, 2, 'the lost passkey and the new one');
    assert.equal(listed.filter((p) => p.current).length, 1);
    await checkPage(page, 'recovery-account');

    // Remove the lost one (the one that did not sign this session in).
    const lostIndex = listed.findIndex((p) => !p.current);
    await page.locator('.passkeys li.card').nth(lostIndex).locator('button:has-text("Remove")').click();
    await page.waitForURL(`${gateway}${ACCOUNT}?done=removed`, { timeout: WAIT_MS });
    assert.deepEqual(
      (await listedPasskeys(page)).map((p) => p.current),
      [true],
    );
    await checkPage(page, 'recovery-lost-passkey-removed');
    const links = JSON.parse((await svcOk(['auth', 'links', dir, '--subject', grace.subject, '--json'])).stdout) as { links: unknown[] };
    assert.equal(links.links.length, 1, 'only the new passkey is linked');
    // The code was used: a second use is refused.
    const again = await pageWithAuthenticator(browser);
    await again.page.goto(intent.sign_in_url);
    await again.page.fill('#pairing-code', intent.code);
    await again.page.click('button[data-intent="link"]');
    await again.page.locator('#status', { hasText: /\S/ }).waitFor({ state: 'attached', timeout: WAIT_MS });
    assert.match(new URL(again.page.url()).pathname, /^\/\.svc\/auth\/v1\/login/);
    await again.context.close();
    await fresh.context.close();
  });

  test('a form posted to the account page from another origin is refused 403 csrf_refused', async () => {
    const { page, context } = await pageWithAuthenticator(browser);
    await signUpToAccount(page, 'Mallory Target');
    // A form from another site, with the victim's cookies (as a browser that sent them would).
    const cookies = await context.cookies(gateway);
    const jar = cookies.map((c) => `${c.name}=${c.value}`).join('; ');
    const res = await fetch(`${gateway}/.svc/account/sessions/revoke-others`, {
      method: 'POST',
      headers: { cookie: jar, origin: app.url, 'content-type': 'application/x-www-form-urlencoded' },
      body: '',
      redirect: 'manual',
    });
    assert.equal(res.status, 403);
    assert.equal(((await res.json()) as { code: string }).code, 'csrf_refused');
    await page.reload();
    assert.equal(await page.textContent('h1'), 'Your account', 'still signed in');
    await context.close();
  });
});
